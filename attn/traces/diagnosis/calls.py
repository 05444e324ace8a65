"""Find the attention calls in any trace: ops, eager patterns, their backwards, and kernels alone.

Attention is found by what the trace shows, the name table (attn.traces.read.patterns) as a hint:
CPU ops the table knows or whose names say attention (SDPA's backend ops, the call being SDPA's
front op around them; serving, vendor and custom ops, generated FlexAttention); the eager pattern,
a product that writes the scores, a softmax and a product that reads them, inside one module or
range (attn.traces.diagnosis.eager_scores: by recorded shapes, else the products next to the
softmax); and kernels the table knows that no such op launched, each tied through its correlation id to the CPU op that
launched it, on any thread. A call's device work is all its op or window launched
(attn.traces.diagnosis.device_work says what it is; attn.traces.diagnosis.call_table groups the
calls into the rows of the report's attention table).
A forward's backward is the autograd nodes carrying its ops' sequence numbers or tied to them by
the profiler's fwdbwd flows; a backward op neither ties (ranges that break the numbers, a trace
without them) is linked to a forward of the same q, k and v shapes, in reverse order.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import itertools
import math
import re

import numpy as np

from attn.traces.diagnosis import eager_scores
from attn.traces.read import patterns
from attn.traces.read.trace import EPS_US, KERNEL, STEP_PREFIX, Trace

FORWARD, BACKWARD = "forward", "backward"
BY_SEQUENCE, BY_FLOW, BY_SHAPES = "sequence numbers", "fwdbwd flows", "shapes and order"


@dataclasses.dataclass
class Call:
    """One attention call: what ran, where, and the device work it launched."""

    implementation: str
    compiled: bool
    where: str
    device_rows: list[int]
    row: int | None = None  # its CPU op (for eager, the first product); None: kernels only
    start: float = 0.0  # its CPU extent
    end: float = 0.0
    scope: int | None = None  # the module or range around it, if that holds no other call
    region_start: float = 0.0  # where findings that come before it (a repeat, a mask) look from
    since: float = 0.0  # the furthest back any of them may look: the call before on its thread
    pass_: str = FORWARD
    forward: Call | None = None  # a backward's forward, where the trace links them
    linked_by: str | None = None  # how: BY_SEQUENCE, BY_FLOW or BY_SHAPES
    cpu_us: float = 0.0  # host time of its ops (a backward's nodes may be apart)
    graph: bool = False  # replayed from a graph: no CPU op launched its kernels one by one
    nodes: list[int] = dataclasses.field(default_factory=list)  # a backward's autograd nodes
    # Eager: the softmax, P.V, how Q.K^T was told (eager_scores.BY_SHAPES or BY_POSITION), and the ops
    # on the score matrix between the products.
    softmax: int | None = None
    pv: int | None = None
    qk_by: str | None = None
    terms: list[int] = dataclasses.field(default_factory=list)
    # Its preparation (attn.traces.diagnosis.preparation): the ops that made its inputs, by kind.
    prepared: dict[str, list[int]] = dataclasses.field(default_factory=dict)

    @property
    def prep_start(self) -> float:
        """Where its preparation is sought: its own range, or where several calls share one, back
        to the call before it on its thread (what is found there must be tied to its inputs)."""
        return self.since if self.scope is None else self.region_start


def _is_module(name: str) -> bool:
    return name.startswith(patterns.MODULE)


def _scope(trace: Trace, row: int) -> int | None:
    """The module or range a call runs in: the innermost attention module, else the innermost
    range of the user's (not a profiler step, not a compiler's), else the innermost module."""
    found = [(r, trace.name[r]) for r in trace.ancestors(row)]
    attention = [r for r, n in found if _is_module(n) and re.search(patterns.ATTENTION_MODULE, n)]
    ranges = [
        r
        for r, n in found
        if trace.cat[r] == "user_annotation"
        and not n.startswith(STEP_PREFIX)
        and not re.search(patterns.ANY_COMPILED_REGION, n)
    ]
    modules = [r for r, n in found if _is_module(n)]
    return next(iter(attention or ranges or modules), None)


def _where(trace: Trace, scope: int | None) -> str:
    if scope is None:
        return "top level"
    name = trace.name[scope]
    return re.sub(patterns.MODULE_NUMBER, "", name) if _is_module(name) else name


def _compiled(trace: Trace, row: int) -> bool:
    names = [trace.name[row], *(trace.name[r] for r in trace.ancestors(row))]
    return bool(re.search(patterns.GENERATED, names[0])) or any(
        re.search(patterns.ANY_COMPILED_REGION, n) for n in names
    )


def inside(trace: Trace, row: int, start: float, end: float) -> np.ndarray:
    """Host rows on `row`'s thread that start and end within [start, end]."""
    return trace.thread_within(row, start, end)


def launched(trace: Trace, row: int, start: float, end: float) -> list[int]:
    """Device rows launched by the runtime calls on `row`'s thread within [start, end]."""
    rows = inside(trace, row, start, end)
    return trace.launched_by(rows[trace.is_runtime[rows]]).tolist()


def _found_call(trace: Trace, implementation: str, row: int, start: float, end: float) -> Call:
    scope = _scope(trace, row)
    device = launched(trace, row, start, end)
    if implementation == "custom":  # someone's op: its kernels may say more (paged, flash-attn)
        known = [patterns.row_for(trace.name[d]) for d in device if trace.cat[d] == KERNEL]
        implementation = next((k.implementation for k in known if k and k.implementation), "custom")
    call = Call(
        implementation, _compiled(trace, row), _where(trace, scope), device, row, start, end, scope
    )
    call.cpu_us = end - start
    return call


@functools.cache
def _kind(name: str) -> str | None:
    """What an op is to the eager pattern: a product, a softmax, or neither."""
    if name in patterns.MATMUL_OPS:
        return "product"
    return "softmax" if re.search(patterns.SOFTMAX, name) else None


@functools.cache
def _op_row(name: str) -> patterns.Row | None:
    """A CPU op's row: the table's, else one for an op or autograd Function named as attention
    (a vendor library's `namespace::op`, a Function's class name); modules and nodes are not."""
    row = patterns.row_for(name)
    if row is not None or name.startswith(patterns.NOT_NAMED_OPS):
        return row
    if re.search(patterns.ATTENTION_WORDS, name) and not re.search(patterns.BACKWARD_WORDS, name):
        return patterns.Row(re.escape(name), "custom", "an op named as attention")
    return None


def _op_calls(trace: Trace) -> list[Call]:
    """Calls of ops the table knows or that are named as attention, outermost only (SDPA's backend
    op once, not its children)."""
    known = {
        i: row
        for i in np.flatnonzero(trace.in_categories("cpu_op")).tolist()
        if (row := _op_row(trace.name[i])) and row.implementation
    }
    calls = []
    for i, row in sorted(known.items()):
        if any(a in known for a in trace.ancestors(i)):
            continue
        i = _front(trace, i)
        call = _found_call(trace, row.implementation, i, trace.ts[i], trace.end[i])
        call.pass_ = BACKWARD if row.backward else FORWARD
        calls.append(call)
    return calls


def _front(trace: Trace, row: int) -> int:
    """SDPA's front op around its backend op, where there is one: the call is all it launched (a
    mask converted and padded there, then the backend's kernel)."""
    parent = _launching_op(trace, row)
    return parent if parent is not None and trace.name[parent] == patterns.SDPA_FRONT else row


def _eager_calls(trace: Trace, taken: list[Call]) -> list[Call]:
    """A product, a softmax, a product, told apart by data flow (attn.traces.diagnosis.eager_scores) among a
    thread's outermost products and softmaxes (those of calls already found left out), all three
    in one scope."""
    ops = np.flatnonzero(trace.in_categories("cpu_op")).tolist()
    kinds = {i: k for i in ops if (k := _kind(trace.name[i]))}
    busy = set(kinds) | {c.row for c in taken}
    outer = [i for i in sorted(kinds) if not any(a in busy for a in trace.ancestors(i))]
    by_thread: dict[int, list[int]] = {}  # one pass: ten thousand threads made this quadratic
    for i in outer:
        by_thread.setdefault(int(trace.thread[i]), []).append(i)
    return [c for seq in by_thread.values() for c in _eager_in(trace, seq, kinds)]


def _eager_in(trace: Trace, seq: list[int], kinds: dict[int, str]) -> list[Call]:
    """The eager calls among one thread's outermost products and softmaxes, in order: each
    softmax's Q.K^T sought among the products since the last call (or softmax), its P.V among
    those before the next softmax."""
    calls, since = [], 0
    softmaxes = [i for i, r in enumerate(seq) if kinds[r] == "softmax"]
    where = {r: i for i, r in enumerate(seq)}
    for n, i in enumerate(softmaxes):
        upto = softmaxes[n + 1] if n + 1 < len(softmaxes) else len(seq)
        softmax, scope = seq[i], _scope(trace, seq[i])
        before = [r for r in seq[since:i] if kinds[r] == "product"]
        after = [r for r in seq[i + 1 : upto] if kinds[r] == "product"]
        since = i + 1
        shape = eager_scores.softmax_input(trace, softmax)
        qk, by = eager_scores.pick_qk(
            trace, [r for r in before if _scope(trace, r) == scope], shape
        )
        pv = eager_scores.pick_pv(trace, [r for r in after if _scope(trace, r) == scope], shape, by)
        if by == eager_scores.BY_POSITION:  # as before shapes: the products next to the softmax
            ok = 0 < i < len(seq) - 1 and (qk, pv) == (seq[i - 1], seq[i + 1])
        else:
            ok = qk is not None and pv is not None
        if not ok or _in_backward(trace, qk):
            continue
        call = _found_call(trace, "eager", qk, trace.ts[qk], trace.end[pv])
        call.compiled = _compiled(trace, softmax)
        call.softmax, call.pv, call.qk_by = softmax, pv, by
        between = outermost(trace, qk, trace.end[qk], trace.ts[pv])
        call.terms = eager_scores.extra_terms(trace, [r for r in between if r != softmax], shape)
        since = where[pv] + 1
        calls.append(call)
    return calls


def _in_backward(trace: Trace, row: int) -> bool:
    """Under an autograd node: a backward that recomputes attention eagerly is that backward's
    work, not a forward."""
    return any(trace.name[a].startswith(patterns.AUTOGRAD_NODE) for a in trace.ancestors(row))


def outermost(trace: Trace, row: int, start: float, end: float) -> list[int]:
    """The CPU ops on `row`'s thread within [start, end] that no other of them holds."""
    rows = [r for r in inside(trace, row, start, end).tolist() if trace.cat[r] == "cpu_op"]
    held = set(rows)
    return [r for r in rows if not any(a in held for a in trace.ancestors(r))]


def _sequence(args: dict) -> int | None:
    seq = args.get("Sequence number")
    return seq if isinstance(seq, int) and seq >= 0 else None


def _flows(trace: Trace) -> list[tuple[int, int]]:
    """(forward op, backward node) of each fwdbwd flow the trace records: a start at the op, an
    end at the node, paired by id in time order (ids are reused from step to step)."""
    flows = [
        e
        for e in trace.raw.get("traceEvents", [])
        if type(e) is dict and e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f")
    ]
    started: dict[object, collections.deque] = {}
    pairs = []
    for e in sorted(flows, key=lambda e: (_number(e.get("ts")), e["ph"] == "f")):
        row = trace.row_at(str(e.get("pid", 0)), str(e.get("tid", 0)), _number(e.get("ts")))
        key = str(e.get("id"))  # any spelling of an id, hashable
        if e["ph"] == "s":
            started.setdefault(key, collections.deque()).append(row)
        elif started.get(key):
            op = started[key].popleft()
            if op is not None and row is not None:
                pairs.append((op, row))
    return pairs


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _node(trace: Trace, row: int) -> int:
    """The engine's evaluate_function event around an autograd node (the node if there is none)."""
    wrapper = int(trace.parent[row])
    return (
        wrapper if wrapper >= 0 and trace.name[wrapper].startswith(patterns.AUTOGRAD_NODE) else row
    )


def _backward_calls(trace: Trace, forwards: list[Call]) -> list[Call]:
    """Each forward's backward: the autograd nodes that carry the sequence numbers of the forward's
    ops (a node records its forward op's number) or that a fwdbwd flow ties to one of them, and the
    device work launched under them."""
    owner: dict[int, Call | None] = {}  # sequence number -> its forward; None: two claim it
    op_owner: dict[int, Call] = {}  # an op inside a forward -> that forward
    for c in forwards:
        if c.row is None or c.pass_ != FORWARD:
            continue
        for r in inside(trace, c.row, c.start, c.end).tolist():
            op_owner[r] = c
            if (seq := _sequence(trace.args[r])) is not None:
                owner[seq] = c if owner.get(seq, c) is c else None
    nodes: dict[int, dict[int, None]] = {}  # id(forward) -> its autograd nodes, in order
    how: dict[int, str] = {}  # id(forward) -> how its nodes were tied to it
    by_id = {id(c): c for c in forwards}
    for r in np.flatnonzero(trace.in_categories("cpu_op")).tolist():
        name = trace.name[r]
        if not name.startswith(patterns.AUTOGRAD_NODE):
            continue
        seq = _sequence(trace.args[r])
        if seq is not None and (c := owner.get(seq)) is not None:
            nodes.setdefault(id(c), {})[r] = None
            how[id(c)] = BY_SEQUENCE
    for op, node in _flows(trace):
        if (c := op_owner.get(op)) is not None:
            nodes.setdefault(id(c), {})[_node(trace, node)] = None
            how.setdefault(id(c), BY_FLOW)
    calls = []
    for key, found in nodes.items():
        forward, rows = by_id[key], sorted(found, key=lambda r: trace.ts[r])
        device = sorted(d for r in rows for d in launched(trace, r, trace.ts[r], trace.end[r]))
        call = Call(forward.implementation, forward.compiled, forward.where, device, rows[0])
        call.start, call.end = float(trace.ts[rows[0]]), float(max(trace.end[rows]))
        call.pass_, call.forward, call.scope = BACKWARD, forward, None
        call.linked_by = how[key]
        call.cpu_us = float(trace.dur[rows].sum())
        call.region_start, call.nodes = call.start, rows
        calls.append(call)
    return calls


def _launching_op(trace: Trace, launcher: int) -> int | None:
    """The innermost CPU op around a runtime call, on whichever thread it ran."""
    return next((a for a in trace.ancestors(launcher) if trace.cat[a] == "cpu_op"), None)


def _kernel_calls(trace: Trace, claimed: set[int]) -> list[Call]:
    """Kernels the table knows (or whose names say attention) that no call found launched: one
    call per CPU op that launched them (found through the correlation id), else per kernel."""
    calls: list[Call] = []
    last: dict[tuple, Call] = {}  # (implementation, pass, stream) -> the call a helper finishes
    by_op: dict[int, Call] = {}
    for d in np.flatnonzero(trace.is_device).tolist():
        name = trace.name[d]
        if d in claimed or trace.cat[d] != KERNEL:
            continue
        row = patterns.row_for(name)
        implementation = row.implementation if row else "unknown"
        if implementation is None or (row is None and not patterns.says_attention(name)):
            continue
        backward = row is not None and row.backward
        key = (implementation, backward, trace.thread[d])
        launcher = trace.launcher(d)
        op = None if launcher is None else _launching_op(trace, launcher)
        graph = launcher is not None and patterns.GRAPH_LAUNCH in trace.name[launcher]
        if op is not None and not graph:
            if op not in by_op:
                by_op[op] = _found_call(trace, implementation, op, trace.ts[op], trace.end[op])
                by_op[op].where = trace.name[op]
                by_op[op].pass_ = BACKWARD if backward else FORWARD
                calls.append(by_op[op])
            continue
        if row is not None and row.helper and key in last:
            last[key].device_rows.append(d)
            continue
        if launcher is None:
            where = "kernels whose launch is not in the trace"
        elif graph:
            where = f"a graph replay ({trace.name[launcher]})"
        else:
            where = _where(trace, _scope(trace, launcher))
        call = Call(implementation, bool(re.search(patterns.GENERATED, name)), where, [d])
        call.pass_, call.graph = (BACKWARD if backward else FORWARD), graph
        calls.append(call)
        last[key] = call
    return calls


def find_calls(trace: Trace) -> list[Call]:
    """Every attention call in the trace: ops, eager patterns, their backwards, then kernels no
    call launched."""
    calls = _op_calls(trace)
    calls += _eager_calls(trace, calls)
    calls.sort(key=lambda c: c.start)
    backward = _backward_calls(trace, calls)
    spans = sorted((trace.ts[r], trace.end[r]) for b in backward for r in b.nodes)
    calls = [c for c in calls if c.pass_ == FORWARD or not _within(spans, c.start, c.end)]
    calls += backward
    claimed = {d for c in calls for d in c.device_rows}
    calls += _kernel_calls(trace, claimed)
    _link_by_shapes(trace, calls)
    _set_regions(trace, calls)
    return calls


def _qkv(trace: Trace, call: Call) -> list[list[int]] | None:
    """A forward's q, k and v shapes: its op's first three inputs, where all were recorded."""
    dims = input_dims(trace.args[call.row])[:3] if call.row is not None else []
    return dims if len(dims) == 3 and all(dims) else None


def _takes(trace: Trace, backward: Call, qkv: list[list[int]]) -> bool:
    """A backward op takes q, k and v of these shapes, one after another (after the output's
    gradient, as SDPA's, FlashAttention's and custom backwards take them)."""
    dims = input_dims(trace.args[backward.row]) if backward.row is not None else []
    return any(dims[i : i + 3] == qkv for i in range(len(dims) - 2))


def _link_by_shapes(trace: Trace, calls: list[Call]) -> None:
    """Backward ops that no sequence number or flow tied to a forward, each linked to a forward of
    the same q, k and v shapes by order. Autograd runs a forward's backwards last call first, and
    a pipeline stage runs its micro-batches' backwards in the order of their forwards: a
    micro-batch's calls are as many as divide every run of forwards and of backwards (two
    micro-batches' forwards may run back to back), and each micro-batch of backwards takes the
    oldest forwards not yet taken, the last of them first. A pair whose shapes differ is not
    linked: no link is better than a false one."""
    taken = {id(c.forward) for c in calls if c.forward is not None}
    backwards = [
        c for c in calls if c.pass_ == BACKWARD and c.forward is None and c.row is not None
    ]
    forwards = [  # a forward recomputed inside a backward (checkpointing) is no forward of its own
        c
        for c in calls
        if c.pass_ == FORWARD
        and id(c) not in taken
        and _qkv(trace, c)
        and not _in_backward(trace, c.row)
    ]
    ordered = sorted(backwards + forwards, key=lambda c: c.start)
    runs = [list(run) for _, run in itertools.groupby(ordered, key=lambda c: c.pass_)]
    size = math.gcd(*map(len, runs))  # the calls of one micro-batch
    pending: collections.deque[Call] = collections.deque()  # not yet taken, oldest first
    for run in runs:
        if run[0].pass_ == FORWARD:
            pending.extend(run)
            continue
        for at in range(0, len(run), size):
            oldest = [pending.popleft() for _ in range(min(size, len(pending)))]
            for b, f in zip(run[at : at + size], reversed(oldest), strict=False):
                if _takes(trace, b, _qkv(trace, f)):
                    b.forward, b.linked_by = f, BY_SHAPES


def _set_regions(trace: Trace, calls: list[Call]) -> None:
    """Where each call's findings look back from: its module or range where that holds no other
    call, else its own start; never past the call before it on its thread, nor before the
    outermost range around it (its step, or the model's forward): work outside those is no
    call's, however its shapes fit."""
    placed = sorted((c for c in calls if c.row is not None), key=lambda c: c.start)
    shared = collections.Counter(c.scope for c in placed if not c.nodes)
    last: dict[int, float] = {}
    for c in placed:
        thread = int(trace.thread[c.row])
        outer = [a for a in trace.ancestors(c.row)]
        floor = max(last.get(thread, -np.inf), float(trace.ts[outer[-1]]) if outer else c.start)
        last[thread] = max(last.get(thread, -np.inf), c.end)
        c.since = min(floor, c.start)
        if c.nodes:  # a backward's nodes are its own: nothing before them is looked at
            c.region_start = c.start
            continue
        c.scope = c.scope if shared[c.scope] == 1 else None  # a range around many is no one's
        own = c.start if c.scope is None else float(trace.ts[c.scope])
        c.region_start = min(max(own, c.since), c.start)


def _within(spans: list[tuple[float, float]], start: float, end: float) -> bool:
    """[start, end] lies inside one of the sorted spans (a backward op a node already holds)."""
    i = bisect.bisect_right(spans, (start + EPS_US, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= start + EPS_US and end <= spans[i][1] + EPS_US


def input_dims(args: dict) -> list[list[int]]:
    """The recorded input shapes, each a list of whole numbers ([] for an input that is not a
    tensor, or a shape the trace spells otherwise): odd args are read as no shape, not a crash."""
    found = args.get("Input Dims")
    if not isinstance(found, list):
        return []
    ok = lambda d: isinstance(d, list) and all(type(x) is int for x in d)  # noqa: E731
    return [d if ok(d) else [] for d in found]


def linked_by(calls: list[Call]) -> str | None:
    """How backwards were tied to their forwards (sequence numbers, flows, shapes and order)."""
    return " and ".join(sorted({c.linked_by for c in calls if c.linked_by})) or None


def device_us(trace: Trace, call: Call) -> float:
    """The call's device work, summed."""
    return float(trace.dur[call.device_rows].sum()) if call.device_rows else 0.0
