"""diagnose's result as a whole (attn.traces.diagnosis.diagnose): our runs, the trace lint, the command line's
refusals, and every real trace's diagnosis equal to the one recorded in
tests/fixtures/diagnose_expected/."""

import json
import sys
from pathlib import Path

import pytest

from attn.profiling import cli
from attn.traces.read.trace import Trace, read_trace

sys.path.insert(0, str(Path(__file__).parent))
from diagnose_cases import CPU_SET, RANKED, REAL, SINGLE, diagnose, kinds, raw, traced  # noqa: E402

from attn.traces.diagnosis.diagnose import diagnose_ranks  # noqa: E402

# --- our runs (profiles/cpu), as the issue lists them -----------------------------------------

OURS = {  # variant -> (implementation, compiled, findings)
    "naive": ("eager", False, {"out_of_place_masked_fill": 3, "eager_attention": 3}),
    "inplace": ("eager", False, {"eager_attention": 3}),
    "sdpa_math": ("sdpa_math", False, {}),
    "sdpa_flash": ("sdpa_flash", False, {}),
    "custom_cpu": ("custom", False, {}),
    "compiled_naive": ("eager", True, {"eager_attention": 3}),
    "compiled_additive": ("sdpa_flash", True, {}),
    "flex_causal": ("flex", True, {}),
    "flex_sliding_window": ("flex", True, {}),
    "decode_repeat_kv": ("sdpa_flash", False, {"repeat_kv": 6}),
    "decode_enable_gqa": ("sdpa_flash", False, {}),
}


@pytest.mark.parametrize("variant", sorted(OURS))
def test_our_runs_are_named_and_diagnosed(variant):
    path = CPU_SET / variant / "trace.json.gz"
    if not path.is_file():
        pytest.skip(f"no committed trace of {variant} on this checkout")
    result = diagnose(read_trace(path))
    implementation, compiled, found = OURS[variant]
    (row,) = result["attention"]  # three forwards, one call each, all in attn_fwd
    assert (row["implementation"], row["compiled"], row["where"], row["calls"]) == (
        implementation, compiled, "attn_fwd", 3,
    )  # fmt: skip
    assert row["kernels_per_call"] is None and row["device_time_us_per_call"] is None  # a CPU run
    assert kinds(result) == found
    assert result["not_checked"] == []


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"hello": 1}', "not a Chrome trace"),
        (
            '{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon"}]}',
            "an event that cannot be read",
        ),
    ],
)
def test_a_non_trace_gets_one_line(tmp_path, capsys, text, says):
    bad = tmp_path / "notes.json"
    bad.write_text(text)
    assert cli.main(["diagnose", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err


# --- trace lint, and a folder given as the trace ----------------------------------------------------


def test_lint_says_what_in_the_trace_misleads():
    cpu = {"ph": "X", "pid": 1, "tid": 1, "cat": "cpu_op"}
    overlapping = {
        "traceEvents": [
            {**cpu, "name": "aten::a", "ts": 0, "dur": 10},
            {**cpu, "name": "aten::b", "ts": 5, "dur": 10},  # starts in a, ends after it
            {**cpu, "name": "aten::c", "ts": 6, "dur": 2},  # nests in a and in b
        ]
    }
    (line, *rest) = diagnose(Trace(overlapping))["lint"]
    assert line.startswith("1 complete event(s) overlap") and "Perfetto" in line
    assert any("no device activity" in r for r in rest) and any(
        "no input shapes" in r for r in rest
    )
    graph = diagnose(traced("tracelens-mi300x-sglang-decode-graph"))["lint"]
    launches = [e for e in raw("tracelens-mi300x-sglang-decode-graph")["traceEvents"]
                if e.get("name") == "hipGraphLaunch"]  # fmt: skip
    ids = {e["args"]["correlation"] for e in launches}
    replayed = [e for e in raw("tracelens-mi300x-sglang-decode-graph")["traceEvents"]
                if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in ids]  # fmt: skip
    assert f"{len(replayed)} kernel(s) were replayed from {len(launches)} CUDA/HIP graph" in (
        " ".join(graph)
    )
    clean = diagnose(traced("tracelens-mi300x-compiled-sdpa"))["lint"]
    assert clean == []


def test_a_folder_without_rank_traces_gets_one_line(tmp_path, capsys):
    """A folder is read as a folder of ranks (tests/test_traces_folder.py): one without any says so."""
    (tmp_path / "notes.txt").write_text("no trace here\n")
    assert cli.main(["diagnose", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a folder with no traces of ranks in it" in err


# --- every real trace's diagnosis, as recorded ------------------------------------------------------

# Each written by `python -m attn.profiling diagnose`; after a change made on purpose, rewrite them
# (a folder of several traces is a folder of ranks, given whole):
# for d in tests/fixtures/realtraces/*/; do t=("$d"*.json*); [ ${#t[@]} -gt 1 ] && t=("$d"); \
#     python -m attn.profiling diagnose "${t[0]}" \
#     --json "tests/fixtures/diagnose_expected/$(basename "$d").json" > /dev/null; done
EXPECTED = REAL.parent / "diagnose_expected"


def test_every_real_trace_has_its_expected_diagnosis():
    assert {p.stem for p in EXPECTED.glob("*.json")} == {p.name for p in REAL.iterdir()}


@pytest.mark.parametrize("folder", SINGLE)
def test_the_diagnosis_of_a_real_trace_is_the_one_recorded(folder):
    """Every number, name and sentence of `diagnose --json`, floats to the last bit: the work is
    deterministic, so any change here is a change of behaviour, to be made on purpose."""
    expected = json.loads((EXPECTED / f"{folder}.json").read_text(encoding="utf-8"))
    assert json.loads(json.dumps(diagnose(traced(folder)))) == expected


@pytest.mark.parametrize("folder", RANKED)
def test_the_diagnosis_of_a_real_folder_of_ranks_is_the_one_recorded(folder):
    """The same for a folder of ranks: every rank's row and diagnosis, and the imbalance."""
    expected = json.loads((EXPECTED / f"{folder}.json").read_text(encoding="utf-8"))
    found = diagnose_ranks(REAL / folder)
    assert json.loads(json.dumps(found)) == expected
