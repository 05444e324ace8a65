"""Wall time of a forward: the median of several calls after a warm-up, synchronised on GPU."""

from __future__ import annotations

import statistics
import time

import torch

from attn.variant import Variant


def time_forward(
    variant: Variant, q, k, v, *, is_causal: bool, repeats: int = 5, warmup: int = 2
) -> float:
    """Median microseconds per forward."""
    on_gpu = q.device.type == "cuda"
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            if on_gpu:
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                variant.forward(q, k, v, is_causal=is_causal)
                end.record()
                end.synchronize()
                elapsed_us = start.elapsed_time(end) * 1000
            else:
                t0 = time.perf_counter()
                variant.forward(q, k, v, is_causal=is_causal)
                elapsed_us = (time.perf_counter() - t0) * 1e6
            if i >= warmup:
                times.append(elapsed_us)
    return statistics.median(times)
