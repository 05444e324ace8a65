"""Wall time of calls, side by side, with torch.utils.benchmark: round by round, each call timed in
turn (A, B, C, A, B, C, ...), until every median is known to a stated precision or a budget runs out.

Interleaving spreads the machine's drift (other processes, clocks) over every call alike, so ratios
between them are fair even where absolute times are noisy. `Timer.adaptive_autorange` times one
statement until its spread is small, so it cannot interleave: each round takes one
`blocked_autorange` per call instead, the rounds are merged with `Measurement.merge`, and the stop
rule is adaptive_autorange's own (`Measurement.meets_confidence`). Speeds belong in benchmarks and
in the timing pass, never in tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch
from torch.utils import benchmark

from attn.profiling.intervals import Timed
from attn.variant import Variant

PRECISION = (
    0.1  # stop once every call's IQR is within this share of its median (adaptive_autorange's)
)
BLOCK_S = 0.02  # seconds per block: a block of calls is one sample


def measure(
    calls: Mapping[str, Callable[[], object]],
    *,
    precision: float = PRECISION,
    budget_s: float = 5.0,
    min_rounds: int = 5,
    max_rounds: int = 200,
    block_s: float = BLOCK_S,
) -> dict[str, Timed]:
    """Each call timed interleaved, round by round, warm: at least `min_rounds` rounds, then more
    until every call's interquartile range is within `precision` of its median or `budget_s` seconds
    have gone, at most `max_rounds`. Runs with torch's thread count (Timer's default is one)."""
    threads = torch.get_num_threads()
    timers = {
        label: benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads, label=label)
        for label, fn in calls.items()
    }
    rounds: dict[str, list[benchmark.Measurement]] = {label: [] for label in calls}
    with torch.no_grad():
        for fn in calls.values():  # warm: first calls build masks, compile, fill caches
            fn()
        start = time.perf_counter()
        for round_ in range(max_rounds):
            for label, timer in timers.items():
                rounds[label].append(timer.blocked_autorange(min_run_time=block_s))
            merged = {label: benchmark.Measurement.merge(ms)[0] for label, ms in rounds.items()}
            if round_ + 1 >= min_rounds and (
                all(m.meets_confidence(precision) for m in merged.values())
                or time.perf_counter() - start >= budget_s
            ):
                break
    return {label: _timed(m, rounds[label]) for label, m in merged.items()}


def _timed(merged: benchmark.Measurement, rounds: list[benchmark.Measurement]) -> Timed:
    """Median and interquartile range of the blocks, in µs per call; repeats: blocks timed."""
    calls = sum(m.number_per_run * len(m.raw_times) for m in rounds)
    return Timed(
        median_us=merged.median * 1e6,
        low_us=merged._p25 * 1e6,  # Measurement keeps its quartiles; iqr is their difference
        high_us=merged._p75 * 1e6,
        repeats=len(merged.times),
        calls=calls,
    )


def forward_calls(
    variants: Mapping[str, Variant], q, k, v, *, is_causal: bool
) -> dict[str, Callable[[], object]]:
    """One zero-argument forward per variant, on the same inputs."""
    return {
        name: (lambda variant=variant: variant.forward(q, k, v, is_causal=is_causal))
        for name, variant in variants.items()
    }


def time_interleaved(
    variants: Mapping[str, Variant], q, k, v, *, is_causal: bool, budget_s: float = 5.0
) -> dict[str, Timed]:
    """Each variant's forward, interleaved with the others' (see `measure`)."""
    return measure(forward_calls(variants, q, k, v, is_causal=is_causal), budget_s=budget_s)


def time_forward(variant: Variant, q, k, v, *, is_causal: bool, budget_s: float = 2.0) -> Timed:
    """One variant's forward (see `measure`)."""
    return time_interleaved(
        {variant.name: variant}, q, k, v, is_causal=is_causal, budget_s=budget_s
    )[variant.name]
