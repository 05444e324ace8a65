"""Traces of any size: the timeline stays a few thousand elements, the scrubbed copy is written a
chunk at a time yet equals scrubbing the whole, decompression is capped, and analyze tells its steps.
Speeds are measured by benchmarks/trace_scale.py, never here."""

import gzip
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from test_traces_scrub import scrub_trace

from attn.traces.claims.trace_checks import Evidence
from attn.traces.figures.timeline import MIXED_COLOR, draw_timeline
from attn.traces.read import scrub
from attn.traces.read.range_counts import per_forward
from attn.traces.read.scrub import Scrubber, write_trace
from attn.traces.read.trace import Trace, TraceFormatError, load_trace, read_trace
from attn.traces.sets.analyze import ANALYSIS_STEPS, LISTED, summarize, write_artifacts

REAL = Path(__file__).parent / "fixtures" / "realtraces"
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import trace_scale  # noqa: E402
from trace_scale import synthetic_trace  # noqa: E402


def test_the_synthetic_trace_has_its_steps_and_kernels():
    summary = per_forward(synthetic_trace(3000, steps=5))
    assert summary["forwards"] == 5 and summary["range"].startswith("ProfilerStep#")
    assert summary["kernels_per_forward"] == summary["launches_per_forward"] == 200


def test_a_range_of_sixty_thousand_events_draws_under_five_thousand_elements(tmp_path):
    trace = Trace(synthetic_trace(60_000, steps=1))
    draw_timeline(trace.forwards(), "big", tmp_path / "t.svg", focus="kernel_7")
    svg = (tmp_path / "t.svg").read_text()
    assert sum(1 for _ in ElementTree.fromstring(svg).iter()) < 5000
    assert MIXED_COLOR in svg or "many short events" in svg  # sub-pixel events became spans
    assert "kernel_7" in svg  # the chapter's event is labelled, however narrow


def test_a_small_range_is_drawn_event_by_event(tmp_path):
    trace = Trace(synthetic_trace(300, steps=1))
    draw_timeline(trace.forwards(), "small", tmp_path / "t.svg")
    assert "many short events" not in (tmp_path / "t.svg").read_text()


def _trace_with_paths(n: int) -> dict:
    events = synthetic_trace(n, steps=1)
    events["traceEvents"][n // 2]["args"] = {"file": "/home/ann/p/a.py", "hostname": "box7"}
    events["traceEvents"][-1]["name"] = "/tmp/torchinductor_ann/x.py"
    return {"traceName": "/home/ann/t.json", **events}


@pytest.mark.parametrize("chunk", [7, 100_000])
def test_writing_chunk_by_chunk_equals_scrubbing_the_whole(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(scrub, "CHUNK", chunk)
    trace = _trace_with_paths(2500)  # past the thousand events walked at a time
    paths, names = ["/home/ann", "/tmp"], ["box7", "ann"]
    write_trace(trace, tmp_path / "t.json.gz", Scrubber(paths, names))
    written = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    assert written == scrub_trace(trace, paths, names)
    assert "/home/ann" not in json.dumps(written) and "box7" not in json.dumps(written)


def test_an_event_with_nothing_to_scrub_is_written_as_it_was(tmp_path):
    trace = synthetic_trace(300, steps=1)
    write_trace(trace, tmp_path / "t.json.gz", Scrubber(["/home/ann"], ["ann"]))
    written = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    assert written["traceEvents"] == trace["traceEvents"]


def test_a_gzip_bomb_is_refused_in_one_line_before_it_fills_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_MAX_TRACE_GIB", str(1 / 1024))  # 1 MiB
    bomb = tmp_path / "bomb.json.gz"
    strings = b'"x",' * (2 * 2**20)  # 8 MiB of short strings: past the cap, not a stretch
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + strings + b'"x"]}'))
    with pytest.raises(TraceFormatError, match="decompresses to more than") as e:
        load_trace(bomb)
    assert "\n" not in str(e.value) and str(bomb) in str(e.value)


# Loads a trace with a 1 GiB cap in a fresh process and prints its peak memory (MiB) and error.
PEAK_WHEN_REFUSED = """
import os, sys
os.environ["ATTN_MAX_TRACE_GIB"] = "1"
from attn.traces.read.trace import TraceFormatError, load_trace
try:
    load_trace(sys.argv[1])
    error = "loaded"
except TraceFormatError as e:
    error = str(e)
status = open("/proc/self/status").read()  # VmHWM: this process's peak, not its parent's
print(int(status.split("VmHWM:")[1].split()[0]) // 1024, error)
"""


def test_a_trace_inflating_past_the_cap_is_refused_in_a_fraction_of_its_memory(tmp_path):
    """2 GiB of inflated text (32 gzip members of 64 MiB each) under a 1 GiB cap."""
    member = gzip.compress(b'"x",' * (16 * 2**20), compresslevel=1)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(member * 32)
    done = subprocess.run(
        [sys.executable, "-c", PEAK_WHEN_REFUSED, str(bomb)], capture_output=True, text=True
    )
    peak_mib, error = done.stdout.split(" ", 1)
    assert "decompresses to more than 1 GiB" in error
    assert int(peak_mib) < 512  # the interpreter, numpy and one 16 MiB chunk; never the 1 GiB


def test_a_summary_lists_a_bounded_number_of_names(tmp_path):
    """A range of 40,000 kernels: summary.json stays small, the claims still see every kernel."""
    summary = write_artifacts(synthetic_trace(130_000, steps=1), tmp_path / "set")
    assert len(summary["kernels"]) == LISTED and summary["kernels_not_listed"] > 40_000
    assert (tmp_path / "set" / "summary.json").stat().st_size < 200_000
    trace = Trace(synthetic_trace(3000, steps=1))
    evidence = Evidence(*summarize(trace))
    assert len(evidence.kernels()) == 1000  # from the trace, not the summary's first 100


def test_the_published_copy_of_a_real_trace_is_no_larger_than_it(tmp_path):
    real = next(REAL.glob("tracelens-h100-timesformer-eager-softmax/*.json.gz"))
    write_artifacts(read_trace(real), tmp_path / "set")
    assert (tmp_path / "set" / "trace.json.gz").stat().st_size <= real.stat().st_size


def test_a_cut_gzip_file_is_refused_in_one_line(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(json.dumps(synthetic_trace(300)).encode())[:-40])
    with pytest.raises(TraceFormatError, match="not JSON or gzip"):
        load_trace(cut)


def test_analysis_tells_each_step_for_a_progress_bar(tmp_path):
    told: list[str] = []
    write_artifacts(synthetic_trace(300, steps=2), tmp_path / "set", progress=told.append)
    assert told == list(ANALYSIS_STEPS)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--rounds", "0"], "argument --rounds: must be >= 1, got 0"),  # was a traceback
        (["--synthetic", "-5"], "argument --synthetic: must be >= 1, got -5"),  # was accepted
        (["--synthetic", "1000000"], "--synthetic 1,000,000: analyze of it would take about"),
    ],
)
def test_the_benchmarks_flags_are_refused_in_one_line(monkeypatch, capsys, argv, says):
    """--synthetic 100000000 had no bound: here the memory free is made 1 GiB, not the flag huge."""
    monkeypatch.setattr(trace_scale, "available_memory", lambda: 2**30)
    with pytest.raises(SystemExit) as done:
        trace_scale.main(argv)
    assert done.value.code == 2 and says in capsys.readouterr().err
