"""A variant run on several ranks, written as one variant folder, and checked again from its traces:

    <variant>/rank<r>/     each rank's trace analysed as any trace is (attn.traces.sets.analyze)
    <variant>/summary.json every rank's row, the imbalance and straggler, the claims checked
                           across the ranks, and the straggler's per-forward numbers (the tables
                           that show one number per variant show the slowest rank's)
    <variant>/ranks.svg    one forward of every rank, stacked on one time axis

The ranks are read in parallel (attn.traces.ranks.folder), each written into its folder by its own worker,
which hands back only its summary's numbers and its lanes for the figure.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attn.traces.claims.claim import evaluate
from attn.traces.common import artifacts
from attn.traces.common.artifacts import BrokenSet
from attn.traces.common.atomic import atomic_folder, write_json
from attn.traces.ranks.comm import lanes
from attn.traces.ranks.folder import imbalance, read_ranks
from attn.traces.ranks.rank_timeline import draw_ranks
from attn.traces.read.patterns import RING_BLOCK_OP
from attn.traces.read.trace import FORWARD_RANGE, Trace, device_name_of
from attn.traces.sets.analyze import MEASURED, summarize, write_artifacts

# A rank's per-forward numbers, from its own summary: the straggler's are the variant's.
PER_FORWARD = ("device_type", "device_name", "range", "forwards", "cpu_time_us", "device_time_us",
               "ops_per_forward", "kernels_per_forward", "memcpy_per_forward",
               "memset_per_forward", "launches_per_forward", "peak_memory_bytes", "kernels", "ops")  # fmt: skip
ROW = (
    "cpu_time_us",
    "device_time_us",
    "ops_per_forward",
    "kernels_per_forward",
    "peak_memory_bytes",
)  # fmt: skip  (and each rank's blocks) kept in its row
ACROSS = ("world_size", "ranks", "imbalance", "straggler", "claims")
LANES_KEPT = 16  # ranges whose lanes a worker hands back, so the figure can show a typical one


def _rank_numbers(summary: dict) -> dict:
    """What a rank hands back of its summary: a few numbers for its row, its blocks (attn/ring.py's,
    one row maximum each, in its first forward; only where the ranges are attn_fwd: ours), and
    every per-forward number under "numbers", of which only the straggler's are kept."""
    kept = {k: summary.get(k) for k in ROW}
    if summary.get("range") == FORWARD_RANGE:
        kept["blocks"] = (summary.get("ops") or []).count(RING_BLOCK_OP)
    return {**kept, "numbers": {k: summary.get(k) for k in PER_FORWARD}}


def _write_rank(trace: Trace, row: dict, *, out: Path, base: dict, tables: dict[int, str]) -> dict:
    """In a worker: the rank's folder out/rank<r>/ as analyze writes a trace's; its numbers back,
    and the lanes of each range for the figure (of the middle one past LANES_KEPT ranges)."""
    rank, named = row["rank"], base.get("device_name") or device_name_of(trace.raw)
    summary = write_artifacts(
        trace, out / f"rank{rank}", base={**base, "device_name": named, "rank": rank},
        table_txt=tables.get(rank), device_type=base.get("device_type"),
    )  # fmt: skip
    n = row["ranges"]
    kept = range(n) if n <= LANES_KEPT else [n // 2]
    return {**_rank_numbers(summary), "lanes": {i: lanes(trace, i) for i in kept}}


def ranked_summary(rows: list[dict], base: dict, spec: Any | None = None) -> dict:
    """The summary across ranks: base, every rank's row, the imbalance and straggler, the
    straggler's per-forward numbers with the highest peak of memory of any rank, and the spec's
    claims about ranks (attn.traces.claims.rank_checks) checked on it."""
    # A rank's device is checked as it is read (one for every rank) and is the summary's.
    kept = [{k: v for k, v in r.items() if k not in ("lanes", "numbers", "device")} for r in rows]
    imb = imbalance(kept)
    straggler = imb["straggler"] if imb else kept[0]["rank"]
    slowest = next(r for r in rows if r["rank"] == straggler)["numbers"]
    peaks = [r["peak_memory_bytes"] for r in kept if r.get("peak_memory_bytes") is not None]
    worlds = {r.get("world_size") for r in kept} - {None}
    summary = {
        **{k: v for k, v in base.items() if k not in (*PER_FORWARD, *ACROSS)},
        "available": True,
        **slowest,
        "device_type": base.get("device_type") or slowest["device_type"],
        "peak_memory_bytes": max(peaks) if peaks else None,
        "world_size": worlds.pop() if len(worlds) == 1 else len(kept),
        "straggler": straggler,
        "imbalance": imb,
        "ranks": kept,
    }
    if spec is not None:
        summary.update(title=spec.title, lesson=spec.lesson)
        summary["claims"] = evaluate(spec.rank_claims, summary["device_type"], summary)
    return summary


def typical_range(rows: list[dict]) -> int:
    """The range the figure shows: the one whose imbalance (the slowest rank's compute over the
    mean, in that range) is the median of the ranges', where every rank has the same ranges
    with their lanes; else the middle one."""
    n = rows[0]["ranges"]
    if any(r["ranges"] != n or len(r["lanes"]) != n for r in rows):
        return n // 2
    per = [[r["compute_us_per_range"][i] for r in rows] for i in range(n)]
    ratios = [max(c) / (sum(c) / len(c)) if sum(c) else 1.0 for c in per]
    return sorted(range(n), key=ratios.__getitem__)[(n - 1) // 2]


def draw_typical(rows: list[dict], summary: dict, folder_name: str, path: Path) -> None:
    """The ranks' figure of their typical range, titled with what it shows."""
    index = typical_range(rows)
    where = summary.get("device_name") or summary["device_type"]
    name = summary.get("variant") or folder_name
    n, what = rows[0]["ranges"], rows[0]["range"]
    shown = f"{what} {index + 1} of {n}" if what == FORWARD_RANGE else f"range {index + 1} of {n}"
    note = " (the one of median imbalance)" if n > 2 else ""
    drawn = [(r["rank"], r["lanes"].get(index)) for r in rows]
    draw_ranks([d for d in drawn if d[1]], f"{name} on {where}: {shown}{note}", path)


def write_ranked(
    traces: Sequence[Path], folder: Path, *, base: dict, spec: Any | None = None,
    tables: dict[int, str] | None = None, workers: int | None = None,
) -> dict:  # fmt: skip
    """Analyse every rank's trace into folder/rank<r>/, then the summary across them and the
    ranks' figure (the folder replaced whole, or left as it was); returns the summary."""
    with atomic_folder(artifacts.check_replaceable(folder)) as out:
        write = functools.partial(_write_rank, out=out, base=base, tables=tables or {})
        rows = read_ranks(traces, write, workers)
        summary = ranked_summary(rows, base, spec)
        draw_typical(rows, summary, Path(folder).name, out / artifacts.RANKS_FIGURE)
        write_json(out / artifacts.SUMMARY, {"schema": artifacts.SUMMARY_SCHEMA, **summary})
    return summary


def _fresh_rank(trace: Trace, row: dict, *, folder: Path) -> dict:
    """In a worker: a rank's stored summary, and the same measured again from its trace."""
    path = folder / f"rank{row['rank']}" / artifacts.SUMMARY
    stored = json.loads(path.read_text())
    fresh, _ = summarize(
        trace, device_type=stored.get("device_type"), range_name=stored.get("range"), base=stored
    )
    fresh = {**stored, **{k: fresh.get(k) for k in MEASURED if k in fresh or k in stored}}
    return {**_rank_numbers(fresh), "stored": stored, "fresh": fresh}


def recheck_ranked(vdir: Path, spec: Any | None, write: bool) -> list[dict]:
    """A variant folder of ranks checked against its traces: each rank's summary, then the summary
    across them. One row per file that differs ({path, before, after}); with write, mended."""
    stored = artifacts.read_summary(vdir / artifacts.SUMMARY)
    traces = [rank / artifacts.TRACE for rank in artifacts.rank_dirs(vdir)]
    missing = [t for t in traces if not t.is_file()] or (
        [] if traces else [vdir / "rank0" / artifacts.TRACE]
    )
    if missing:
        raise BrokenSet(f"{missing[0]} is missing: the summary across ranks cannot be checked")
    rows = read_ranks(traces, functools.partial(_fresh_rank, folder=vdir))
    changed = []
    for row in rows:
        if row["stored"] != row["fresh"]:
            path = vdir / f"rank{row['rank']}" / artifacts.SUMMARY
            changed.append({"path": path, "before": None, "after": None})
            if write:
                write_json(path, row["fresh"])
    base = {k: v for k, v in stored.items() if k != "schema"}
    rows = [{k: v for k, v in r.items() if k not in ("stored", "fresh")} for r in rows]
    fresh = {"schema": stored.get("schema"), **ranked_summary(rows, base, spec)}
    if json.loads(json.dumps(fresh)) != stored:
        changed.append(
            {
                "path": vdir / artifacts.SUMMARY,
                "before": stored.get("claims"),
                "after": fresh.get("claims"),
            }
        )
        if write:
            write_json(vdir / artifacts.SUMMARY, fresh)
    return changed
