"""How reading a folder of ranks scales: every rank in a process of its own, one per core.

    python benchmarks/rank_scale.py --ranks 64 --events 100000

Writes a folder of synthetic rank traces (benchmarks/trace_scale.py's trace, one file per rank with
its distributedInfo, and an NCCL kernel beside each step's work), then times whole processes as a
user runs them, with the wall clock (the point of reading in parallel is the wall clock):

- `json.load` of one rank's file: the floor of any reader, and its peak memory;
- `diagnose` of each rank's file alone (or of `--singles` of them), half before and half after
  the folder: the single-file times;
- `diagnose` of the whole folder: its wall time, its CPU time with its workers', and the peak
  memory of its own process and of its largest worker (each worker holds one rank's trace at a
  time, and hands back its row).

The issue's two ratios: the folder's peak (the larger of the parent's and a worker's) over one
rank's bare `json.load` (within 2), and the folder's wall time over the sum of the single-file
times divided by the cores (within 1.2). Beside them, the CPU seconds of both, which other work on
a shared machine inflates less than the wall clock, and the load average. Speeds belong here, not
in tests.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
from trace_scale import JSON_LOAD, ROOT, synthetic_trace  # noqa: E402

# Runs the measured command, then says its own peak and its largest waited-for child's (Linux).
MEASURED = """
import atexit, resource, runpy, sys
def peak():
    status = open("/proc/self/status").read()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print("peak KiB", status.split("VmHWM:")[1].split()[0], "children KiB", children, file=sys.stderr)
atexit.register(peak)
what, *rest = sys.argv[1:]
if what == "-m":
    sys.argv = rest
    runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *rest]
    exec(compile(what, "<measured>", "exec"))
"""


def rank_trace(rank: int, world: int, events: int) -> dict:
    """trace_scale's synthetic trace as one rank of a job: its rank, and an NCCL kernel per step
    on a stream of its own, launched at the step's start."""
    trace = synthetic_trace(events)
    steps = [e for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")]
    for i, step in enumerate(steps):
        correlation = 10_000_000 + i
        trace["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": step["ts"] + 1, "dur": 1, "args": {"correlation": correlation}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
             "pid": 0, "tid": 9, "ts": step["ts"] + 5, "dur": step["dur"] / 4,
             "args": {"correlation": correlation, "stream": 9}},
        ]  # fmt: skip
    trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return trace


def write_folder(folder: Path, ranks: int, events: int) -> list[Path]:
    """The folder of ranks, a real job's way: rank-<r>.json.gz."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        path = folder / f"rank-{rank}.json.gz"
        path.write_bytes(gzip.compress(orjson.dumps(rank_trace(rank, ranks, events)), 1))
        paths.append(path)
    return paths


def measure(argv: list[str]) -> dict:
    """One process: its wall seconds, its CPU seconds and its children's, its peak MiB and its
    largest child's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", MEASURED, *argv], cwd=cwd, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        error = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)  # its CPU time and its waited-for children's
        wall = time.perf_counter() - start
        child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0 or "peak KiB" not in error:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {error.strip().splitlines()[-1:]}")
    said = error.rsplit("peak KiB", 1)[1].split()  # "N children KiB M"
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak": int(said[0]) / 1024, "worker": int(said[3]) / 1024}  # fmt: skip


def measured(paths: list[Path], singles: int) -> dict:
    """json.load of a few ranks; diagnose of each of `singles` ranks alone, half before and half
    after diagnose of the whole folder, so the machine's load weighs on both alike."""
    diagnose = ["-m", "attn.profiling", "diagnose"]
    loaded = [measure([JSON_LOAD, str(p)]) for p in paths[:3]]
    alone = [measure([*diagnose, str(p)]) for p in paths[: singles // 2]]
    folder = measure([*diagnose, str(paths[0].parent)])
    alone += [measure([*diagnose, str(p)]) for p in paths[singles // 2 : singles]]
    return {"loaded": loaded, "alone": alone, "folder": folder}


def report(found: dict, ranks: int, events: int, cores: int) -> Table:
    """The table: the folder's wall time and CPU time against the single files', its peaks."""
    loaded, alone, folder = found["loaded"], found["alone"], found["folder"]
    json_peak = max(m["peak"] for m in loaded)
    # The sum over every rank, from the median single-file run when not every rank ran alone.
    total = {k: statistics.median(m[k] for m in alone) * ranks for k in ("wall", "cpu")}
    budget = total["wall"] / cores
    table = Table("measured", "value", "ratio", "bound",
                  title=f"{ranks} ranks of {events:,} events, {cores} cores")  # fmt: skip
    table.add_row("json.load of one rank (median wall, peak)",
                  f"{statistics.median(m['wall'] for m in loaded):.2f} s, {json_peak:,.0f} MiB",
                  "", "")  # fmt: skip
    table.add_row(f"diagnose of one rank alone (median of {len(alone)})",
                  f"{total['wall'] / ranks:.2f} s wall, {total['cpu'] / ranks:.2f} s CPU", "", "")  # fmt: skip
    table.add_row(f"folder's wall ÷ (sum of {ranks} single-file walls ÷ {cores} cores)",
                  f"{folder['wall']:.1f} s against {budget:.1f} s",
                  f"{folder['wall'] / budget:.2f}", "≤ 1.2")  # fmt: skip
    table.add_row("folder's CPU seconds ÷ the single files' sum",
                  f"{folder['cpu']:.1f} s against {total['cpu']:.1f} s",
                  f"{folder['cpu'] / total['cpu']:.2f}", "")  # fmt: skip
    table.add_row("folder's own peak ÷ one rank's json.load peak", f"{folder['peak']:,.0f} MiB",
                  f"{folder['peak'] / json_peak:.2f}", "≤ 2")  # fmt: skip
    table.add_row("its largest worker's peak ÷ the same", f"{folder['worker']:,.0f} MiB",
                  f"{folder['worker'] / json_peak:.2f}", "≤ 2")  # fmt: skip
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64, help="rank traces in the folder")
    parser.add_argument("--events", type=int, default=100_000, help="events per rank")
    parser.add_argument("--singles", type=int, help="ranks diagnosed alone (default: every one)")
    args = parser.parse_args(argv)
    cores, before = os.cpu_count() or 1, os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        paths = write_folder(Path(scratch) / "job", args.ranks, args.events)
        found = measured(paths, min(args.singles or args.ranks, args.ranks))
    Console(width=160).print(report(found, args.ranks, args.events, cores))
    after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}; "
          f"after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
