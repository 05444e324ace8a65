"""What a range of a trace holds, in numbers: its ATen ops, kernels, launches, copies by direction
and fills, their means over the ranges (`per_forward`, what summary.json stores), the top-level
ops and their nesting, and the peak of memory allocated inside each range.

Reads the table attn.traces.read.trace parses; the claims, tables, diffs and the timeline count
with these.
"""

from __future__ import annotations

import re
import statistics

import numpy as np

from attn.traces.read.reading import TraceFormatError
from attn.traces.read.trace import (
    CPU_DEVICE_TYPE,
    EPS_US,
    FORWARD_RANGE,
    KERNEL,
    MEMCPY,
    MEMSET,
    STEP_PREFIX,
    Event,
    Forward,
    Trace,
    parse,
)

# --- what a range holds ---------------------------------------------------------------------


def runtime_kind(name: str) -> str:
    """What a CUDA/HIP runtime or driver call does: launch, synchronize, allocate, memcpy, other."""
    if "Launch" in name:
        return "launch"
    if "Synchronize" in name or "WaitEvent" in name:
        return "synchronize"
    if re.search(r"Malloc|Free|HostAlloc|MemPool", name):
        return "allocate"
    if "Memcpy" in name or "Memset" in name:
        return "memcpy"
    return "other"


def memcpy_direction(name: str) -> str:
    """`Memcpy DtoD (Device -> Device)` -> `DtoD`; `?` when the name does not say."""
    m = re.search(r"Memcpy\s+(\w+)", name)
    return m.group(1) if m else "?"


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def range_counts(forward: Forward) -> dict:
    """Counts and times of one range: the per-range row of a summary (columns, no event objects)."""
    t, device = forward.trace, forward.device_rows
    memcpy: dict[str, int] = {}
    for direction in (memcpy_direction(t.name[i]) for i in device if t.cat[i] == MEMCPY):
        memcpy[direction] = memcpy.get(direction, 0) + 1
    return {
        "name": t.name[forward.row],
        "cpu_time_us": float(t.dur[forward.row]),
        "device_time_us": forward.device_time_us,
        "aten_ops": int(t.is_aten_op[forward.cpu_rows].sum()),
        "kernels": sum(t.cat[i] == KERNEL for i in device),
        "memcpy": dict(sorted(memcpy.items())),
        "memset": sum(t.cat[i] == MEMSET for i in device),
        "launches": int(t.is_launch[forward.cpu_rows].sum()),
    }


def per_forward(
    trace: dict | Trace, range_name: str | None = None, any_thread: bool = False
) -> dict:
    """Mean times and counts per range, each range's own row, and the names of the first one."""
    trace = parse(trace)
    fwds = trace.forwards(range_name, any_thread)
    if not fwds:
        wanted = range_name or f"{FORWARD_RANGE!r} or {STEP_PREFIX}N"
        raise TraceFormatError(f"the trace holds no {wanted} range")
    rows = [range_counts(f) for f in fwds]
    on_device = trace.has_device_activity and trace.device_counts_known  # else: cannot tell
    directions = sorted({d for r in rows for d in r["memcpy"]})

    def mean_of(key: str) -> float | None:
        return _mean([r[key] for r in rows])

    first = fwds[0]
    names = {trace.name[f.row] for f in fwds}  # ProfilerStep#5 to #10: all, by their prefix
    named = first.range.name if len(names) == 1 else f"{STEP_PREFIX}*"
    return {
        "range": named if range_name is None else range_name,
        "forwards": len(fwds),
        "cpu_time_us": mean_of("cpu_time_us"),
        "device_time_us": mean_of("device_time_us") if on_device else None,
        "ops_per_forward": mean_of("aten_ops"),
        "kernels_per_forward": mean_of("kernels") if on_device else None,
        "memcpy_per_forward": (
            {d: _mean([r["memcpy"].get(d, 0) for r in rows]) for d in directions}
            if on_device
            else None
        ),
        "memset_per_forward": mean_of("memset") if on_device else None,
        "launches_per_forward": mean_of("launches") if on_device else None,
        "peak_memory_bytes": peak_memory(trace, fwds),
        "kernels": [e.name for e in first.of_kind(KERNEL)],
        "ops": [e.name for e in top_level(first)],
        "ranges": rows,
    } | ({"problems": trace.problems} if trace.problems else {})


def top_level(forward: Forward) -> list[Event]:
    """The ops called directly by the range (not those nested inside other ops)."""
    ops = [e for e in forward.cpu_events if e.cat == "cpu_op"]
    result: list[Event] = []
    for e in ops:
        if not result or not result[-1].contains(e):
            result.append(e)
    return result


def depths(evts: list[Event]) -> list[int]:
    """Nesting depth of each event (0 = outermost), for events sorted by start time."""
    stack: list[tuple[float, float]] = []  # (start, end) of the events enclosing the current one
    result = []
    for e in evts:
        start, end = e.ts, e.ts + e.dur
        while stack and not (stack[-1][0] - EPS_US <= start and end <= stack[-1][1] + EPS_US):
            stack.pop()
        result.append(len(stack))
        stack.append((start, end))
    return result


# --- memory ---------------------------------------------------------------------------------


def memory_events(raw: dict, device_type: int) -> list[tuple[float, int]]:
    """(ts, signed bytes) of every allocation (+) and free (-) on that device type, in time order."""
    found = [
        (e.get("ts"), e["args"]["Bytes"])
        for e in raw.get("traceEvents", [])
        if isinstance(e, dict)
        and e.get("name") == "[memory]"
        and isinstance(e.get("args"), dict)
        and e["args"].get("Device Type") == device_type
        and "Bytes" in e["args"]
    ]
    for ts, size in found:  # a peak summed from anything else would be made up
        if type(size) is not int or isinstance(ts, bool) or not isinstance(ts, (int, float)):
            raise TraceFormatError(
                f"a [memory] event at ts {ts!r} has Bytes {size!r}: not a whole number of bytes"
            )
    return sorted((float(ts), size) for ts, size in found)


def peak_of(sizes: list[int]) -> int:
    """The highest running total of signed allocation sizes (0 if nothing stayed allocated)."""
    live = peak = 0
    for nbytes in sizes:
        live += nbytes
        peak = max(peak, live)
    return peak


def peak_memory(trace: Trace, fwds: list[Forward]) -> int | None:
    """The most bytes a range had allocated beyond what was live when it began (the largest over
    ranges), from the trace's memory events; None when it was recorded without profile_memory."""
    allocations = memory_events(trace.raw, 1 if trace.has_device_activity else CPU_DEVICE_TYPE)
    if not allocations:
        return None
    ts = np.array([t for t, _ in allocations], dtype=np.float64)
    sizes = np.array([b for _, b in allocations], dtype=np.int64)
    peaks = []
    for f in fwds:  # each range's allocations are a slice of the sorted ones: no scan per range
        lo = np.searchsorted(ts, trace.ts[f.row], "left")
        hi = np.searchsorted(ts, trace.end[f.row], "right")
        peaks.append(max(0, int(np.cumsum(sizes[lo:hi]).max(initial=0))))
    return max(peaks)
