"""Wall time of calls, side by side: round by round, each call timed in turn (A, B, C, A, B, C, ...),
until every median is known to a stated precision or a budget runs out.

Interleaving spreads the machine's drift (other processes, clocks) over every call alike, so ratios
between them are fair even where absolute times are noisy. The statistics are torch.utils.benchmark's
`Measurement` (median, quartiles, and `meets_confidence`, the stop rule of `adaptive_autorange`), and
the clock is its `timer`, which synchronises a GPU. Its `Timer` cannot do the rounds: it times one
statement at a time, and each `blocked_autorange` or `timeit` first makes calls it discards (to size
the block, or to warm up), which for a 100 ms forward doubles the work of every round. So each call's
block size is set once, from a warm call, and every round times one block of each. Speeds belong in
benchmarks and in the timing pass, never in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch.utils.benchmark import Measurement
from torch.utils.benchmark.utils.common import TaskSpec
from torch.utils.benchmark.utils.timer import timer as clock

from attn.traces.common.intervals import Timed
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
    progress: Callable[[str], None] | None = None,
    failed: Callable[[str, Exception], None] | None = None,
) -> dict[str, Timed]:
    """Each call timed interleaved, round by round, warm: at least `min_rounds` rounds, then more
    until every call's interquartile range is within `precision` of its median or `budget_s` seconds
    have gone, at most `max_rounds`. A block is as many calls as fill `block_s` (one at least).
    `progress` hears of each warm-up and of each round done. With `failed`, a call that raises as
    it warms up (a compile that fails) is told to it and left out; without, the error stops all."""
    say = progress or (lambda _: None)
    if not calls:
        return {}
    # A block no longer than the budget allows for the least rounds: a small budget, small blocks.
    block_s = max(min(block_s, budget_s / (min_rounds * len(calls))), 1e-4)
    with torch.no_grad():
        number = _warm(calls, block_s, say, failed)
        calls = {label: fn for label, fn in calls.items() if label in number}
        if not calls:
            return {}
        blocks: dict[str, list[float]] = {label: [] for label in calls}
        start = clock()
        for round_ in range(max_rounds):
            for label, fn in calls.items():
                begin = clock()
                for _ in range(number[label]):
                    fn()
                blocks[label].append(clock() - begin)
            found = {label: _measurement(label, number[label], t) for label, t in blocks.items()}
            say(f"round {round_ + 1} timed ({clock() - start:.0f} s)")
            if round_ + 1 >= min_rounds and (
                all(m.meets_confidence(precision) for m in found.values())
                or clock() - start >= budget_s
            ):
                break
    return {label: _timed(m) for label, m in found.items()}


def _warm(
    calls: Mapping[str, Callable[[], object]],
    block_s: float,
    say: Callable[[str], None],
    failed: Callable[[str, Exception], None] | None,
) -> dict[str, int]:
    """Each call made twice untimed (the first builds masks, compiles, fills caches; the second
    sizes its block): how many calls make a block, for each call that did not fail."""
    number = {}
    for label, fn in calls.items():
        say(f"warming up {label}")
        try:
            fn()
            begin = clock()
            fn()
        except Exception as exc:
            if failed is None:
                raise
            failed(label, exc)
            continue
        number[label] = max(1, int(block_s / max(clock() - begin, 1e-9)))
    return number


def _measurement(label: str, number: int, blocks: list[float]) -> Measurement:
    spec = TaskSpec(stmt=label, setup="", num_threads=torch.get_num_threads())
    return Measurement(number_per_run=number, raw_times=blocks, task_spec=spec)


def _timed(m: Measurement) -> Timed:
    """Median and interquartile range of the blocks, in µs per call; repeats: blocks timed."""
    # The quartiles as Measurement computes them (its public API gives the median and iqr only).
    times = torch.tensor(sorted(m.times), dtype=torch.float64)
    low, median, high = times.quantile(torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    return Timed(
        median_us=median.item() * 1e6,
        low_us=low.item() * 1e6,
        high_us=high.item() * 1e6,
        repeats=len(m.times),
        calls=len(m.times) * m.number_per_run,
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
