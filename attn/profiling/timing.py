"""Wall time of calls, side by side: each timed in turn, round by round, synchronised on a GPU.

Interleaving spreads the machine's drift (other processes, clocks) over every call alike, so ratios
between them are fair even where absolute times are noisy. Speeds belong in benchmarks that print
these ratios, never in tests.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import torch

from attn.profiling.environment import is_gpu
from attn.variant import Variant


def seconds(fn: Callable[[], object], device: str | torch.device) -> float:
    """One call's wall time; on a GPU from CUDA events around it, so the kernels are counted."""
    if is_gpu(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_side_by_side(
    calls: Mapping[str, Callable[[], object]],
    device: str | torch.device,
    *,
    warmup: int = 1,
    min_rounds: int = 3,
    max_rounds: int = 30,
    budget_s: float = 0.0,
) -> dict[str, list[float]]:
    """Seconds of each call, round by round after `warmup` rounds: at least `min_rounds` rounds,
    more until the calls have spent `budget_s` each, at most `max_rounds`."""
    times: dict[str, list[float]] = {label: [] for label in calls}
    with torch.no_grad():
        for _ in range(warmup):
            for fn in calls.values():
                fn()
        for round_ in range(max_rounds):
            for label, fn in calls.items():
                times[label].append(seconds(fn, device))
            spent = sum(sum(t) for t in times.values())
            if round_ + 1 >= min_rounds and spent >= budget_s * len(calls):
                break
    return times


def time_interleaved(
    variants: Mapping[str, Variant], q, k, v, *, is_causal: bool, repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median microseconds per forward of each variant, their calls interleaved round by round."""
    calls = {
        name: (lambda variant=variant: variant.forward(q, k, v, is_causal=is_causal))
        for name, variant in variants.items()
    }
    times = time_side_by_side(
        calls, q.device, warmup=warmup, min_rounds=repeats, max_rounds=repeats
    )
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def time_forward(
    variant: Variant, q, k, v, *, is_causal: bool, repeats: int = 5, warmup: int = 2
) -> float:
    """Median microseconds per forward of one variant."""
    return time_interleaved(
        {variant.name: variant}, q, k, v, is_causal=is_causal, repeats=repeats, warmup=warmup
    )[variant.name]
