"""How `analyze` scales with a trace's size, as ratios to a bare `json.load` of the same file.

    python benchmarks/trace_scale.py TRACE...              # real traces (.json or .json.gz)
    python benchmarks/trace_scale.py --synthetic 1000000   # also a made-up trace of 1M events

Each measurement runs in a fresh process, so its peak memory is its own: the bare `json.load` of the
file, then the analysis (`read_trace` + `write_artifacts`, as `analyze` runs them) after its
imports, whose fixed cost (torch among them) is printed apart. Times are CPU seconds of the process,
which other work on a shared machine does not inflate as it does the wall clock. Printed side by side: time and peak
memory of each, their ratios, the uncompressed size, and the drawn elements of timeline.svg.
Speeds belong here, not in tests.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table


def synthetic_trace(events: int, steps: int = 50) -> dict:
    """A Kineto-shaped trace of about `events` events: `steps` ProfilerStep#N ranges, each a run of
    ATen ops that launch one kernel apiece (an op, its launch and its kernel: three events)."""
    per_step = max(1, events // (3 * steps))
    found, ts, correlation = [], 0.0, 0
    for step in range(steps):
        start = ts
        ops = []
        for op in range(per_step):
            correlation += 1
            kind = f"aten::op_{op % 40}"
            ops += [
                {"ph": "X", "cat": "cpu_op", "name": kind, "pid": 1, "tid": 1, "ts": ts, "dur": 8},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": 1, "ts": ts + 2, "dur": 4, "args": {"correlation": correlation}},
                {"ph": "X", "cat": "kernel", "name": f"kernel_{op % 40}", "pid": 0, "tid": 7,
                 "ts": ts + 10, "dur": 5, "args": {"correlation": correlation, "stream": 7}},
            ]  # fmt: skip
            ts += 10
        found.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
             "tid": 1, "ts": start, "dur": ts - start + 1}
        )  # fmt: skip
        found += ops
        ts += 50
    return {"schemaVersion": 1, "deviceProperties": [{"name": "synthetic"}], "traceEvents": found}


def rss_mib() -> float:
    """This process's resident memory now (Linux), in MiB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib() -> float:
    """This process's peak resident memory (Linux's VmHWM: unlike ru_maxrss, not inherited from
    the parent across fork and exec), in MiB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def measure_json_load(path: str) -> dict:
    before, start = rss_mib(), time.process_time()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        trace = json.load(f)
    events = len(trace["traceEvents"] if isinstance(trace, dict) else trace)
    return {"seconds": time.process_time() - start, "mib": peak_mib() - before, "events": events}


def measure_analyze(path: str) -> dict:
    start = time.process_time()
    from attn.traces.analyze import write_artifacts
    from attn.traces.trace import read_trace

    imports = time.process_time() - start
    before, start = rss_mib(), time.process_time()
    with tempfile.TemporaryDirectory() as out:
        write_artifacts(read_trace(path), Path(out) / "set")
        seconds = time.process_time() - start
        svg = ElementTree.parse(Path(out) / "set" / "timeline.svg")
        elements = sum(1 for _ in svg.iter())
    return {"seconds": seconds, "mib": peak_mib() - before, "imports": imports, "svg": elements}


def in_child(what: str, path: str) -> dict:
    """Run one measurement in a fresh interpreter; its result as a dict."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", what, path], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} of {path} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.splitlines()[-1])


def uncompressed_mib(path: str) -> float:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b"")) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help=".json or .json.gz Kineto traces")
    parser.add_argument("--synthetic", type=int, metavar="EVENTS", help="add a made-up trace")
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args(argv)
    if args.measure:
        what, path = args.measure
        if what.startswith("synthetic="):  # made in a process of its own, as the measures are
            events = synthetic_trace(int(what.split("=")[1]))
            Path(path).write_bytes(gzip.compress(orjson.dumps(events), 1))
        measure = {"json": measure_json_load, "analyze": measure_analyze}.get(what)
        print(json.dumps(measure(path) if measure else {}))
        return 0
    traces = list(args.traces)
    scratch = tempfile.TemporaryDirectory()
    if args.synthetic:
        path = Path(scratch.name) / f"synthetic-{args.synthetic}.json.gz"
        in_child(f"synthetic={args.synthetic}", str(path))
        traces.append(str(path))
    table = Table(
        "trace", "events", "JSON MiB", "json.load s", "analyze s", "time ÷ json.load",
        "json.load MiB", "analyze MiB", "memory ÷ json.load", "memory ÷ JSON", "SVG elements",
        title="analyze against a bare json.load (CPU seconds; peak memory above the start)",
    )  # fmt: skip
    imports = []
    for trace in traces:
        bare, ours = in_child("json", trace), in_child("analyze", trace)
        size = uncompressed_mib(trace)
        imports.append(ours["imports"])
        table.add_row(
            Path(trace).name[:40], f"{bare['events']:,}", f"{size:,.0f}",
            f"{bare['seconds']:.2f}", f"{ours['seconds']:.2f}",
            f"{ours['seconds'] / bare['seconds']:.2f}", f"{bare['mib']:,.0f}", f"{ours['mib']:,.0f}",
            f"{ours['mib'] / bare['mib']:.2f}", f"{ours['mib'] / size:.2f}", f"{ours['svg']:,}",
        )  # fmt: skip
    Console(width=160).print(table)
    if imports:
        print(f"imports before analysing (torch among them, paid once): {min(imports):.1f} CPU s")
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
