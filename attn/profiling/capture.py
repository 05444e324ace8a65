"""Run a variant under torch.profiler the way the examples do and hand back what it recorded."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.profiling.config import ProfileConfig
from attn.profiling.environment import is_gpu
from attn.profiling.quiet import without_profiler_chatter
from attn.profiling.training import training_step
from attn.traces.figures.table import ROWS
from attn.traces.read.backward import SAVED_KEY
from attn.traces.read.trace import FIRST_CALLS_KEY
from attn.variant import Variant

WARMUP_CALLS = 3
# wait 1, warm up 1, record 3: five steps, three recorded forwards (as examples/ do).
SCHEDULE = dict(wait=1, warmup=1, active=3, repeat=1)
STEPS = 5


def capture(variant: Variant, config: ProfileConfig) -> tuple[dict, str]:
    """Profile five steps of `variant.forward` (of a training step, for a variant that trains);
    returns the raw Chrome trace and the profiler's table."""
    q, k, v = config.make_inputs()
    on_gpu = is_gpu(config.device)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    if variant.trains:  # forward in attn_fwd, a loss, backward in attn_bwd
        q, k, v = (t.requires_grad_() for t in (q, k, v))

    def step(saved: list | None = None) -> None:
        if variant.trains:
            training_step(variant, q, k, v, is_causal=config.is_causal, saved=saved)
            return
        with record_function("attn_fwd"):
            variant.forward(q, k, v, is_causal=config.is_causal)

    first_calls, saved = {}, None
    with torch.enable_grad() if variant.trains else torch.no_grad():
        # First calls build masks, compile kernels and warm caches; keep them out of the trace,
        # but time the first two (a compiled variant compiles there).
        for call in range(WARMUP_CALLS):
            start = time.perf_counter()
            step()
            sync()
            if call < 2:
                first_calls[("first", "second")[call]] = time.perf_counter() - start
        if variant.trains:  # one more step, outside the trace: what autograd keeps for backward
            saved = []
            step(saved)
        with (
            without_profiler_chatter(),
            profile(
                activities=activities,
                schedule=schedule(**SCHEDULE),
                record_shapes=True,
                profile_memory=True,
            ) as prof,
        ):
            for _ in range(STEPS):
                step()
                sync()
                prof.step()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    trace[FIRST_CALLS_KEY] = first_calls  # beside the profiler's own top-level keys
    if saved is not None:
        trace[SAVED_KEY] = saved
    return trace, profiler_table(prof, on_gpu)


def profiler_table(prof: torch.profiler.profile, on_gpu: bool) -> str:
    """`key_averages().table()`, sorted by device time on a GPU and CPU time on the CPU."""
    sort_by = "device_time_total" if on_gpu else "cpu_time_total"
    return prof.key_averages().table(sort_by=sort_by, row_limit=ROWS, max_name_column_width=60)
