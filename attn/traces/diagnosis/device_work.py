"""What a call's device work is, and which kernels no call explains.

A call's device work is everything launched inside its op (SDPA's front op, a custom op), its
eager window (Q.K^T to P.V) or, for kernels alone, the kernels themselves. Its attention kernels
are those the name table knows (attn.traces.read.patterns), and in eager attention and SDPA's math
backend the products and the softmax; the rest is told by what launched it (patterns.OTHER_WORK):
padding, KV-cache writes, mask work, fills, copies, and in eager attention the extra terms on the
score matrix. The kernels no call holds (nor its preparation: attn.traces.diagnosis.preparation),
summed by name, are what diagnose did not explain.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from attn.traces.common.units import time_text
from attn.traces.diagnosis.calls import Call, device_us, inside, launched
from attn.traces.read import patterns
from attn.traces.read.trace import EPS_US, KERNEL, Trace

ATTENTION, OTHER = "attention", "other"
UNATTRIBUTED_SHARE = 0.01  # kernels under this share of the device time are not listed


@functools.cache
def other_kind(name: str) -> str | None:
    """The kind of other work an op or kernel name says (padding, copies, ...), or None."""
    return next((kind for kind, pattern in patterns.OTHER_WORK if re.search(pattern, name)), None)


@functools.cache
def kernel_dtype(name: str) -> str | None:
    """The dtype a kernel's name says first (bf16, f32, half, e4m3, sgemm...), or None."""
    found = [(m.start(), dtype) for dtype, p in patterns.KERNEL_DTYPES
             if (m := re.search(p, name, re.IGNORECASE))]  # fmt: skip
    return min(found)[1] if found else None


@functools.cache
def _core(name: str) -> bool:
    """A product or a softmax: attention's own work in eager code and SDPA's math backend."""
    return name in patterns.MATMUL_OPS or bool(re.search(patterns.SOFTMAX, name))


def _chain(trace: Trace, call: Call, device_row: int) -> list[int]:
    """The CPU ops inside the call around the launch of this device work, outermost first (the
    call's own op left out, unless it is eager's Q.K^T)."""
    launcher = trace.launcher(device_row)
    if launcher is None:
        return []
    found = [
        a
        for a in trace.ancestors(launcher)
        if trace.cat[a] == "cpu_op"
        and trace.ts[a] >= call.start - EPS_US
        and trace.end[a] <= call.end + EPS_US
        and (a != call.row or call.implementation == "eager")
    ]
    return found[::-1]


def kind_of(trace: Trace, call: Call, device_row: int, named: bool) -> str:
    """What one device event of a call is: ATTENTION, or a kind of other work. `named`: the call
    holds a kernel the table knows as attention."""
    name = trace.name[device_row]
    row = patterns.row_for(name) if trace.cat[device_row] == KERNEL else None
    if row is not None and row.implementation:
        return ATTENTION
    chain = _chain(trace, call, device_row)
    if chain and chain[0] in call.terms:
        return patterns.SCORE_TERMS
    kind = next((k for op in chain if (k := other_kind(trace.name[op]))), None)
    if kind is not None:
        return kind
    fastpath = call.implementation == "mha_fastpath"
    if fastpath and any(re.search(patterns.MHA_PROJECTIONS, trace.name[op]) for op in chain):
        return patterns.PROJECTIONS
    by_products = fastpath or call.implementation in ("eager", patterns.sdpa("math"))
    if by_products and any(_core(trace.name[op]) for op in chain):
        return ATTENTION
    if not by_products and not named and trace.cat[device_row] == KERNEL:
        return ATTENTION  # a custom op whose kernels the table does not know: they are its work
    return other_kind(name) or OTHER


def _named(trace: Trace, call: Call) -> bool:
    """The call holds a kernel the name table knows as attention."""
    return any(
        (r := patterns.row_for(trace.name[d])) is not None and r.implementation
        for d in call.device_rows
        if trace.cat[d] == KERNEL
    )


def attention_kernels(trace: Trace, call: Call) -> list[int]:
    """The call's attention kernels (its other work left out)."""
    named = _named(trace, call)
    return [d for d in call.device_rows if kind_of(trace, call, d, named) == ATTENTION]


def breakdown(trace: Trace, call: Call) -> dict[str, tuple[int, float]]:
    """The call's device work by kind: (kernels, device time) of each."""
    named = _named(trace, call)
    found: dict[str, tuple[int, float]] = {}
    for d in call.device_rows:
        kind = kind_of(trace, call, d, named)
        kernels, us = found.get(kind, (0, 0.0))
        found[kind] = (kernels + (trace.cat[d] == KERNEL), us + float(trace.dur[d]))
    return found


def _launched_all(trace: Trace, rows: list[int]) -> list[int]:
    """The device work the ops launched (a call's preparation: charged to it, not unexplained)."""
    return [d for r in rows for d in launched(trace, r, trace.ts[r], trace.end[r])]


def launched_by(trace: Trace, device_row: int) -> str | None:
    """Who launched a kernel, in words: the innermost CPU op, a graph replay, or None (no launch
    in the trace)."""
    launcher = trace.launcher(device_row)
    if launcher is None:
        return None
    if patterns.GRAPH_LAUNCH in trace.name[launcher]:
        return f"a graph replay ({trace.name[launcher]})"
    op = next((a for a in trace.ancestors(launcher) if trace.cat[a] == "cpu_op"), None)
    return trace.name[launcher] if op is None else trace.name[op]


def unattributed(trace: Trace, calls: list[Call], least: float = UNATTRIBUTED_SHARE) -> list[dict]:
    """Kernels no call holds, summed by name, each over `least` of the trace's device time, the
    largest first: what diagnose did not explain."""
    total = float(trace.dur[trace.is_device].sum())
    claimed = np.zeros(len(trace.name), dtype=bool)
    claimed[[d for c in calls for d in c.device_rows]] = True
    claimed[[d for c in calls for r in c.prepared.values() for d in _launched_all(trace, r)]] = True
    rows = np.flatnonzero(trace.in_categories(KERNEL) & ~claimed)
    if not len(rows) or total <= 0:
        return []
    codes: dict[str, int] = {}
    code = np.fromiter((codes.setdefault(trace.name[r], len(codes)) for r in rows.tolist()),
                       dtype=np.int64, count=len(rows))  # fmt: skip
    time = np.bincount(code, weights=trace.dur[rows])
    count = np.bincount(code)
    names = list(codes)
    found = []
    for k in sorted(np.flatnonzero(time > least * total).tolist(), key=lambda k: -time[k]):
        mine = rows[code == k].tolist()
        launched = next((r for r in mine if trace.launcher(r) is not None), mine[0])
        found.append(
            {
                "name": names[k],
                "calls": int(count[k]),
                "device_time_us": float(time[k]),
                "share": float(time[k] / total),
                "launched_by": launched_by(trace, launched),
            }
        )
    return found


def under(trace: Trace, row: int) -> float:
    """The device time of the work launched inside an op."""
    return float(trace.dur[launched(trace, row, trace.ts[row], trace.end[row])].sum())


def blocks_cpu(trace: Trace, runtime: int) -> bool:
    """A runtime call the CPU waits in: a synchronize, a synchronous copy, an asynchronous one to
    the host or from pageable memory."""
    name = trace.name[runtime]
    if re.search(patterns.SYNCHRONIZE, name):
        return True
    if not re.search(patterns.HOST_COPY, name):
        return False
    copies = trace.launched_by(np.array([runtime], dtype=np.int64)).tolist()
    return "Async" not in name or any(
        re.search(patterns.BLOCKING_MEMCPY, trace.name[d]) for d in copies
    )


def copies_detail(trace: Trace, found: set[int], calls: list[Call]) -> str | None:
    """What the copies cost on the device beside the attention they feed, per call."""
    if not found or not trace.has_device_activity:
        return None
    runtime: set[int] = set()
    for r in found:
        inner = inside(trace, r, trace.ts[r], trace.end[r])
        copies = [x for x in inner.tolist() if trace.name[x] == patterns.COPY] or [r]
        for x in copies:
            rows = inside(trace, x, trace.ts[x], trace.end[x])
            runtime |= set(rows[trace.is_runtime[rows]].tolist())
    device = trace.launched_by(np.array(sorted(runtime), dtype=np.int64))
    copies_us = float(trace.dur[device].sum()) / len(calls)
    attention_us = sum(device_us(trace, c) for c in calls) / len(calls)
    return (
        f"the copies take {time_text(copies_us)} per call on the device, the attention "
        f"{time_text(attention_us)}"
    )
