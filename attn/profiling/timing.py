"""Wall time of forwards: medians of several calls after a warm-up, synchronised on GPU."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping

import torch

from attn.profiling.environment import is_gpu
from attn.variant import Variant


def _one_call_us(variant: Variant, q, k, v, is_causal: bool) -> float:
    if is_gpu(q.device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        variant.forward(q, k, v, is_causal=is_causal)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000
    t0 = time.perf_counter()
    variant.forward(q, k, v, is_causal=is_causal)
    return (time.perf_counter() - t0) * 1e6


def time_interleaved(
    variants: Mapping[str, Variant], q, k, v, *, is_causal: bool, repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median microseconds per forward of each variant, their calls interleaved round by round.

    Interleaving spreads the machine's drift (other processes, clocks) over all variants alike,
    so ratios between them are fair even where absolute times are noisy.
    """
    times: dict[str, list[float]] = {name: [] for name in variants}
    with torch.no_grad():
        for round_ in range(warmup + repeats):
            for name, variant in variants.items():
                elapsed = _one_call_us(variant, q, k, v, is_causal)
                if round_ >= warmup:
                    times[name].append(elapsed)
    return {name: statistics.median(t) for name, t in times.items()}


def time_forward(
    variant: Variant, q, k, v, *, is_causal: bool, repeats: int = 5, warmup: int = 2
) -> float:
    """Median microseconds per forward of one variant."""
    return time_interleaved(
        {variant.name: variant}, q, k, v, is_causal=is_causal, repeats=repeats, warmup=warmup
    )[variant.name]
