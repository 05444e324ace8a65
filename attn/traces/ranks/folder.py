"""A folder of rank traces, one per process of a distributed job, read in parallel and compared.

Ours are `rank<r>/trace.json.gz` (examples/ring_attention.py writes them); a real job's are the
folder's `*.json` and `*.json.gz` files, one per rank. A rank's number is the one its trace records
(`distributedInfo.rank`), else the one in its name. Each rank is read in a process of its own, as
many at once as there are cores, and reduced there to its row (attn.traces.ranks.comm) and whatever
`reduce` adds: only rows come back, so memory stays that of one trace per core, however many ranks.
Across the ranks, once each is one rank of one job (ranks of one device, each with the same kind of
range): the imbalance (the slowest rank's compute over the mean of all) and the straggler.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from attn.traces.common.artifacts import RANK_DIR
from attn.traces.ranks.comm import WHOLE_TRACE, rank_row
from attn.traces.read.trace import (
    FORWARD_RANGE,
    STEP_PREFIX,
    Trace,
    TraceFormatError,
    device_name_of,
    read_trace,
)

TRACE_SUFFIXES = (".json", ".json.gz")
RANKS_NAMED = 8  # of a group of ranks in a refusal: the first few, then how many more


def rank_traces(folder: Path) -> list[Path]:
    """The traces of a folder of ranks: ours (rank<r>/trace.json.gz) in rank order, else the
    folder's .json and .json.gz files by name."""
    folder = Path(folder)
    ours = [p for p in folder.glob("rank*/trace.json.gz") if RANK_DIR.fullmatch(p.parent.name)]
    if ours:
        return sorted(ours, key=lambda p: int(p.parent.name[4:]))
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
    if not found:
        raise TraceFormatError(
            f"{folder}: a folder with no traces of ranks in it (rank<r>/trace.json.gz, or "
            "one .json or .json.gz file per rank)"
        )
    return found


def rank_of(raw: dict, path: Path) -> int | None:
    """The rank a trace records (distributedInfo.rank), else the number in its name (rank-3,
    rank3, trace_3.json), else None."""
    info = raw.get("distributedInfo")
    if isinstance(info, dict) and type(info.get("rank")) is int:
        if info["rank"] < 0:  # rank-1/ folders that analyze then refused as not its own
            raise TraceFormatError(f"{path}: distributedInfo.rank is {info['rank']}, not a rank")
        return info["rank"]
    named = re.search(r"rank[-_]?(\d+)", f"{path.parent.name}/{path.name}", re.I)
    named = named or re.search(r"(\d+)\D*$", path.name.split(".")[0])
    return int(named.group(1)) if named else None


def _label(path: Path) -> str:
    """A rank's trace as the report names it: its file, with its rank folder for ours."""
    return f"{path.parent.name}/{path.name}" if RANK_DIR.fullmatch(path.parent.name) else path.name


Reduce = Callable[[Trace, dict], dict]  # a rank's trace and row -> what to add to its row


def _device(trace: Trace) -> dict:
    """What a rank's compute was timed on: a GPU's kernels where it recorded device work (its name
    as the trace gives it, else None), else the CPU's ops."""
    if trace.has_device_activity:
        return {"type": "cuda", "name": device_name_of(trace.raw)}
    return {"type": "cpu", "name": None}


def read_rank(path: Path, reduce: Reduce | None = None) -> dict:
    """One rank's row: its number, file, world and backend as recorded, the device its compute
    was timed on, its compute and communication (attn.traces.ranks.comm), and what `reduce`
    adds. The trace is dropped after."""
    trace = read_trace(path)
    info = trace.raw.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    row = {
        "rank": rank_of(trace.raw, Path(path)),
        "file": _label(Path(path)),
        "world_size": info.get("world_size") if type(info.get("world_size")) is int else None,
        "backend": info.get("backend") if isinstance(info.get("backend"), str) else None,
        "device": _device(trace),
        **rank_row(trace),
    }
    if reduce is not None:
        try:
            row.update(reduce(trace, row))
        except TraceFormatError as e:  # which rank's, among many read at once
            raise TraceFormatError(f"{row['file']}: {e}") from e
    del trace
    gc.collect()  # its ranges point back at it: freed now, not at some later full collection
    return row


def _pool_context():
    """Workers forked from this process where the platform can (they start at once and import
    nothing again), else started fresh. Call it where no other thread runs: a progress bar's
    thread could hold a lock as the fork copies it."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


def read_ranks(
    paths: Sequence[Path], reduce: Reduce | None = None, workers: int | None = None
) -> list[dict]:
    """Every rank's row, in rank order, each read in a process of its own: as many at a time as
    there are cores (or `workers`). `reduce` must be picklable (a module's function, a partial).
    TraceFormatError, in one line naming them, for ranks that are not of one job to compare."""
    workers = max(1, min(len(paths), workers or os.cpu_count() or 1))
    if workers == 1:
        rows = [read_rank(p, reduce) for p in paths]
    else:
        with ProcessPoolExecutor(workers, mp_context=_pool_context()) as pool:
            rows = list(pool.map(functools.partial(read_rank, reduce=reduce), paths))
    rows = _in_rank_order(rows)
    _one_device(rows)
    _one_range(rows)
    return rows


def _in_rank_order(rows: list[dict]) -> list[dict]:
    """The rows by rank; TraceFormatError for a rank no trace or name says, or two of one rank."""
    seen: dict[int, str] = {}
    for row in rows:
        if row["rank"] is None:
            raise TraceFormatError(
                f"{row['file']}: which rank it is cannot be told (no distributedInfo.rank in the "
                "trace, no number in its name)"
            )
        if row["rank"] in seen:
            raise TraceFormatError(
                f"{seen[row['rank']]} and {row['file']} are both rank {row['rank']}"
            )
        seen[row["rank"]] = row["file"]
    return sorted(rows, key=lambda r: r["rank"])


def _ranks_text(rows: list[dict]) -> str:
    """The ranks of a group as a refusal names them: one with its file, else their numbers (the
    first RANKS_NAMED, then how many more)."""
    if len(rows) == 1:
        return f"rank {rows[0]['rank']} ({rows[0]['file']})"
    numbers = [str(r["rank"]) for r in rows[:RANKS_NAMED]]
    more = len(rows) - len(numbers)
    return "ranks " + ", ".join(numbers) + (f" and {more} more" if more else "")


def _groups(rows: list[dict], key: Callable[[dict], str]) -> dict[str, list[dict]]:
    """The rows by `key`, the most common first (a tie: the first rank's first)."""
    found: dict[str, list[dict]] = {}
    for row in rows:
        found.setdefault(key(row), []).append(row)
    return dict(sorted(found.items(), key=lambda kv: -len(kv[1])))


def _device_text(row: dict) -> str:
    """A rank's device as a refusal names it: the GPU's name where its trace gives one."""
    return row["device"]["name"] or ("a GPU" if row["device"]["type"] == "cuda" else "the CPU")


def _one_device(rows: list[dict]) -> None:
    """TraceFormatError where some ranks' compute was timed on a CPU and others' on a GPU: op time
    against kernel time would name a straggler that is only the slower kind of timing."""
    groups = _groups(rows, lambda r: r["device"]["type"])
    if len(groups) < 2:
        return
    said = [
        f"{_ranks_text(g)} on {', '.join(dict.fromkeys(map(_device_text, g)))}"
        for g in groups.values()
    ]
    raise TraceFormatError(
        f"{' and '.join(said)}: the ranks of one job run on one kind of device, and a CPU's op "
        "time against a GPU's kernel time compares nothing"
    )


def _range_kind(row: dict) -> str:
    """The range a rank was measured over, its steps as one kind (ProfilerStep#5 and #6 alike)."""
    return f"{STEP_PREFIX}N" if row["range"].startswith(STEP_PREFIX) else row["range"]


def _one_range(rows: list[dict]) -> None:
    """TraceFormatError where a rank lacks the range the others share (attn_fwd, else
    ProfilerStep#N): its whole trace, or other ranges, against their ranges compares nothing."""
    groups = _groups(rows, _range_kind)
    if len(groups) < 2:
        return
    # The range shared: the most ranks', and attn_fwd over steps over the whole trace in a tie.
    order = [FORWARD_RANGE, f"{STEP_PREFIX}N", WHOLE_TRACE]
    shared = max(groups, key=lambda k: (len(groups[k]), -order.index(k)))
    others = [r for k, g in groups.items() if k != shared for r in g]
    ranges = ", ".join(dict.fromkeys(_range_kind(r) for r in others))
    raise TraceFormatError(
        f"{_ranks_text(others)} {'has' if len(others) == 1 else 'have'} no {shared} range "
        f"(measured over {ranges}), which {_ranks_text(groups[shared])} "
        f"{'has' if len(groups[shared]) == 1 else 'have'}: ranks are compared range by range"
    )


def _aligned(rows: list[dict]) -> np.ndarray:
    """Each rank's compute per range, [ranks, ranges], the ranges lined up: by name where each
    rank names its ranges apart (ProfilerStep#N: ranks may have recorded different steps), else in
    order (the k-th attn_fwd of every rank is the same forward of the job)."""
    names = [r["range_names"] for r in rows]
    if all(len(set(n)) == len(n) for n in names):
        common = [c for c in names[0] if all(c in n for n in names[1:])]
        if common:
            return np.array(
                [
                    [r["compute_us_per_range"][r["range_names"].index(c)] for c in common]
                    for r in rows
                ]
            )
    shortest = min(len(r["compute_us_per_range"]) for r in rows)
    return np.array([r["compute_us_per_range"][:shortest] for r in rows], dtype=np.float64)


def imbalance(rows: list[dict]) -> dict | None:
    """The slowest rank's compute over the mean of every rank's, in each range of the job: the
    median over the ranges, and as its interval the lowest and the highest (a job profiles a few
    steps, and the interquartile range of three numbers claims more than three numbers hold);
    attn.traces.common.intervals reads it: where the interval holds the value a claim turns on, it cannot
    tell. The slowest rank, the straggler, is the one whose median compute is the longest; in a
    range where it was not the slowest, its ratio is under 1. None for fewer than two ranks, or
    no compute to compare."""
    if len(rows) < 2:
        return None
    per = _aligned(rows)
    if not per.size or (per.mean(axis=0) <= 0).any():
        return None
    medians = np.median(per, axis=1)
    slowest = int(np.argmax(medians))
    ratios = per[slowest] / per.mean(axis=0)
    low, median, high = float(ratios.min()), float(np.median(ratios)), float(ratios.max())
    return {
        "value": median,
        "low": low,
        "high": high,
        "ranges": int(per.shape[1]),
        "straggler": rows[slowest]["rank"],
        "straggler_compute_us": float(medians[slowest]),
        "mean_compute_us": float(medians.mean()),
    }
