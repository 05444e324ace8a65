"""A training step measured twice: profiled (its forward and its backward, each a range of the
trace) and timed whole without the profiler (timing.json). Why the two differ, as a check that can
fail: each step's profiled forward plus backward against its timed step, with their spreads.

The profiled sum leaves out the loss between the two ranges, which the timed step holds; it is
longer only where the profiler's own cost (it records every op with its input shapes, and every
allocation) outweighs that. See attn.traces.claims.benchmark_checks for the claim it backs.
"""

from __future__ import annotations

from attn.traces.claims.benchmark_checks import BenchmarkEvidence, counts, grid_verdict
from attn.traces.common import intervals
from attn.traces.common.units import time_text

WHY_LONGER = (
    "the profiler records every op with its input shapes and every allocation, a cost that grows "
    "with the ops a step runs (a backward runs many), while the timing pass times whole steps "
    "without it, in a run of their own, interleaved with the other variants"
)
WHY_NOT = (
    "the timed step also holds the loss between the two ranges, which the profiled sum leaves "
    "out, and the profiler's cost comes to no more than that loss and the two spreads"
)


BUSY = (
    "this set was made on a busy machine, where other work can slow the timed step as much as the "
    "profiler slows the profiled one, so a step timed longer cannot tell"
)


def step_rows(summaries: dict[str, dict], timed: dict[str, dict], busy: bool = False) -> list[dict]:
    """One row per training step that was both profiled and timed (CPU time): {variant, profiled:
    its forward plus backward as intervals.profiled gives one, timed: its timing.json row, busy:
    whether the set's environment or timing load says busy}."""
    rows = []
    for name, s in summaries.items():
        back = s.get("backward") or {}
        fwd, bwd = intervals.profiled(s), intervals.profiled(back)
        if not s.get("available") or fwd is None or bwd is None or name not in timed:
            continue
        sums = [
            f["cpu_time_us"] + b["cpu_time_us"]
            for f, b in zip(s.get("ranges") or [], back.get("ranges") or [], strict=False)
            if f.get("cpu_time_us") and b.get("cpu_time_us")
        ]
        profiled = intervals.spread_of(fwd["median_us"] + bwd["median_us"], sums)
        rows.append({"variant": name, "profiled": profiled, "timed": timed[name], "busy": busy})
    return rows


def longer(row: dict) -> bool | None:
    """Whether the profiled forward plus backward took longer than the timed step: True, False, or
    None where their spreads overlap or, on a busy set, where the timed step was longer."""
    verdict = intervals.faster(row["timed"], row["profiled"])
    # Other work on the machine lengthens the timed step too: on a busy set "shorter" is no verdict.
    return None if verdict is False and row.get("busy") else verdict


def step_text(row: dict) -> str:
    """'train_naive: profiled 285.04 ms (275.00–295.00 ms), timed 252.25 ms (242.89–258.07 ms)'."""
    timed = row["timed"]
    spread = f"{time_text(timed['low_us'])}–{time_text(timed['high_us'])}"
    return (
        f"{row['variant']}: profiled {intervals.profiled_text(row['profiled'])}, timed "
        f"{time_text(timed['median_us'])} ({spread})"
    )


def verdict(rows: list[dict]) -> tuple[bool | None, str, str]:
    """Whether every step's profiled forward plus backward took longer than its timed step, how
    many did (the others named), and why the two differ, said for the verdicts found."""
    grid = [(longer(r), r["variant"]) for r in rows]
    holds = grid_verdict([v for v, _ in grid])
    some = any(v is True for v, _ in grid)
    why = [WHY_LONGER] if holds else [f"where longer, {WHY_LONGER}"] if some else []
    why += [] if holds else [f"where not, {WHY_NOT}" if some else WHY_NOT]
    busy = any(r.get("busy") for r in rows) and any(v is None for v, _ in grid)
    why += [BUSY] if busy else []
    words = {True: "longer", False: "shorter", None: "cannot tell"}
    return holds, counts(grid, words, of="steps"), "; ".join(why)


def profiled_over_timed(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
    """The check: at every step, the profiled forward plus backward takes longer than the timed
    step; what it observed says at how many, each step's two times, and why they differ."""
    if not ev.rows:
        return None, "no training step here was both profiled and timed"
    holds, how_many, why = verdict(ev.rows)
    return holds, f"{how_many}: {'; '.join(map(step_text, ev.rows))}. Why: {why}."
