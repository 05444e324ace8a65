"""Real GPU traces recorded by other projects (tests/fixtures/realtraces/, each with its SOURCE.txt).

Every count the analyser reports per range is compared with tests/realtrace_count.py, a second
counter written straight from the raw JSON that shares no code with the attn package.
"""

import gzip
import hashlib
import json
import sys
from pathlib import Path

import pytest

from attn import specs
from attn.profiling import cli
from attn.traces.claims.claim import evaluate
from attn.traces.claims.trace_checks import Evidence
from attn.traces.figures.table import markdown_table
from attn.traces.read.range_counts import per_forward
from attn.traces.read.trace import forwards, load_trace

sys.path.insert(0, str(Path(__file__).parent))
from realtrace_count import count_ranges  # noqa: E402

REAL = Path(__file__).parent / "fixtures" / "realtraces"
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|{}|forward]"
# (folder, range given to the analyser or None for its default, range for the counter, prefix?)
CASES = [
    ("hta-a100-alexnet-fwd", ALEXNET.format("measure"), ALEXNET.format("measure"), False),
    ("hta-a100-alexnet-fwd", ALEXNET.format("warmup"), ALEXNET.format("warmup"), False),
    ("tracelens-h100-bert-small-sdpa-flash", None, "ProfilerStep#", True),
    ("tracelens-mi300x-bert-small-sdpa-flash", None, "ProfilerStep#", True),
    ("tracelens-h100-timesformer-eager-softmax", None, "ProfilerStep#", True),
    ("kineto-tbplugin-volta-resnet50-torch18-oldformat", None, "ProfilerStep#", True),
    ("hta-a100-ddp-no-record-shapes", None, "ProfilerStep#", True),
    ("hta-a100-ddp-no-record-shapes", "## forward ##", "## forward ##", False),
    ("tracelens-h100-qwen1.5-sdpa-flash", None, "ProfilerStep#", True),
    ("tracelens-mi300x-sglang-decode-graph", "step[DECODE bs=32]", "step[DECODE bs=32]", False),
    ("tracelens-mi300-vllm-decode-graph", "execute_32_*", "execute_32_", True),
    ("tracelens-mi300x-compiled-sdpa", "Torch-Compiled Region*", "Torch-Compiled Region", True),
]


def trace_file(folder: str) -> Path:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return path


_loaded: dict[str, dict] = {}


def trace_of(folder: str) -> dict:
    if folder not in _loaded:
        _loaded[folder] = load_trace(trace_file(folder))
    return _loaded[folder]


def test_every_real_trace_keeps_its_source_and_license():
    for folder in REAL.iterdir():
        source = (folder / "SOURCE.txt").read_text()
        assert "license:" in source and "repository:" in source, folder
        assert (folder / "LICENSE").read_text().strip(), folder


def test_every_real_trace_is_small_and_carries_no_environment_block():
    """Under 5 MB each, and no harness block of environment variables (some held tokens)."""
    for path in REAL.glob("*/*.json*"):  # a folder of ranks holds one trace per rank
        assert path.stat().st_size < 5 * 2**20, path
        text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert b"_TOKEN" not in text and b'"metadata":' not in text, path


@pytest.mark.parametrize(("folder", "range_name", "count_name", "prefix"), CASES)
def test_counts_per_range_equal_an_independent_count(folder, range_name, count_name, prefix):
    trace = trace_of(folder)
    ours = per_forward(trace, range_name)["ranges"]
    theirs = count_ranges(trace, count_name, prefix=prefix)
    assert len(ours) == len(theirs) > 0
    for mine, other in zip(ours, theirs, strict=True):
        assert mine["kernels"] == other["kernels"], (folder, mine["name"])
        assert mine["memcpy"] == other["memcpy"], (folder, mine["name"])
        assert mine["memset"] == other["memset"], (folder, mine["name"])
        assert mine["launches"] == other["launches"], (folder, mine["name"])
        assert mine["device_time_us"] == pytest.approx(other["device_time_us"])


def test_the_old_format_is_read_not_reported_as_cpu_only():
    """torch 1.8 spelled categories Operator/Runtime/Kernel/Memcpy and tids as strings."""
    summary = per_forward(trace_of("kineto-tbplugin-volta-resnet50-torch18-oldformat"))
    assert summary["range"].startswith("ProfilerStep#") and summary["forwards"] == 6
    assert summary["kernels_per_forward"] == 919
    assert summary["memcpy_per_forward"] == {"HtoD": 2}
    assert summary["device_time_us"] > 0


def test_cublas_memsets_are_not_kernels():
    s = per_forward(trace_of("tracelens-h100-timesformer-eager-softmax"))
    assert s["memset_per_forward"] == 86 and s["kernels_per_forward"] == 446
    assert all("memset" not in k.lower() for k in s["kernels"])


def test_flash_claim_matches_sdpa_flash_kernels_only():
    """BERT's SDPA flash kernels are of the family; no other kernel in these traces is."""
    trace = trace_of("tracelens-h100-bert-small-sdpa-flash")
    steps = forwards(trace)
    flash = [
        e.name for e in steps[0].device_events if e.name.startswith("void pytorch_flash::flash_fwd")
    ]
    assert len(flash) == 4  # four layers, one SDPA call each
    # One range of 60 kernels is not "one kernel per forward": the claim fails, naming what it saw.
    claims = specs.spec("sdpa_flash").trace_claims
    (claim,) = evaluate(claims, "cuda", Evidence(per_forward(trace), steps))
    assert claim["holds"] is False and "60 kernel(s)" in claim["observed"]


def test_analyze_writes_a_whole_folder_for_a_real_trace(tmp_path):
    path = trace_file("tracelens-h100-bert-small-sdpa-flash")
    assert cli.main(["analyze", str(path), "--variant", "sdpa_flash", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "sdpa_flash"
    assert {p.name for p in folder.iterdir()} == {
        "summary.json",
        "trace.json.gz",
        "table.md",
        "timeline.svg",
    }
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["device_name"] == "NVIDIA H100 80GB HBM3"
    assert summary["kernels_per_forward"] == 60 and summary["memcpy_per_forward"] == {"DtoH": 1}
    assert summary["claims"] and summary["claims"][0]["holds"] is False
    assert "pytorch_flash" in (folder / "table.md").read_text()


def test_a_file_that_is_not_a_trace_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    assert cli.main(["analyze", str(bad), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "not a Chrome trace" in err and "Traceback" not in err


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def counts_of(folder: str, range_name: str | None) -> dict:
    """Everything per_forward reports and the table.md rows, names lists and table as digests."""
    trace = trace_of(folder)
    summary = per_forward(trace, range_name)
    table = markdown_table(forwards(trace, range_name), summary["kernels_per_forward"] is not None)
    found = {k: v for k, v in summary.items() if k not in ("kernels", "ops")}
    digests = {"kernels": summary["kernels"], "ops": summary["ops"], "table_md": table}
    return found | {f"{k}_sha256": _digest(v) for k, v in digests.items()}


@pytest.mark.parametrize(("folder", "range_name"), sorted({(c[0], c[1]) for c in CASES}, key=str))
def test_counts_and_times_are_those_recorded_before_the_columns_rewrite(folder, range_name):
    """tests/fixtures/realtraces_counts.json was written by counts_of() with the analyser of commit
    e772144 (before traces were read into columns): every number, to the last bit, stays."""
    recorded = json.loads((REAL.parent / "realtraces_counts.json").read_text())
    assert counts_of(folder, range_name) == recorded[f"{folder} {range_name or ''}".strip()]
