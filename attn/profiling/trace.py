"""Read any Kineto Chrome trace: find the named ranges and what each ran on the CPU and the device.

Works on the traces torch.profiler writes today and on older ones (torch 1.8-1.10 spelled the
categories `Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`): categories are mapped to today's
names on reading, so everything else sees one format. Device work is tied to the CPU call that
launched it by the correlation id both carry.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import statistics
from pathlib import Path

FORWARD_RANGE = "attn_fwd"
STEP_PREFIX = "ProfilerStep#"
KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
DEVICE_CATEGORIES = (KERNEL, MEMCPY, MEMSET)
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")  # the CPU side of device work
RANGE_CATEGORIES = ("user_annotation", "cpu_op")  # ranges are annotations (old: operators)
OLD_CATEGORIES = {  # torch 1.8-1.10 -> today
    "operator": "cpu_op",
    "runtime": "cuda_runtime",
    "kernel": KERNEL,
    "memcpy": MEMCPY,
    "memset": MEMSET,
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
}
CPU_DEVICE_TYPE = 0  # "Device Type" of a [memory] event: c10::DeviceType, 0 CPU, 1 CUDA
_EPS_US = 1e-3  # timestamps are floats in microseconds


class TraceFormatError(ValueError):
    """The file is not a Chrome trace this module can read; the message says why, in one line."""


@dataclasses.dataclass(frozen=True)
class Event:
    """One complete ('X') event of the trace, with its category in today's spelling."""

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
        value = self.args.get("correlation")
        return None if value is None else int(value)

    def contains(self, other: Event) -> bool:
        return self.ts - _EPS_US <= other.ts and other.end <= self.end + _EPS_US


def load_trace(path: Path | str) -> dict:
    """A trace file (`.json` or `.json.gz`) as a dict; TraceFormatError naming the problem."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        trace = json.loads(raw)
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read it ({e.strerror or e})") from e
    except (ValueError, EOFError) as e:
        raise TraceFormatError(f"{path}: not JSON or gzip-compressed JSON ({e})") from e
    return check_format(trace, str(path))


def check_format(trace: object, where: str = "trace") -> dict:
    """The trace itself when it is a Chrome trace of complete events; else TraceFormatError."""
    if isinstance(trace, list):  # the JSON Array Format: events without the wrapping object
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceFormatError(
            f"{where}: not a Chrome trace (expected an object with a 'traceEvents' list)"
        )
    if not any(isinstance(e, dict) and e.get("ph") == "X" for e in trace["traceEvents"]):
        raise TraceFormatError(f"{where}: a Chrome trace with no complete ('X') events")
    return trace


def _category(cat: str) -> str:
    return OLD_CATEGORIES.get(cat.lower(), cat) if cat[:1].isupper() else cat


def _args(e: dict) -> dict:
    args = e.get("args") or {}
    if "Input dims" in args and "Input Dims" not in args:  # torch 1.8 spelled it this way
        args = {**args, "Input Dims": args["Input dims"]}
    return args


def events(trace: dict) -> list[Event]:
    """Every complete event, sorted by start time (longer first on ties, so parents lead)."""
    found = [
        Event(
            str(e.get("name", "")),
            _category(str(e.get("cat", ""))),
            float(e["ts"]),
            float(e.get("dur", 0.0)),
            e.get("pid", 0),
            e.get("tid", 0),
            _args(e),
        )
        for e in trace.get("traceEvents", [])
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e
    ]
    return sorted(found, key=lambda e: (e.ts, -e.dur))


# --- what a range holds ---------------------------------------------------------------------


@dataclasses.dataclass
class Forward:
    """One range (an `attn_fwd`, a ProfilerStep): CPU events under it and the device work it launched."""

    range: Event
    cpu_events: list[Event]  # ops and runtime calls on the range's thread, in start order
    device_events: list[Event]  # kernels, memcpys and memsets it launched, in start order

    @property
    def aten_ops(self) -> list[Event]:
        return [e for e in self.cpu_events if e.cat == "cpu_op" and e.name.startswith("aten::")]

    @property
    def runtime_calls(self) -> list[Event]:
        return [e for e in self.cpu_events if e.cat in RUNTIME_CATEGORIES]

    def of_kind(self, cat: str) -> list[Event]:
        return [e for e in self.device_events if e.cat == cat]

    @property
    def device_time_us(self) -> float:
        return sum(e.dur for e in self.device_events)


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


def range_names(all_events: list[Event], name: str | None = None) -> list[Event]:
    """The CPU-side range events: `name` exactly (a trailing `*` matches a prefix); by default
    every `attn_fwd`, else every `ProfilerStep#N`."""
    candidates = [e for e in all_events if e.cat in RANGE_CATEGORIES]
    if name is None:
        found = [e for e in candidates if e.name == FORWARD_RANGE]
        return found or [e for e in candidates if e.name.startswith(STEP_PREFIX)]
    if name.endswith("*"):
        return [e for e in candidates if e.name.startswith(name[:-1])]
    return [e for e in candidates if e.name == name]


def forwards(trace: dict, range_name: str | None = None) -> list[Forward]:
    """The ranges, in order, each with its CPU events and the device work it launched."""
    all_events = events(trace)
    device_by_correlation: dict[int, list[Event]] = {}
    for e in all_events:
        if e.cat in DEVICE_CATEGORIES and e.correlation is not None:
            device_by_correlation.setdefault(e.correlation, []).append(e)
    by_thread: dict[tuple, list[Event]] = {}
    for e in all_events:
        if e.cat not in DEVICE_CATEGORIES:
            by_thread.setdefault((e.pid, e.tid), []).append(e)

    found = []
    for rng in range_names(all_events, range_name):
        inside = [
            e for e in by_thread.get((rng.pid, rng.tid), []) if e is not rng and rng.contains(e)
        ]
        launched = [
            dev
            for e in inside
            if e.cat in RUNTIME_CATEGORIES and e.correlation is not None
            for dev in device_by_correlation.get(e.correlation, [])
        ]
        found.append(Forward(rng, inside, sorted(launched, key=lambda e: e.ts)))
    return found


def has_device_activity(trace: dict) -> bool:
    return any(e.cat in DEVICE_CATEGORIES for e in events(trace))


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def range_counts(forward: Forward) -> dict:
    """Counts and times of one range: the per-range row of a summary."""
    memcpy: dict[str, int] = {}
    for e in forward.of_kind(MEMCPY):
        memcpy[memcpy_direction(e.name)] = memcpy.get(memcpy_direction(e.name), 0) + 1
    return {
        "name": forward.range.name,
        "cpu_time_us": forward.range.dur,
        "device_time_us": forward.device_time_us,
        "aten_ops": len(forward.aten_ops),
        "kernels": len(forward.of_kind(KERNEL)),
        "memcpy": dict(sorted(memcpy.items())),
        "memset": len(forward.of_kind(MEMSET)),
        "launches": sum(runtime_kind(e.name) == "launch" for e in forward.runtime_calls),
    }


def per_forward(trace: dict, range_name: str | None = None) -> dict:
    """Mean times and counts per range, each range's own row, and the names of the first one."""
    fwds = forwards(trace, range_name)
    if not fwds:
        wanted = range_name or f"{FORWARD_RANGE!r} or {STEP_PREFIX}N"
        raise TraceFormatError(f"the trace holds no {wanted} range")
    rows = [range_counts(f) for f in fwds]
    on_device = has_device_activity(trace)
    directions = sorted({d for r in rows for d in r["memcpy"]})

    def mean_of(key: str) -> float | None:
        return _mean([r[key] for r in rows])

    first = fwds[0]
    return {
        "range": fwds[0].range.name if range_name is None else range_name,
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
        "peak_memory_bytes": peak_memory(trace, fwds, on_device),
        "kernels": [e.name for e in first.of_kind(KERNEL)],
        "ops": [e.name for e in top_level(first)],
        "ranges": rows,
    }


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
    stack: list[Event] = []
    result = []
    for e in evts:
        while stack and not stack[-1].contains(e):
            stack.pop()
        result.append(len(stack))
        stack.append(e)
    return result


# --- memory ---------------------------------------------------------------------------------


def memory_events(trace: dict, device_type: int) -> list[tuple[float, int]]:
    """(ts, signed bytes) of every allocation (+) and free (-) on that device type, in time order."""
    found = [
        (float(e["ts"]), int(e["args"]["Bytes"]))
        for e in trace.get("traceEvents", [])
        if isinstance(e, dict)
        and e.get("name") == "[memory]"
        and (e.get("args") or {}).get("Device Type") == device_type
        and "Bytes" in e["args"]
    ]
    return sorted(found)


def peak_of(sizes: list[int]) -> int:
    """The highest running total of signed allocation sizes (0 if nothing stayed allocated)."""
    live = peak = 0
    for nbytes in sizes:
        live += nbytes
        peak = max(peak, live)
    return peak


def peak_memory(trace: dict, fwds: list[Forward], on_device: bool) -> int | None:
    """The most bytes a range had allocated beyond what was live when it began (the largest over
    ranges), from the trace's memory events; None when it was recorded without profile_memory."""
    device_type = 1 if on_device else CPU_DEVICE_TYPE
    allocations = memory_events(trace, device_type)
    if not allocations:
        return None
    return max(
        peak_of([b for ts, b in allocations if f.range.ts <= ts <= f.range.end]) for f in fwds
    )
