"""The backward block of a training step's summary: its attn_bwd ranges, its peak, what it kept.

A training run (the training example, or a training variant run here) takes each step as a forward
in `attn_fwd`, a loss, and a backward in `attn_bwd`, and lists beside the trace, under SAVED_KEY,
the tensors autograd saved for the backward (measured with saved_tensors_hooks: one row per storage).
"""

from __future__ import annotations

from attn.traces.read.range_counts import memory_events, peak_of, per_forward
from attn.traces.read.trace import BACKWARD_RANGE, Forward, Trace

SAVED_KEY = "attn_saved_for_backward"  # in the trace, beside the profiler's own top-level keys
MEASURED_WITH = "torch.autograd.graph.saved_tensors_hooks, each storage counted once"


def as_forward(block: dict) -> dict:
    """The backward block under the forward's key names, so what reads a forward reads it."""
    return {k.replace("_per_backward", "_per_forward"): v for k, v in block.items()}


def step_peak(trace: Trace, fwds: list[Forward], bwds: list[Forward]) -> int | None:
    """The most bytes allocated from the start of a forward to the end of its backward, beyond
    what was live when the forward began (the largest over steps); None without memory events."""
    allocations = memory_events(trace.raw, 1 if trace.has_device_activity else 0)
    if not allocations or not bwds:
        return None
    return max(
        peak_of([n for ts, n in allocations if f.range.ts <= ts <= b.range.end])
        for f, b in zip(fwds, bwds, strict=False)
    )


def summarize_backward(trace: Trace, fwds: list[Forward]) -> dict | None:
    """Per-backward means (as per_forward's, named per backward), the step's peak and what autograd
    saved; None for a trace with no attn_bwd range."""
    if not trace.range_rows(BACKWARD_RANGE):
        return None
    measured = per_forward(trace, BACKWARD_RANGE, any_thread=True)
    block = {k.replace("_per_forward", "_per_backward"): v for k, v in measured.items()}
    block["backwards"] = block.pop("forwards")
    block["peak_memory_step_bytes"] = step_peak(
        trace, fwds, trace.forwards(BACKWARD_RANGE, any_thread=True)
    )
    saved = trace.raw.get(SAVED_KEY)
    if saved is not None:
        block["saved_for_backward_bytes"] = sum(row["bytes"] for row in saved)
        block["saved_for_backward"] = saved
        block["saved_measured_with"] = MEASURED_WITH
    return block
