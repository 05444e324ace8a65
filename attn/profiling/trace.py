"""Read a Chrome trace from torch.profiler: find each forward and what it ran on CPU and device."""

from __future__ import annotations

import dataclasses
import statistics

FORWARD_RANGE = "attn_fwd"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # what counts as device work
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")  # the CPU side of a launch
_EPS_US = 1e-3  # trace timestamps are floats in microseconds


@dataclasses.dataclass(frozen=True)
class Event:
    """One complete ('X') event of the trace."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: int | str
    tid: int | str
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def correlation(self) -> int | None:
        return self.args.get("correlation")

    def contains(self, other: Event) -> bool:
        return self.ts - _EPS_US <= other.ts and other.end <= self.end + _EPS_US


@dataclasses.dataclass
class Forward:
    """One `attn_fwd` range: the CPU events under it and the device work it launched."""

    range: Event
    cpu_events: list[Event]  # ops and launches on the range's thread, in start order
    device_events: list[Event]  # kernels, memcpys and memsets it launched, in launch order

    @property
    def aten_ops(self) -> list[Event]:
        return [e for e in self.cpu_events if e.cat == "cpu_op" and e.name.startswith("aten::")]

    @property
    def device_time_us(self) -> float:
        return sum(e.dur for e in self.device_events)


def events(trace: dict) -> list[Event]:
    """Every complete event, sorted by start time (longer first on ties, so parents lead)."""
    found = [
        Event(
            e["name"],
            e.get("cat", ""),
            float(e["ts"]),
            float(e.get("dur", 0.0)),
            e.get("pid", 0),
            e.get("tid", 0),
            e.get("args") or {},
        )
        for e in trace.get("traceEvents", [])
        if e.get("ph") == "X"
    ]
    return sorted(found, key=lambda e: (e.ts, -e.dur))


def forwards(trace: dict) -> list[Forward]:
    """The recorded forwards, in order, each with its CPU events and the device work it launched."""
    all_events = events(trace)
    device_by_correlation: dict[int, list[Event]] = {}
    for e in all_events:
        if e.cat in DEVICE_CATEGORIES and e.correlation is not None:
            device_by_correlation.setdefault(e.correlation, []).append(e)

    found = []
    ranges = [e for e in all_events if e.cat == "user_annotation" and e.name == FORWARD_RANGE]
    for rng in ranges:
        inside = [
            e
            for e in all_events
            if e is not rng and (e.pid, e.tid) == (rng.pid, rng.tid) and rng.contains(e)
        ]
        launched = [
            dev
            for e in inside
            if e.cat in LAUNCH_CATEGORIES and e.correlation is not None
            for dev in device_by_correlation.get(e.correlation, [])
        ]
        found.append(Forward(rng, inside, sorted(launched, key=lambda e: e.ts)))
    return found


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def per_forward(trace: dict) -> dict:
    """Mean CPU time, device time, op count and device-work count per forward, plus names."""
    fwds = forwards(trace)
    if not fwds:
        raise ValueError(f"the trace holds no {FORWARD_RANGE!r} range")
    has_device = any(e.cat in DEVICE_CATEGORIES for e in events(trace))
    first = fwds[0]
    return {
        "forwards": len(fwds),
        "cpu_time_us": mean([f.range.dur for f in fwds]),
        "device_time_us": mean([f.device_time_us for f in fwds]) if has_device else None,
        "ops_per_forward": mean([len(f.aten_ops) for f in fwds]),
        "kernels_per_forward": mean([len(f.device_events) for f in fwds]) if has_device else None,
        "kernels": [e.name for e in first.device_events],
        "ops": [e.name for e in top_level(first)],
    }


def top_level(forward: Forward) -> list[Event]:
    """The ops called directly by the forward (not those nested inside other ops)."""
    ops = [e for e in forward.cpu_events if e.cat == "cpu_op"]
    result: list[Event] = []
    for e in ops:
        if not result or not result[-1].contains(e):
            result.append(e)
    return result


def depths(evts: list[Event]) -> list[int]:
    """Nesting depth of each event (0 = outermost), for events sorted by start time."""
    stack: list[Event] = []
    result = []
    for e in evts:
        while stack and not stack[-1].contains(e):
            stack.pop()
        result.append(len(stack))
        stack.append(e)
    return result
