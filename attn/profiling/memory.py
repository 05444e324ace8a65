"""Peak memory allocated by one forward (or any call), measured, on CPU and GPU."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from attn.profiling.environment import is_gpu
from attn.profiling.quiet import without_profiler_chatter
from attn.traces.read.range_counts import memory_events, peak_of
from attn.traces.read.trace import CPU_DEVICE_TYPE
from attn.variant import Variant


def peak_forward_memory(variant: Variant, q, k, v, *, is_causal: bool) -> int:
    """Bytes allocated at the busiest moment of one forward, beyond what was allocated before it."""
    with torch.no_grad():
        return peak_memory(lambda: variant.forward(q, k, v, is_causal=is_causal), q.device)


def peak_memory(run: Callable[[], object], device: torch.device) -> int:
    """Bytes allocated at the busiest moment of run(), beyond what was allocated before it.

    GPU: torch.cuda.max_memory_allocated after a reset. CPU: the profiler's memory events (every
    allocation and free with its signed size) summed in time order; the highest running total wins.
    """
    if is_gpu(device):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        run()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with (
        without_profiler_chatter(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        run()
    return peak_of(cpu_allocations(prof))


def cpu_allocations(prof: profile) -> list[int]:
    """Signed sizes of the CPU allocations (+) and frees (-) the profiler saw, in time order."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return [nbytes for _, nbytes in memory_events(trace, CPU_DEVICE_TYPE)]
