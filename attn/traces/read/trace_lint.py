"""What in a trace itself misleads a viewer or a reader: one sentence per problem found.

Reads the parsed columns only (no torch): events a viewer drops, work it cannot tie to a launch,
and what the recording left out (shapes, CPU ops, device activity).
"""

from __future__ import annotations

import numpy as np

from attn.traces.read.trace import EPS_US, KERNEL, Trace


def overlapping(trace: Trace) -> tuple[int, str | None]:
    """Complete events that start inside another on their thread and end after it (Perfetto nests
    slices on a track, so it drops these), and the first such pair in words. One stack per
    thread: linear in the events."""
    found, first = 0, None
    end = trace.end.tolist()
    ts = trace.ts.tolist()
    stacks: dict[int, list[int]] = {}
    for i, thread in enumerate(trace.thread.tolist()):  # rows are in start order
        stack = stacks.setdefault(thread, [])
        while stack and end[stack[-1]] <= ts[i] + EPS_US:
            stack.pop()
        if stack and end[i] > end[stack[-1]] + EPS_US:
            found += 1
            first = first or f"{trace.name[i][:60]} starts inside {trace.name[stack[-1]][:60]}"
            continue  # not pushed: the next event is judged against the one it overlapped
        stack.append(i)
    return found, first


def graph_replays(trace: Trace) -> tuple[int, int]:
    """(graph launches, kernels they replayed): the kernels have no launch of their own."""
    launches = trace.named(trace.is_runtime, lambda name: "GraphLaunch" in name)
    device = trace.launched_by(np.flatnonzero(launches))
    kernels = sum(trace.cat[d] == KERNEL for d in device.tolist())
    return int(launches.sum()), int(kernels)


def lint(trace: Trace) -> list[str]:
    """One line per way the trace misleads: what it is, and what it costs a reader."""
    lines = []
    n, first = overlapping(trace)
    if n:
        lines.append(
            f"{n} complete event(s) overlap another on their thread without nesting in it "
            f"(first: {first}); Perfetto drops them from its tracks"
        )
    launches, kernels = graph_replays(trace)
    if launches:
        lines.append(
            f"{kernels} kernel(s) were replayed from {launches} CUDA/HIP graph launch(es): no CPU "
            "op launched them one by one, so what ran them cannot be read"
        )
    has_ops = "cpu_op" in trace.cat
    if not has_ops:
        lines.append("no CPU ops were recorded: only the device side can be read")
    elif not any("Input Dims" in a for a in trace.args):
        lines.append(
            "no input shapes were recorded (record_shapes=False): kinds of call and "
            "dtypes cannot be told apart"
        )
    if not trace.has_device_activity:
        lines.append("no device activity was recorded: device times and kernels cannot be read")
    lines += [f"{p}: counts may be wrong" for p in trace.problems]
    return lines
