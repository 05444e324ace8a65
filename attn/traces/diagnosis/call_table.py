"""The calls diagnose found, as the rows of its report's attention table: grouped by
implementation, compiled or not, where they run and pass, each group split into kinds of call, with
their device work (attn.traces.diagnosis.device_work) and, for eager attention, the extra terms on
the score matrix.

Calls are told apart by their input shapes and the kernels they ran, and where shapes were not
recorded, at a clear gap in device time. Finding the calls is attn.traces.diagnosis.calls.
"""

from __future__ import annotations

import re

import numpy as np

from attn.traces.diagnosis import device_work, eager_scores, preparation
from attn.traces.diagnosis.calls import (
    BACKWARD,
    Call,
    device_us,
    input_dims,
    launched,
    linked_by,
)
from attn.traces.read import patterns
from attn.traces.read.trace import EPS_US, KERNEL, Trace

GAP = 3.0  # calls of one kind whose device times differ by this factor are two kinds of call


def _shapes(trace: Trace, call: Call) -> str | None:
    """The recorded input shapes of a call's op (a backward: its forward's), as text."""
    op = call.forward.row if call.forward is not None else call.row
    dims = [] if op is None else [d for d in input_dims(trace.args[op]) if d]
    return " ".join(f"[{','.join(map(str, d))}]" for d in dims) or None


def _gaps(calls: list[Call], times: dict[int, float]) -> list[list[Call]]:
    """Calls split where, in order of device time, one takes GAP times the one before."""
    ordered = sorted(calls, key=lambda c: times[id(c)])
    kinds, last = [[ordered[0]]], times[id(ordered[0])]
    for c in ordered[1:]:
        if times[id(c)] > GAP * max(last, EPS_US):
            kinds.append([])
        kinds[-1].append(c)
        last = times[id(c)]
    return [sorted(k, key=lambda c: c.start) for k in kinds]


def kinds_of_call(trace: Trace, calls: list[Call]) -> list[tuple[str | None, list[Call]]]:
    """One group's calls, split into kinds: by recorded input shapes and which kernels ran; where
    shapes were not recorded, also at a clear gap in device time. Each kind with its shapes (None:
    not recorded)."""
    kinds: dict[tuple, list[Call]] = {}
    for c in calls:
        names = tuple(dict.fromkeys(trace.name[d] for d in c.device_rows))
        kinds.setdefault((_shapes(trace, c), names), []).append(c)
    if not trace.has_device_activity:
        return [(shapes, group) for (shapes, _), group in kinds.items()]
    times = {id(c): device_us(trace, c) for c in calls}
    return [
        (shapes, kind)
        for (shapes, _), group in kinds.items()
        for kind in (_gaps(group, times) if shapes is None else [group])
    ]


def _ratio(trace: Trace, calls: list[Call]) -> dict | None:
    """A backward's time over its forward's: on the device where there is device work, else on
    the CPU; the median and range over the linked calls."""
    pairs = [(c, c.forward) for c in calls if c.forward is not None]
    if not pairs:
        return None
    on_device = trace.has_device_activity
    values = []
    for b, f in pairs:
        num, den = (device_us(trace, b), device_us(trace, f)) if on_device else (b.cpu_us, f.cpu_us)
        if den > 0:
            values.append(num / den)
    if not values:
        return None
    return {
        "of": "device time" if on_device else "CPU time",
        "median": float(np.median(values)),
        "min": min(values),
        "max": max(values),
    }


def trace_device_us(trace: Trace) -> float:
    """All the trace's device work, summed (streams that overlap count each)."""
    return float(trace.dur[trace.is_device].sum())


def _cpu_us_per_call(kind: list[Call]) -> float | None:
    """The host time of a call, shown where a trace has no device time; None where a call is its
    kernels alone (a graph replay, a launch not in the trace): no CPU op says its time, not 0."""
    if any(c.row is None for c in kind):
        return None
    return sum(c.cpu_us for c in kind) / len(kind)


def attention_rows(trace: Trace, calls: list[Call]) -> list[dict]:
    """Calls grouped by implementation, compiled or not, where they run and pass, each group split
    into its kinds of call."""
    groups: dict[tuple, list[Call]] = {}
    for c in calls:
        groups.setdefault((c.implementation, c.compiled, c.where, c.pass_), []).append(c)
    on_device = trace.has_device_activity
    total = trace_device_us(trace)
    rows = []
    for (implementation, compiled, where, pass_), group in groups.items():
        for shapes, kind in kinds_of_call(trace, group):
            device = [d for c in kind for d in c.device_rows]
            kernels = [d for d in device if trace.cat[d] == KERNEL]
            per_call = [device_us(trace, c) for c in kind]
            n = len(kind)
            row = {
                "implementation": implementation,
                "compiled": compiled,
                "where": where,
                "pass": pass_,
                "shapes": shapes,
                "calls": n,
                "kernels_per_call": len(kernels) / n if on_device else None,
                "device_time_us_per_call": sum(per_call) / n if on_device else None,
                "cpu_time_us_per_call": _cpu_us_per_call(kind),
                "device_time_us_range": [min(per_call), max(per_call)] if on_device else None,
                "share_of_device_time": sum(per_call) / total if on_device and total else None,
                "kernels": list(dict.fromkeys(trace.name[d] for d in kernels)),
            } | _work(trace, kind, on_device)
            row |= _preparation(trace, kind, on_device)
            if implementation == "eager":
                row |= _terms(trace, kind, on_device)
            if pass_ == BACKWARD:
                row["linked_to_forward"] = sum(c.forward is not None for c in kind)
                row["linked_by"] = linked_by(kind)
                row["backward_forward_ratio"] = _ratio(trace, kind)
            rows.append(row)
    return rows


def _work(trace: Trace, kind: list[Call], on_device: bool) -> dict:
    """A kind's device work per call: its attention kernels' time, and the rest by kind (the
    largest first), each with its kernels and time per call."""
    if not on_device:
        return {"attention_kernel_time_us_per_call": None, "other_work": None}
    summed: dict[str, list[float]] = {}
    for c in kind:
        for what, (kernels, us) in device_work.breakdown(trace, c).items():
            total = summed.setdefault(what, [0, 0.0])
            total[0] += kernels
            total[1] += us
    n = len(kind)
    attention = summed.pop(device_work.ATTENTION, [0, 0.0])
    other = [
        {"what": what, "kernels_per_call": k / n, "device_time_us_per_call": us / n}
        for what, (k, us) in sorted(summed.items(), key=lambda item: -item[1][1])
    ]
    return {"attention_kernel_time_us_per_call": attention[1] / n, "other_work": other}


def _preparation(trace: Trace, kind: list[Call], on_device: bool) -> dict:
    """A kind's preparation per call (attn.traces.diagnosis.preparation), by kind of work: its
    ops, kernels and device time; nothing where none of its calls has any."""
    summed: dict[str, list[float]] = {}
    for c in kind:
        device = preparation.device_rows(trace, c)
        for what, rows in c.prepared.items():
            total = summed.setdefault(what, [0, 0, 0.0])
            total[0] += len(rows)
            total[1] += sum(trace.cat[d] == KERNEL for d in device[what])
            total[2] += float(trace.dur[device[what]].sum()) if device[what] else 0.0
    n = len(kind)
    found = [
        {
            "what": what,
            "ops_per_call": ops / n,
            "kernels_per_call": kernels / n if on_device else None,
            "device_time_us_per_call": us / n if on_device else None,
        }
        for what, (ops, kernels, us) in summed.items()
    ]
    return {"preparation": found} if found else {}


def _terms(trace: Trace, kind: list[Call], on_device: bool) -> dict:
    """Eager: how Q.K^T was told, and the extra terms on the score matrix per call (each op
    with its device time), None where shapes were not recorded."""
    by = {c.qk_by for c in kind}
    found: dict[str, list[float]] = {}
    for c in kind:
        for r in c.terms:
            total = found.setdefault(trace.name[r], [0, 0.0])
            total[0] += 1
            total[1] += sum(
                float(trace.dur[d]) for d in launched(trace, r, trace.ts[r], trace.end[r])
            )
    n = len(kind)
    terms = [  # on a GPU, the terms that launched work (a cast to the same dtype launches none)
        {"op": op, "per_call": count / n, "device_time_us_per_call": us / n if on_device else None}
        for op, (count, us) in found.items()
        if us > 0 or not on_device
    ]
    return {
        "qk_found_by": " and ".join(sorted(b for b in by if b)),
        "extra_terms": None if by == {eager_scores.BY_POSITION} else terms,
    }


def layout_kernels(trace: Trace) -> dict:
    """Inductor's pointwise and reduction kernels named after attention ops: layout work around
    the attention (inputs laid out, outputs gathered), not attention."""
    rows = [
        d
        for d in np.flatnonzero(trace.is_device).tolist()
        if re.search(patterns.LAYOUT_KERNEL, trace.name[d])
        and re.search(patterns.ATTENTION_WORDS, trace.name[d])
    ]
    return {"kernels": len(rows), "device_time_us": float(trace.dur[rows].sum()) if rows else 0.0}
