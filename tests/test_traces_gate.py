"""attn.traces.compare.gate: diff as a CI gate, its rules and exit codes, and the CI job the docs show.

Hand-made traces give each kind of regression alone; the job in examples/ci/attention-gate.yml is
run as GitHub would run it (its `run:` steps, in order, in a copy of the repository), once on the
module as it is and once with its in-place masking made out-of-place again.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from attn.traces.common import artifacts
from attn.traces.compare.gate import RULES, Rule, gate, main, parse_rules
from attn.traces.sets.analyze import write_artifacts

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "examples" / "ci" / "attention-gate.yml"
MIB = 2**20
MEMCPY, MEMSET = "Memcpy DtoD (Device -> Device)", "Memset (Device)"
BASE = {"ops": ("aten::mul", "aten::softmax"), "kernels": ("mul_kernel",), "memcpy": 0,
        "memset": 0, "peak": MIB}  # fmt: skip


# --- hand-made runs: a pretend GPU forward whose ops, kernels, copies and peak are given ----------


def _forward(t0: int, corr: int, ops, kernels, memcpy: int, memset: int, peak: int) -> list:
    pid = {"pid": 1, "tid": 1}
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": t0, "dur": 900, **pid}
    ]
    events += [{"ph": "X", "cat": "cpu_op", "name": op, "ts": t0 + 1 + 10 * i, "dur": 5, **pid}
               for i, op in enumerate(ops)]  # fmt: skip
    device = [(k, "kernel") for k in kernels] + [(MEMCPY, "gpu_memcpy")] * memcpy
    device += [(MEMSET, "gpu_memset")] * memset
    for i, (name, cat) in enumerate(device):
        ts, args = t0 + 300 + 20 * i, {"correlation": corr + i}
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts,
                       "dur": 1, "args": args, **pid})  # fmt: skip
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts + 2, "dur": 5, "pid": 0,
                       "tid": 7, "args": args})  # fmt: skip
    memory = {"ph": "i", "name": "[memory]", **pid}
    events.append({**memory, "ts": t0 + 2, "args": {"Device Type": 1, "Bytes": peak}})
    return events + [{**memory, "ts": t0 + 890, "args": {"Device Type": 1, "Bytes": -peak}}]


def write_run(folder: Path, **changes) -> Path:
    """A variant folder holding a trace of two forwards: BASE with `changes` laid over it."""
    spec = {**BASE, **changes}
    events = _forward(0, 10, **spec) + _forward(1000, 50, **spec)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / artifacts.TRACE).write_bytes(
        gzip.compress(json.dumps({"traceEvents": events}).encode())
    )
    return folder


def timing(folder: Path, **medians) -> None:
    """The set's timing.json: per variant (median, low, high) in µs."""
    rows = [
        {"variant": v, "median_us": m, "low_us": lo, "high_us": hi, "repeats": 10}
        for v, (m, lo, hi) in medians.items()
    ]
    (folder / artifacts.TIMING).write_text(
        json.dumps({"interval": "interquartile range", "rows": rows})
    )


# A verdict's line: headed by the rule it breaks, or "cannot tell", or the pass.
VERDICT = re.compile(rf"(({'|'.join([*RULES, 'missing'])})(:\d+%)?: |cannot tell|no regr)")


def run_gate(capsys, *argv) -> tuple[int, list[str], str]:
    """(exit status, the lines the gate printed, stderr) of `diff ARGV`."""
    code = main([str(a) for a in argv])
    said = capsys.readouterr()
    lines = [ln for ln in said.out.splitlines() if VERDICT.match(ln)]
    return code, lines, said.err


# --- the rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("counts", [Rule("counts")]),
        ("kernels,memcpy", [Rule("kernels"), Rule("memcpy")]),
        ("peak:10%", [Rule("peak", 0.1)]),
        ("time, peak:2.5%", [Rule("time"), Rule("peak", 0.025)]),
    ],
)
def test_rules_read_as_written(text, rules):
    assert parse_rules(text) == rules
    assert ",".join(map(str, rules)).replace(" ", "") == text.replace(" ", "")


@pytest.mark.parametrize("text", ["", "count", "kernels:10%", "peak:10", "peak:x%", "peak:-5%"])
def test_a_bad_rule_is_named(text):
    with pytest.raises(ValueError, match="rule|share|percentage"):
        parse_rules(text)


def test_a_bad_fail_on_exits_2_naming_it(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    with pytest.raises(SystemExit) as exit_:
        main([str(a), str(a), "--fail-on", "copies"])
    assert exit_.value.code == 2
    assert "'copies' is no rule" in capsys.readouterr().err.strip().splitlines()[-1]


# --- exit codes: each kind of regression, and none -------------------------------------------------


def test_no_change_passes(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    code, lines, _ = run_gate(capsys, a, b, "--fail-on")
    assert (code, lines) == (0, ["no regression (fail on counts)"])


def test_without_fail_on_diff_is_a_report(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", ops=("aten::mul",))
    code, lines, _ = run_gate(capsys, a, b)
    assert (code, lines) == (0, [])


@pytest.mark.parametrize(
    ("rule", "change", "line"),
    [
        (
            "counts",
            {"ops": ("aten::mul",)},
            "aten::softmax (op) 1 -> 0 per forward, gone (breaks counts)",
        ),
        ("ops", {"ops": (*BASE["ops"], "aten::clone")}, "aten::clone (op) 0 -> 1 per forward, new"),
        ("ops", {"ops": (*BASE["ops"], "aten::mul")}, "aten::mul (op) 1 -> 2 per forward, more"),
        ("kernels", {"kernels": ("mul_kernel", "k2")}, "k2 (kernel) 0 -> 1 per forward, new"),
        ("memcpy", {"memcpy": 1}, f"{MEMCPY} (memcpy) 0 -> 1 per forward, new"),
        ("memset", {"memset": 2}, f"{MEMSET} (memset) 0 -> 2 per forward, new"),
        ("peak:10%", {"peak": 3 * MIB // 2}, "peak memory 1.0 MiB -> 1.5 MiB (+50%)"),
    ],
    ids=["counts", "new op", "more op", "kernel", "memcpy", "memset", "peak"],
)
def test_each_kind_of_regression_fails_with_its_line(tmp_path, capsys, rule, change, line):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", **change)
    code, lines, err = run_gate(capsys, a, b, "--fail-on", rule)
    assert (code, lines, err) == (1, [f"{rule}: a -> b: {line}"], "")


@pytest.mark.parametrize(
    ("rule", "change"),
    [
        ("ops", {"ops": ("aten::mul",)}),  # fewer ops: not a regression of ops
        ("kernels", {"ops": (*BASE["ops"], "aten::clone")}),  # an op: not a kernel
        ("memcpy,memset", {"kernels": ("mul_kernel", "k2")}),
        ("peak:60%", {"peak": 3 * MIB // 2}),  # 50% higher, 60% allowed
        ("counts", {"peak": 2 * MIB}),  # peak memory is not a count
    ],
)
def test_a_change_no_rule_names_passes(tmp_path, capsys, rule, change):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", **change)
    code, lines, _ = run_gate(capsys, a, b, "--fail-on", rule)
    assert code == 0 and lines[-1].startswith("no regression")


def test_rules_add_up_and_each_regression_is_one_line(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", ops=(*BASE["ops"], "aten::clone"), memcpy=1, peak=2 * MIB)
    code, lines, _ = run_gate(capsys, a, b, "--fail-on", "memcpy", "--fail-on", "ops,peak")
    assert code == 1 and len(lines) == 3
    assert lines == [
        f"memcpy: a -> b: {MEMCPY} (memcpy) 0 -> 1 per forward, new",
        "ops: a -> b: aten::clone (op) 0 -> 1 per forward, new",
        "peak: a -> b: peak memory 1.0 MiB -> 2.0 MiB (+100%)",
    ]


# --- times: they decide only where both sides were timed, and cannot tell never fails -------------


def two_sets(tmp_path: Path, time_a=None, time_b=None) -> tuple[Path, Path]:
    sets = []
    for side, medians in (("a", time_a), ("b", time_b)):
        folder = tmp_path / side / "cpu-test"
        write_run(folder / "naive")
        if medians:
            timing(folder, naive=medians)
        sets.append(folder)
    return sets[0], sets[1]


@pytest.mark.parametrize(
    ("time_b", "code", "said"),
    [
        ((150, 145, 155), 1, "time: naive: time 1.50× (1.38–1.63×) of A's: the whole interval is above 1×"),
        ((104, 90, 120), 0, "cannot tell: naive: time 1.04× (0.86–1.26×) of A's: the interval holds 1×"),
        ((80, 78, 82), 0, "no regression (fail on time)"),
    ],
    ids=["slower", "cannot tell", "faster"],
)  # fmt: skip
def test_time_decides_by_the_whole_interval(tmp_path, capsys, time_b, code, said):
    a, b = two_sets(tmp_path, time_a=(100, 95, 105), time_b=time_b)
    got, lines, _ = run_gate(capsys, a, b, "--fail-on", "time")
    assert got == code and said in lines


def test_a_share_moves_the_limit(tmp_path, capsys):
    a, b = two_sets(tmp_path, time_a=(100, 95, 105), time_b=(150, 145, 155))
    code, lines, _ = run_gate(capsys, a, b, "--fail-on", "time:40%")
    assert code == 0 and any("the interval holds 1.4×" in ln for ln in lines)
    assert run_gate(capsys, a, b, "--fail-on", "time:20%")[0] == 1


@pytest.mark.parametrize("timed", ["a", "b", "neither"])
def test_time_without_a_timing_pass_on_both_sides_never_fails(tmp_path, capsys, timed):
    slow, fast = (500, 490, 510), (100, 95, 105)
    a, b = two_sets(tmp_path, fast if timed == "a" else None, slow if timed == "b" else None)
    code, lines, _ = run_gate(capsys, a, b, "--fail-on", "time")
    assert code == 0 and any(
        ln.startswith("cannot tell: naive: time: no timing pass") for ln in lines
    )


def test_a_variant_folder_is_timed_by_its_sets_timing_pass(tmp_path):
    a, b = two_sets(tmp_path, time_a=(100, 95, 105), time_b=(150, 145, 155))
    result = gate(a / "naive", b / "naive", [Rule("time")])
    assert result["passed"] is False and result["pairs"][0]["timing_median_us"] == {
        "a": 100,
        "b": 150,
    }
    trace = a / "naive" / artifacts.TRACE  # a bare trace carries no timing pass
    assert gate(trace, b / "naive", [Rule("time")])["passed"] is True


# --- sets: variant by variant ----------------------------------------------------------------------


def test_sets_are_compared_variant_by_variant(tmp_path, capsys):
    for side in ("a", "b"):
        write_run(tmp_path / side / "naive")
        write_run(tmp_path / side / "gone" if side == "a" else tmp_path / side / "new")
    write_run(tmp_path / "b" / "inplace", memcpy=1)
    write_run(tmp_path / "a" / "inplace")
    unavailable = tmp_path / "a" / "sdpa_flash"  # ran nowhere: nothing to say
    unavailable.mkdir()
    (unavailable / artifacts.SUMMARY).write_text(
        json.dumps({"variant": "sdpa_flash", "available": False})
    )
    code, lines, _ = run_gate(capsys, tmp_path / "a", tmp_path / "b", "--fail-on", "memcpy")
    assert code == 1
    assert lines == [
        f"memcpy: inplace: {MEMCPY} (memcpy) 0 -> 1 per forward, new",
        f"missing: gone: ran in {tmp_path / 'a'}, not in {tmp_path / 'b'}",
    ]
    result = gate(tmp_path / "a", tmp_path / "b", [])
    assert [p["a"]["label"] for p in result["pairs"]] == ["inplace", "naive"]
    assert result["notes"] == [f"new: ran in {tmp_path / 'b'} only"] and result["passed"] is None


# --- bad input: exit 2, one line -------------------------------------------------------------------


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list, str]]:
    run = write_run(tmp_path / "set" / "naive")
    empty, text = tmp_path / "empty", tmp_path / "notes.txt"
    empty.mkdir()
    text.write_text("not a trace")
    broken = write_run(tmp_path / "broken" / "naive").parent
    timing(broken, naive=(100, 120, 90))  # low above the median
    newer = write_run(tmp_path / "newer")
    (newer / artifacts.SUMMARY).write_text(json.dumps({
        "schema": 99, "variant": "newer", "forwards": 2, "cpu_time_us": 1.0, "device_time_us": None,
        "ops_per_forward": 2, "kernels_per_forward": 1, "memcpy_per_forward": {},
        "memset_per_forward": 0, "peak_memory_bytes": MIB,
    }))  # fmt: skip
    cases = {
        "missing": ([run, tmp_path / "nope"], "nope: no such file"),
        "set and run": ([run.parent, run], "is a set of variants and"),
        "empty folder": ([run, empty], "empty"),
        "not a trace": ([text, text], "notes.txt"),
        "broken timing": ([run.parent, broken, "--fail-on", "time"], "timing.json: naive"),
        "newer summary": ([run, newer], "schema 99"),
        "json over an input": ([run, run, "--json", run / artifacts.TRACE], "is an input"),
    }
    return {**cases, **_bad_numbers(tmp_path, run.parent)}


def _summary(folder: Path, peak) -> Path:
    """A variant folder whose summary.json (written as given: NaN, Infinity) says its peak."""
    run = write_run(folder)
    (run / artifacts.SUMMARY).write_text(json.dumps({
        "variant": "naive", "forwards": 2, "cpu_time_us": 1.0, "device_time_us": None,
        "ops_per_forward": 2, "kernels_per_forward": 1, "memcpy_per_forward": {},
        "memset_per_forward": 0, "peak_memory_bytes": peak,
    }))  # fmt: skip
    return run


def _bad_numbers(tmp_path: Path, good: Path) -> dict[str, tuple[list, str]]:
    """Times and peaks that are no measurement: the gate read them as a verdict ("inf×" exit 0,
    `true` as 1 us, a NaN peak as a regression) or ended in a traceback."""
    timing(good, naive=(100, 90, 110))
    cases: dict[str, tuple[list, str]] = {}
    inf = float("inf")
    for name, medians in {
        "median Infinity in B": (inf, 90, inf),
        "median true in B": (True, True, True),
        "median 400 digits in B": (10**400, 90, 10**401),
    }.items():
        folder = write_run(tmp_path / name / "naive").parent
        timing(folder, naive=medians)
        cases[name] = ([good, folder, "--fail-on", "time"], "timing.json")
    a_inf = write_run(tmp_path / "a inf" / "naive").parent
    timing(a_inf, naive=(inf, 90, inf))
    cases["median Infinity in A"] = ([a_inf, good, "--fail-on", "time"], "is inf, not a finite")
    listed = write_run(tmp_path / "listed" / "naive").parent
    rows = [{"variant": ["naive"], "median_us": 1, "low_us": 1, "high_us": 1, "repeats": 1}]
    (listed / artifacts.TIMING).write_text(json.dumps({"rows": rows}))
    cases["variant a list"] = ([good, listed, "--fail-on", "time"], "rows[0].variant is ['naive']")
    deep = write_run(tmp_path / "deep" / "naive").parent
    (deep / artifacts.TIMING).write_text("[" * 100_000 + "]" * 100_000)
    cases["timing nested 100k deep"] = ([good, deep, "--fail-on", "time"], "nested deeper")
    fine = _summary(tmp_path / "fine peak", MIB)
    for name, peak in {"NaN": float("nan"), "Infinity": inf, "-5": -5}.items():
        run = _summary(tmp_path / f"peak {name}", peak)
        cases[f"peak {name} in A"] = ([run, fine, "--fail-on", "peak"], "peak_memory_bytes")
    return cases


@pytest.mark.parametrize(
    "case",
    ["missing", "set and run", "empty folder", "not a trace", "broken timing", "newer summary",
     "json over an input", "median Infinity in B", "median true in B", "median 400 digits in B",
     "median Infinity in A", "variant a list", "timing nested 100k deep", "peak NaN in A",
     "peak Infinity in A", "peak -5 in A"],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, case):
    argv, named = _bad_inputs(tmp_path)[case]
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error:") and named in line and "Traceback" not in err


# --- the JSON a CI script reads --------------------------------------------------------------------


def test_json_carries_its_schema_the_verdict_and_each_pair(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", memcpy=1)
    out = tmp_path / "gate.json"
    assert main([str(a), str(b), "--fail-on", "memcpy,peak", "--json", str(out)]) == 1
    data = json.loads(out.read_text())
    assert {k: data[k] for k in ("schema", "fail_on", "passed", "cannot_tell", "notes")} == {
        "schema": 1, "fail_on": ["memcpy", "peak"], "passed": False, "cannot_tell": [], "notes": [],
    }  # fmt: skip
    assert data["regressions"] == [{
        "variant": "a -> b", "rule": "memcpy", "kind": "memcpy", "name": MEMCPY, "a": 0.0,
        "b": 1.0, "text": f"{MEMCPY} (memcpy) 0 -> 1 per forward, new",
    }]  # fmt: skip
    (pair,) = data["pairs"]
    assert {"a", "b", "notes", "rows", "headline", "timing_median_us"} <= set(pair)
    assert pair["a"]["memcpy_per_forward"] == {} and pair["b"]["memcpy_per_forward"] == {"DtoD": 1}


def test_json_leaves_out_the_folder_each_side_is_in(tmp_path, monkeypatch):
    """`--json` kept `/srv/<user-name>/base/naive` whole: the scrub knew home, temp and the
    checkout, not every folder a CI machine keeps its baseline in."""
    from attn.traces.compare.gate import shared_paths
    from attn.traces.read.scrub import Scrubber

    side = Path("/srv/someone/base/naive")
    scrubbed = Scrubber(shared_paths(side, Path("before/naive"))).value({"a": str(side)})
    assert scrubbed == {"a": "<redacted>/naive"}
    a, b = two_sets(tmp_path)
    assert main([str(a), str(b), "--json", str(tmp_path / "gate.json")]) == 0
    assert str(tmp_path) not in (tmp_path / "gate.json").read_text()


def test_summaries_carry_their_schema_and_older_ones_are_read(tmp_path):
    a = write_run(tmp_path / "raw")
    trace = json.loads(gzip.decompress((a / artifacts.TRACE).read_bytes()))
    summary = write_artifacts(trace, tmp_path / "analysed" / "x")
    assert summary["schema"] == artifacts.SUMMARY_SCHEMA == 1
    written = tmp_path / "analysed" / "x" / artifacts.SUMMARY
    assert json.loads(written.read_text())["schema"] == 1
    older = {k: v for k, v in json.loads(written.read_text()).items() if k != "schema"}
    written.write_text(json.dumps(older))  # as the committed sets' summaries are
    assert gate(written.parent, a, [Rule("counts")])["passed"] is True


# --- the CI job the page shows, run as GitHub runs it ----------------------------------------------

INPLACE_LINE = 'scores.masked_fill_(mask, float("-inf"))'
OUT_OF_PLACE = 'scores = scores.masked_fill(mask, float("-inf"))'


def job_steps() -> list[dict]:
    workflow = yaml.safe_load(JOB.read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    return job["steps"]


def installs(step: dict) -> bool:
    return "pip install" in step.get("run", "")


def test_the_job_checks_out_installs_profiles_and_gates():
    steps = job_steps()
    assert steps[0]["uses"].startswith("actions/checkout@")
    assert any(installs(s) and "download.pytorch.org/whl/cpu" in s["run"] for s in steps)
    runs = [s["run"] for s in steps if "run" in s and not installs(s)]
    assert runs[0].startswith("python examples/") and "--device cpu" in runs[0]
    assert runs[1].startswith("attn-profile diff ") and "--fail-on" in runs[1]
    assert all(re.fullmatch(r"[\w/-]+@v\d+", s["uses"]) for s in steps if "uses" in s)


def run_command(command: str, root: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """A step's `run:` text in `root`, as GitHub's bash runs it; `python` and `attn-profile` are
    this interpreter and this package (what the install step installs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, target in (("python", ""), ("attn-profile", "-m attn.profiling")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" {target} "$@"\n')
        (bin_dir / name).chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(root)}
    shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command]
    return subprocess.run(shell, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def run_the_job(root: Path, tmp_path: Path) -> list[subprocess.CompletedProcess]:
    """Each `run:` step but the installs, in order, until one fails."""
    done = []
    for step in job_steps():
        if "run" in step and not installs(step):
            done.append(run_command(step["run"], root, tmp_path))
            if done[-1].returncode != 0:
                break
    return done


def copy_of_the_repository(tmp_path: Path, masking: str = "in place") -> Path:
    """What the checkout step gives, as far as the job's steps read it; with the in-place masking
    of attn/inplace.py made out-of-place again (the regression) when asked."""
    root = tmp_path / "repo"
    for part in ("attn", "examples"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    if masking == "out of place":
        module = root / "attn" / "inplace.py"
        assert INPLACE_LINE in module.read_text()
        module.write_text(module.read_text().replace(INPLACE_LINE, OUT_OF_PLACE))
    return root


@pytest.mark.slow
def test_the_job_passes_on_the_module_against_the_committed_baseline(tmp_path):
    pinned = re.search(r"torch==([\w.]+)", next(s["run"] for s in job_steps() if installs(s)))[1]
    if torch.__version__.split("+")[0] != pinned:
        pytest.skip(f"the baseline was recorded with torch {pinned}, this is {torch.__version__}")
    root = copy_of_the_repository(tmp_path)
    profiled, gated = run_the_job(root, tmp_path)
    assert profiled.returncode == 0, profiled.stderr[-2000:]
    assert gated.returncode == 0, gated.stdout[-2000:] + gated.stderr[-2000:]
    assert "no regression (fail on counts)" in gated.stdout.splitlines()
    verdict = json.loads((root / "runs" / "gate.json").read_text())
    assert verdict["passed"] is True and verdict["regressions"] == []


@pytest.mark.slow
def test_the_job_fails_on_the_copy_that_came_back_naming_it(tmp_path):
    """Against a baseline made here as the job's file says (so on any torch), the module with its
    masking out-of-place again fails the gate, the clone of the scores named first."""
    root = copy_of_the_repository(tmp_path)
    (refresh,) = re.findall(r"^#\s+(attn-profile analyze .*)$", JOB.read_text(), re.M)
    profiled, _ = run_the_job(root, tmp_path / "first")
    assert profiled.returncode == 0, profiled.stderr[-2000:]
    shutil.rmtree(root / "examples" / "ci" / "baseline")
    assert run_command(refresh, root, tmp_path / "first").returncode == 0
    shutil.rmtree(root / "runs")
    module = root / "attn" / "inplace.py"
    module.write_text(module.read_text().replace(INPLACE_LINE, OUT_OF_PLACE))
    profiled, gated = run_the_job(root, tmp_path / "second")
    assert profiled.returncode == 0, profiled.stderr[-2000:]
    assert gated.returncode == 1, gated.stdout[-2000:] + gated.stderr[-2000:]
    lines = [ln for ln in gated.stdout.splitlines() if ln.startswith("counts:")]
    assert lines[:2] == [
        "counts: inplace: aten::clone (op) 0 -> 1 per forward, new (breaks counts)",
        "counts: inplace: aten::copy_ (op) 1 -> 2 per forward, more (breaks counts)",
    ]
    verdict = json.loads((root / "runs" / "gate.json").read_text())
    assert verdict["passed"] is False and verdict["regressions"][0]["name"] == "aten::clone"
