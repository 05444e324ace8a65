"""One rank of a distributed job, from its own trace: its compute, its communication, the time it
waited on a receive, and the share of its communication that compute hid.

Measured per range (each `attn_fwd`, else each `ProfilerStep#N`, else the whole trace) as lengths
of time covered, so work nested in work or spread over streams counts once:

- compute: on a CPU, the ops of the range's thread, less the c10d:: calls that start
  communication; on a GPU, the kernels, copies and fills the range launched, less NCCL's kernels.
- communication: while any communication is under way. On a CPU, gloo's spans (a send's lasts
  from its start until it is done, on any thread) and the c10d:: calls that start them; on a
  GPU, NCCL's kernels.
- waiting on a receive: while a receive is under way and the rank computes nothing.
- hidden: the share of the communication during which the rank computed.

Sends and receives are counted from the spans, and each send's bytes read from its recorded input
(shape and element type). Patterns come from attn.traces.read.patterns.
"""

from __future__ import annotations

import math
import re

import numpy as np

from attn.traces.common.units import ELEMENT_BYTES
from attn.traces.read.patterns import (
    COMM_OP,
    COMM_SPAN,
    NCCL_KERNEL,
    NCCL_RECV_KERNEL,
    RECV_SPAN,
    SEND_SPAN,
)
from attn.traces.read.trace import Trace

Spans = np.ndarray  # (n, 2) starts and ends, sorted and apart: the time a set of events covers
MAX_SPANS = 2000  # a lane of the ranks' figure: closer stretches are drawn as one
WHOLE_TRACE = "the whole trace"  # the range of a trace with no attn_fwd and no ProfilerStep


def covered(starts, ends) -> Spans:
    """The stretches of time the intervals cover, merged."""
    starts, ends = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    if not len(starts):
        return np.empty((0, 2))
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > ends[:-1]  # a stretch starts where no earlier interval reaches
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(starts) - 1)
    return np.column_stack([starts[first], ends[last]])


def length(spans: Spans) -> float:
    return float((spans[:, 1] - spans[:, 0]).sum()) if len(spans) else 0.0


def overlap(a: Spans, b: Spans) -> float:
    """How long a and b both cover."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i, 1], b[j, 1]) - max(a[i, 0], b[j, 0]))
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return total


def minus(a: Spans, b: Spans) -> Spans:
    """What a covers and b does not."""
    out, j = [], 0
    for start, end in a.tolist():
        while j < len(b) and b[j, 1] <= start:
            j += 1
        at, k = start, j
        while k < len(b) and b[k, 0] < end:
            if b[k, 0] > at:
                out.append((at, b[k, 0]))
            at, k = max(at, b[k, 1]), k + 1
        if at < end:
            out.append((at, end))
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def clip(spans: Spans, start: float, end: float) -> Spans:
    """The part of the spans between start and end."""
    kept = np.column_stack([np.maximum(spans[:, 0], start), np.minimum(spans[:, 1], end)])
    return kept[kept[:, 1] > kept[:, 0]] if len(spans) else spans


def coarse(spans: Spans, gap: float) -> Spans:
    """The spans with gaps shorter than `gap` closed: a picture's pixels, not a trace's events."""
    if len(spans) < 2:
        return spans
    new = np.ones(len(spans), dtype=bool)
    new[1:] = spans[1:, 0] - spans[:-1, 1] > gap
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(spans) - 1)
    return np.column_stack([spans[first, 0], spans[last, 1]])


def send_bytes(args: dict) -> int | None:
    """The bytes a send carries: its tensor's elements times the element's size, as recorded."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    if not dims or not types or types[0] not in ELEMENT_BYTES:
        return None
    shape = dims[0][0] if dims[0] and isinstance(dims[0][0], list) else dims[0]
    if not shape or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape) * ELEMENT_BYTES[types[0]]


class Window:
    """One range of a rank's trace (or the whole trace): its start and end, the host rows of its
    own thread and of every thread, and the device work launched in it."""

    def __init__(self, trace: Trace, name: str, start: float, end: float, own, every, device):
        self.trace, self.name, self.start, self.end = trace, name, start, end
        self.own, self.every, self.device = own, every, device

    def _of(self, rows: np.ndarray) -> Spans:
        return covered(self.trace.ts[rows], self.trace.end[rows])

    def _named(self, rows: np.ndarray, pattern: str, cat: str | None = None) -> np.ndarray:
        t = self.trace
        if cat is not None:
            rows = rows[t.cat_code[rows] == t._category_codes.get(cat, -1)]
        found = re.compile(pattern)
        return rows[np.fromiter((found.search(t.name[i]) is not None for i in rows.tolist()), bool)]

    @property
    def on_device(self) -> bool:
        return self.trace.has_device_activity

    def compute(self) -> Spans:
        """The rank's own work: kernels less NCCL's on a GPU, ops less c10d:: calls on a CPU."""
        if self.on_device:
            return self._of(np.setdiff1d(self.device, self._named(self.device, NCCL_KERNEL)))
        ops = self._named(self.own, "", "cpu_op")
        comm = self._named(ops, COMM_OP)
        return minus(self._of(np.setdiff1d(ops, comm)), self._of(comm))  # under c10d: its own

    def spans(self, pattern: str) -> np.ndarray:
        """The communication spans (user annotations) of any thread that match `pattern`."""
        return self._named(self.every, pattern, "user_annotation")

    def communications(self) -> np.ndarray:
        """Its communication operations: NCCL's kernels on a GPU, gloo's spans on a CPU."""
        return self._named(self.device, NCCL_KERNEL) if self.on_device else self.spans(COMM_SPAN)

    def communication(self) -> Spans:
        """While communication is under way; on a CPU also while its own thread is in the c10d::
        calls that start it (a send's copies its tensor)."""
        if self.on_device:
            return self._of(self.communications())
        calls = self._named(self.own, COMM_OP, "cpu_op")
        return clip(self._of(np.union1d(self.communications(), calls)), self.start, self.end)

    def receives(self) -> Spans:
        if self.on_device:
            return self._of(self._named(self.device, NCCL_RECV_KERNEL))
        return clip(self._of(self.spans(RECV_SPAN)), self.start, self.end)

    def measure(self) -> dict:
        """This range's times (µs) and counts."""
        compute, comm, recv = self.compute(), self.communication(), self.receives()
        sends = self.spans(SEND_SPAN)
        return {
            "compute_us": length(compute),
            "communication_us": length(comm),
            "hidden_us": overlap(comm, compute),
            "recv_wait_us": length(recv) - overlap(recv, compute),
            "communications": len(self.communications()),
            "sends": len(sends),
            "receives": len(self.spans(RECV_SPAN)),
            "send_bytes": [send_bytes(self.trace.args[i]) for i in sends.tolist()],
        }

    def lanes(self) -> dict:
        """What the ranks' figure draws of this range: compute, communication and the waits on a
        receive, as stretches of time from the range's start (µs, at most MAX_SPANS each)."""
        compute, comm = self.compute(), self.communication()
        gap = (self.end - self.start) / MAX_SPANS
        drawn = {
            "compute": compute,
            "communication": comm,
            "waiting": minus(self.receives(), compute),
        }
        return {
            "start_us": float(self.start),
            "end_us": float(self.end),
            **{k: np.round(coarse(v, gap), 3).tolist() for k, v in drawn.items()},
        }


def windows(trace: Trace) -> tuple[str, list[Window]]:
    """The ranges measured (their name) and their windows: each attn_fwd, else each ProfilerStep,
    else the whole trace as one."""
    own, every = trace.forwards(), trace.forwards(any_thread=True)
    if own:
        names = {trace.name[f.row] for f in own}
        name = names.pop() if len(names) == 1 else "ProfilerStep#*"
        return name, [
            Window(trace, trace.name[o.row], trace.ts[o.row], trace.end[o.row], o.cpu_rows,
                   e.cpu_rows, e.device_rows)
            for o, e in zip(own, every, strict=True)
        ]  # fmt: skip
    host, device = np.flatnonzero(~trace.is_device), np.flatnonzero(trace.is_device)
    start, end = float(trace.ts.min()), float(trace.end.max())
    return WHOLE_TRACE, [Window(trace, WHOLE_TRACE, start, end, host, host, device)]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def rank_row(trace: Trace) -> dict:
    """A rank's compute in each of its ranges, and per range (a mean) its communication, its wait
    on receives, its sends and their bytes; the share of its communication its compute hid, over
    all ranges. Times in µs."""
    name, found = windows(trace)
    per = [w.measure() for w in found]
    communication = sum(p["communication_us"] for p in per)
    return {
        "range": name,
        "ranges": len(per),
        "range_names": [w.name for w in found],
        "compute_us_per_range": [p["compute_us"] for p in per],
        "communication_us": _mean([p["communication_us"] for p in per]),
        "recv_wait_us": _mean([p["recv_wait_us"] for p in per]),
        "hidden_share": (
            float(sum(p["hidden_us"] for p in per) / communication) if communication else None
        ),
        "communications_per_range": _mean([p["communications"] for p in per]),
        "sends_per_range": _mean([p["sends"] for p in per]),
        "receives_per_range": _mean([p["receives"] for p in per]),
        "bytes_per_send": sorted({b for p in per for b in p["send_bytes"] if b is not None}),
        "communication_from": "NCCL kernels" if trace.has_device_activity else "spans",
    }


def lanes(trace: Trace, index: int) -> dict | None:
    """The figure's lanes of one range (the `index`-th; None when the trace has fewer)."""
    _, found = windows(trace)
    return found[index].lanes() if index < len(found) else None
