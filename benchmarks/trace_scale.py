"""How the trace commands scale, as ratios to a bare `json.load` of the same file, and to a peer.

    python benchmarks/trace_scale.py TRACE...              # real traces (.json or .json.gz)
    python benchmarks/trace_scale.py --synthetic 1000000   # also a made-up trace of 1M events
    python benchmarks/trace_scale.py TRACE... --peer hta   # and HolisticTraceAnalysis beside them
    python benchmarks/trace_scale.py TRACE --range "step*" # a trace without attn_fwd or ProfilerStep

Each measurement is a whole process, as a user runs it (the interpreter, its imports, the work):
`python -c "json.load(...)"` of the file; `python -m attn.profiling analyze TRACE --out DIR`;
`python -m attn.profiling diagnose TRACE`; and with `--peer hta`, HTA's `TraceAnalysis` of a
folder holding the trace plus `get_gpu_kernel_breakdown(visualize=False)` (`pip install
HolisticTraceAnalysis`, or `--hta-python` naming an interpreter that has it): without its figures,
whose plotly import and pie charts are about half its time, and fail on a lone rank other than 0.
Times are the process's CPU seconds (user + system), which other work on a shared machine inflates
less than the wall clock; memory is its peak resident size. The processes run interleaved,
`--rounds` times, and the medians are compared.
Speeds belong here, not in tests.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout
from attn.profiling.flags import positive  # noqa: E402
from attn.traces.read.reading import available_memory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Below this many events a process is mostly its start and imports: a ratio would say nothing.
MIN_EVENTS = 10_000
# What analyze of a synthetic trace holds per event at its peak (1.2 KB measured), with room.
SYNTHETIC_EVENT_BYTES = 2000
JSON_LOAD = (
    "import gzip, json, sys; p = sys.argv[1]; "
    "json.load(gzip.open(p, 'rb') if p.endswith('.gz') else open(p, 'rb'))"
)
HTA = (
    "import sys; from hta.trace_analysis import TraceAnalysis; "
    "TraceAnalysis(trace_dir=sys.argv[1]).get_gpu_kernel_breakdown(visualize=False)"
)
# Every measured process runs under this: it says its own peak memory as it exits (Linux's
# VmHWM; the kernel's ru_maxrss of a child also counts the parent's peak at the fork).
MEASURED = """
import atexit, runpy, sys
def peak():
    status = open("/proc/self/status").read()
    print("peak KiB", status.split("VmHWM:")[1].split()[0], file=sys.stderr)
atexit.register(peak)
what, *rest = sys.argv[1:]
if what == "-m":  # python -m MODULE ARGS...
    sys.argv = rest
    runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
else:  # python -c CODE ARGS...
    sys.argv = ["-c", *rest]
    exec(compile(what, "<measured>", "exec"))
"""


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


def measure(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak MiB) of one process: its time from the kernel's accounting of the child,
    its peak as it says it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory() as cwd:
        child = subprocess.Popen(
            [argv[0], "-c", MEASURED, *argv[1:]], cwd=cwd, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        error = child.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        child.stderr.close()
    if child.returncode != 0 or "peak KiB" not in error:
        said = [line for line in error.splitlines() if line.strip() and "peak KiB" not in line]
        raise SystemExit(f"{' '.join(argv[1:4])} failed: {said[-1:]}")
    peak_kib = int(error.rsplit("peak KiB", 1)[1].split()[0])
    return usage.ru_utime + usage.ru_stime, peak_kib / 1024


def count_events(path: str) -> int:
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        trace = orjson.loads(f.read())
    return len(trace["traceEvents"] if isinstance(trace, dict) else trace)


def commands(
    trace: str, out: Path, hta_python: str | None, range_name: str | None = None
) -> dict[str, list[str]]:
    """The processes compared on one trace, by name."""
    py = sys.executable
    ranged = ["--range", range_name] if range_name else []
    found = {
        "json.load": [py, JSON_LOAD, trace],
        "analyze": [py, "-m", "attn.profiling", "analyze", trace, *ranged, "--out", str(out)],
        "diagnose": [py, "-m", "attn.profiling", "diagnose", trace],
    }
    if hta_python:  # HTA reads every trace in a folder: one folder per trace
        folder = out.parent / f"hta-{out.name}"
        folder.mkdir(exist_ok=True)
        link = folder / Path(trace).name
        if not link.exists():
            link.symlink_to(Path(trace).resolve())
        found["hta"] = [hta_python, HTA, str(folder)]
    return found


def ratio_text(a: float, b: float, small: bool) -> str:
    return "too small" if small else f"{a / b:.2f}"


def median_of(rounds: list[dict], name: str) -> tuple[float, float]:
    return (
        statistics.median(r[name][0] for r in rounds),
        statistics.median(r[name][1] for r in rounds),
    )


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The flags, each bad value refused in one line: a synthetic trace too large for the memory
    free among them (100 million events was accepted, and would have taken 190 GiB)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help=".json or .json.gz Kineto traces")
    parser.add_argument("--synthetic", type=positive, metavar="EVENTS", help="add a made-up trace")
    parser.add_argument("--peer", choices=["hta"], help="also time HolisticTraceAnalysis")
    parser.add_argument("--hta-python", help="an interpreter with HTA (default: this one)")
    parser.add_argument("--rounds", type=positive, default=3, help="interleaved rounds (median)")
    parser.add_argument("--range", help="analyze's --range, for every trace given")
    args = parser.parse_args(argv)
    free = available_memory()
    if args.synthetic and free is not None and args.synthetic * SYNTHETIC_EVENT_BYTES > free:
        parser.error(
            f"--synthetic {args.synthetic:,}: analyze of it would take about "
            f"{args.synthetic * SYNTHETIC_EVENT_BYTES / 2**30:,.1f} GiB and "
            f"{free / 2**30:,.1f} GiB is free; give fewer events"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    hta_python = (args.hta_python or sys.executable) if args.peer == "hta" else None
    if (
        hta_python
        and subprocess.run([hta_python, "-c", "import hta"], capture_output=True).returncode
    ):
        raise SystemExit(
            f"--peer hta: {hta_python} cannot import hta (pip install HolisticTraceAnalysis)"
        )
    scratch = tempfile.TemporaryDirectory()
    traces = [str(Path(t).resolve()) for t in args.traces]  # the processes run elsewhere
    if args.synthetic:
        path = Path(scratch.name) / f"synthetic-{args.synthetic}.json.gz"
        path.write_bytes(gzip.compress(orjson.dumps(synthetic_trace(args.synthetic)), 1))
        traces.append(str(path))
    columns = ["trace", "events", "json.load s", "analyze s", "÷ json", "diagnose s", "÷ json"]
    columns += ["HTA s", "analyze ÷ HTA"] if hta_python else []
    columns += ["json.load MiB", "analyze ÷", "diagnose ÷"] + (["HTA ÷"] if hta_python else [])
    columns += ["summary KB", "scrubbed ÷ input"]
    table = Table(*columns, title="Whole processes: CPU seconds and peak memory, medians")
    for i, trace in enumerate(traces):
        out = Path(scratch.name) / f"out-{i}"
        procs = commands(trace, out, hta_python, args.range)
        rounds = [{name: measure(argv) for name, argv in procs.items()} for _ in range(args.rounds)]
        events = count_events(trace)
        (js, jm), (an, am), (dg, dm) = (
            median_of(rounds, n) for n in ("json.load", "analyze", "diagnose")
        )
        ratio = functools.partial(ratio_text, small=events < MIN_EVENTS)
        row = [Path(trace).name[:32], f"{events:,}", f"{js:.2f}", f"{an:.2f}", ratio(an, js)]
        row += [f"{dg:.2f}", ratio(dg, js)]
        if hta_python:
            ht, hm = median_of(rounds, "hta")
            row += [f"{ht:.2f}", ratio(an, ht)]
        row += [f"{jm:,.0f}", ratio(am, jm), ratio(dm, jm)] + (
            [ratio(hm, jm)] if hta_python else []
        )
        (folder,) = out.iterdir()  # analyze writes OUT/<name>/
        summary_kb = (folder / "summary.json").stat().st_size / 1000
        scrubbed = (folder / "trace.json.gz").stat().st_size / Path(trace).stat().st_size
        row += [f"{summary_kb:,.0f}", f"{scrubbed:.2f}"]
        table.add_row(*row)
    Console(width=220).print(table)
    print(f"load average before the last trace's rounds ended: {os.getloadavg()[0]:.2f}")
    print(
        f"traces under {MIN_EVENTS:,} events print 'too small': a process that short is its imports"
    )
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
