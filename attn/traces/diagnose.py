"""Find the attention in any trace, name its implementation, and point to the chapter that helps.

    python -m attn.profiling diagnose TRACE [--json OUT]

Attention is found by what the trace shows, the name table (attn.traces.patterns) as a hint:
CPU ops the table knows or whose names say attention (SDPA's backend ops, serving, vendor and
custom ops, generated FlexAttention); the eager pattern, a product, a softmax and a product with
nothing of the kind between, inside one module or range; and kernels the table knows that no such
op launched, each tied through its correlation id to the CPU op that launched it, on any thread.
A forward's backward is the autograd nodes carrying its ops' sequence numbers or tied to them by
the profiler's fwdbwd flows. Calls are told apart by their input shapes and the kernels they ran,
and where shapes were not recorded, at a clear gap in device time.
Findings are counted over the calls found; where the trace lacks what one needs (CPU ops, shapes),
the report says so instead of guessing, and it says where the trace itself misleads.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import itertools
import re
from collections.abc import Callable

import numpy as np
from rich.console import Console
from rich.markup import escape as _markup
from rich.table import Table

from attn.traces import patterns, trace_lint
from attn.traces.markdown import visible
from attn.traces.trace import KERNEL, MEMCPY, STEP_PREFIX, Trace, device_name_of
from attn.traces.units import count_text, time_text

ADVICE = {  # finding -> one sentence: what to change, and why
    "out_of_place_masked_fill": "Mask in place with masked_fill_ (safe where no backward needs the "
    "scores): the out-of-place masked_fill clones the whole score matrix before filling it.",
    "eager_attention": "Call F.scaled_dot_product_attention instead of matmul, softmax, matmul: "
    "one fused kernel that never writes the [seq_q, seq_k] scores to memory.",
    "repeat_kv": "Pass K and V with their own head count and enable_gqa=True to "
    "F.scaled_dot_product_attention: repeating or broadcasting them copies K and V for every head.",
    "qkv_copies": "Pass q, k and v to F.scaled_dot_product_attention as the views they are (a "
    "transpose of [batch, seq, heads, head_dim] is taken as it is): a .contiguous() copies each.",
    "mask_per_call": "Build the mask once (a buffer) or pass is_causal=True: building it in every "
    "call launches its kernels and allocates a [seq_q, seq_k] tensor each time.",
    "math_fallback": "Make the inputs fit a fused backend (float16 or bfloat16, head_dim a multiple "
    "of 8 up to 256): SDPA's math backend is the many-kernel reference path.",
    "math_backward": "Make the forward run a fused SDPA backend (float16 or bfloat16, no pinned "
    "math backend): its backward is then fused too, not the many-kernel math gradients.",
    "fp32_attention_on_gpu": "Run attention in bfloat16 or float16 (torch.autocast): in float32 "
    "the flash and cuDNN kernels cannot run and the products miss the tensor cores.",
    "sync_in_forward": "Move the synchronize (an .item(), .cpu() or print of a GPU tensor) out of "
    "the attention: the CPU waits there for the GPU, so no launch can run ahead of it.",
}
PAGES = {  # taught by a page, not a variant's chapter
    "sync_in_forward": "reading-a-profile.md",
    "qkv_copies": "sdpa.md",
    "mask_per_call": "sdpa.md",
    "math_backward": "training.md",
}
Teaching = Callable[[str], "str | None"]  # a finding -> the chapter whose variant teaches its fix
NO_CPU_OPS = "the trace has no CPU ops (recorded with the GPU activity only)"
NO_CPU_CALL = "no CPU op was recorded around the attention's kernels"
GRAPH_REPLAY = "the attention's kernels are a graph replay (no CPU op launched them one by one)"
NO_SHAPES = "dtypes and shapes were not recorded (the trace was taken without record_shapes)"
FORWARD, BACKWARD = "forward", "backward"
GAP = 3.0  # calls of one kind whose device times differ by this factor are two kinds of call
_EPS = 1e-3  # µs: timestamps are floats


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
    pass_: str = FORWARD
    forward: Call | None = None  # a backward's forward, where the trace links them
    cpu_us: float = 0.0  # host time of its ops (a backward's nodes may be apart)
    graph: bool = False  # replayed from a graph: no CPU op launched its kernels one by one
    nodes: list[int] = dataclasses.field(default_factory=list)  # a backward's autograd nodes


def _is_module(name: str) -> bool:
    return name.startswith("nn.Module: ")


def _scope(trace: Trace, row: int) -> int | None:
    """The module or range a call runs in: the innermost attention module, else the innermost
    range of the user's (not a profiler step, not a compiler's), else the innermost module."""
    found = [(r, trace.name[r]) for r in trace.ancestors(row)]
    attention = [r for r, n in found if _is_module(n) and re.search(r"(?i)atten|attn", n)]
    ranges = [
        r
        for r, n in found
        if trace.cat[r] == "user_annotation"
        and not n.startswith(STEP_PREFIX)
        and not re.search(patterns.COMPILED_REGION, n)
    ]
    modules = [r for r, n in found if _is_module(n)]
    return next(iter(attention or ranges or modules), None)


def _where(trace: Trace, scope: int | None) -> str:
    if scope is None:
        return "top level"
    name = trace.name[scope]
    return re.sub(r"_\d+$", "", name) if _is_module(name) else name


def _compiled(trace: Trace, row: int) -> bool:
    names = [trace.name[row], *(trace.name[r] for r in trace.ancestors(row))]
    return bool(re.search(patterns.GENERATED, names[0])) or any(
        re.search(patterns.COMPILED_REGION, n) for n in names
    )


def _inside(trace: Trace, row: int, start: float, end: float) -> np.ndarray:
    """Host rows on `row`'s thread that start and end within [start, end]."""
    rows = trace.thread_rows(row)
    lo, hi = np.searchsorted(trace.ts[rows], [start - _EPS, end + _EPS])
    rows = rows[lo:hi]
    return rows[trace.end[rows] <= end + _EPS]


def _launched(trace: Trace, row: int, start: float, end: float) -> list[int]:
    rows = _inside(trace, row, start, end)
    return trace.launched_by(rows[trace.is_runtime[rows]]).tolist()


def _found_call(trace: Trace, implementation: str, row: int, start: float, end: float) -> Call:
    scope = _scope(trace, row)
    device = _launched(trace, row, start, end)
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
    if row is not None or name.startswith(("aten::", "nn.Module", patterns.AUTOGRAD_NODE)):
        return row
    if re.search(patterns.ATTENTION_WORDS, name) and not re.search(r"(?i)backward|_bwd", name):
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
        call = _found_call(trace, row.implementation, i, trace.ts[i], trace.end[i])
        call.pass_ = BACKWARD if row.backward else FORWARD
        calls.append(call)
    return calls


def _eager_calls(trace: Trace, taken: list[Call]) -> list[Call]:
    """A product, a softmax, a product: adjacent among a thread's outermost products and softmaxes
    (those of calls already found left out), all three in one scope."""
    ops = np.flatnonzero(trace.in_categories("cpu_op")).tolist()
    kinds = {i: k for i in ops if (k := _kind(trace.name[i]))}
    busy = set(kinds) | {c.row for c in taken}
    outer = [i for i in sorted(kinds) if not any(a in busy for a in trace.ancestors(i))]
    by_thread: dict[int, list[int]] = {}  # one pass: ten thousand threads made this quadratic
    for i in outer:
        by_thread.setdefault(int(trace.thread[i]), []).append(i)
    calls = []
    for seq in by_thread.values():
        for qk, softmax, pv in zip(seq, seq[1:], seq[2:], strict=False):
            shape = (kinds[qk], kinds[softmax], kinds[pv])
            scopes = {_scope(trace, r) for r in (qk, softmax, pv)}
            in_backward = any(
                trace.name[a].startswith(patterns.AUTOGRAD_NODE) for a in trace.ancestors(qk)
            )  # a backward that recomputes attention eagerly: that backward's work, not a forward
            if shape == ("product", "softmax", "product") and len(scopes) == 1 and not in_backward:
                call = _found_call(trace, "eager", qk, trace.ts[qk], trace.end[pv])
                call.compiled = _compiled(trace, softmax)
                calls.append(call)
    return calls


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
        for r in _inside(trace, c.row, c.start, c.end).tolist():
            op_owner[r] = c
            if (seq := _sequence(trace.args[r])) is not None:
                owner[seq] = c if owner.get(seq, c) is c else None
    nodes: dict[int, dict[int, None]] = {}  # id(forward) -> its autograd nodes, in order
    by_id = {id(c): c for c in forwards}
    for r in np.flatnonzero(trace.in_categories("cpu_op")).tolist():
        name = trace.name[r]
        if not name.startswith(patterns.AUTOGRAD_NODE):
            continue
        seq = _sequence(trace.args[r])
        if seq is not None and (c := owner.get(seq)) is not None:
            nodes.setdefault(id(c), {})[r] = None
    for op, node in _flows(trace):
        if (c := op_owner.get(op)) is not None:
            nodes.setdefault(id(c), {})[_node(trace, node)] = None
    calls = []
    for key, found in nodes.items():
        forward, rows = by_id[key], sorted(found, key=lambda r: trace.ts[r])
        device = sorted(d for r in rows for d in _launched(trace, r, trace.ts[r], trace.end[r]))
        call = Call(forward.implementation, forward.compiled, forward.where, device, rows[0])
        call.start, call.end = float(trace.ts[rows[0]]), float(max(trace.end[rows]))
        call.pass_, call.forward, call.scope = BACKWARD, forward, None
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
        graph = launcher is not None and "GraphLaunch" in trace.name[launcher]
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
    shared = collections.Counter(c.scope for c in calls)
    for c in calls:  # a range around many calls (a whole step) is no one call's range
        c.scope = c.scope if shared[c.scope] == 1 else None
        c.region_start = c.start if c.scope is None else float(trace.ts[c.scope])
    backward = _backward_calls(trace, calls)
    spans = sorted((trace.ts[r], trace.end[r]) for b in backward for r in b.nodes)
    calls = [c for c in calls if c.pass_ == FORWARD or not _within(spans, c.start, c.end)]
    calls += backward
    claimed = {d for c in calls for d in c.device_rows}
    return calls + _kernel_calls(trace, claimed)


def _within(spans: list[tuple[float, float]], start: float, end: float) -> bool:
    """[start, end] lies inside one of the sorted spans (a backward op a node already holds)."""
    i = bisect.bisect_right(spans, (start + _EPS, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= start + _EPS and end <= spans[i][1] + _EPS


# --- findings: each check takes the calls that have a CPU op and returns (count, detail) ----------


def _copies(trace: Trace, row: int) -> bool:
    """The op copies memory: an aten::clone or aten::copy_ under it, or a Memcpy it launched."""
    under = _inside(trace, row, trace.ts[row], trace.end[row])
    launched = _launched(trace, row, trace.ts[row], trace.end[row])
    return any(trace.name[r] in ("aten::clone", "aten::copy_") for r in under if r != row) or any(
        trace.cat[d] == MEMCPY for d in launched
    )


def _masked_fill(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    found = {
        r
        for c in calls
        for r in _inside(trace, c.row, c.region_start, c.end).tolist()
        if trace.name[r] == "aten::masked_fill" and _copies(trace, r)
    }
    return len(found), None


def _eager(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    return sum(c.implementation == "eager" for c in calls), None


def _dims(args: dict) -> list[list[int]]:
    """The recorded input shapes, each a list of whole numbers ([] for an input that is not a
    tensor, or a shape the trace spells otherwise): odd args are read as no shape, not a crash."""
    found = args.get("Input Dims")
    if not isinstance(found, list):
        return []
    ok = lambda d: isinstance(d, list) and all(type(x) is int for x in d)  # noqa: E731
    return [d if ok(d) else [] for d in found]


def _types(args: dict) -> list[str | None]:
    found = args.get("Input type")
    return [t if isinstance(t, str) else None for t in found] if isinstance(found, list) else []


def _broadcast_heads(dims: list) -> bool:
    """A product of [.., heads, s, d] by [.., 1, s, d] (or the reverse): matmul expands the one
    head to all of them, and its reshape copies it for every head."""
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) < 3:
        return False
    a, b = dims[0][-3], dims[1][-3]
    return a != b and 1 in (a, b)


def _repeat_kv(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """repeat_interleave or repeat, or an expand made contiguous by a copying reshape, before a
    call in its scope; or, in eager attention, a product that broadcasts K or V over the heads
    and copies them to do it."""
    found = set()
    for c in calls:
        window = [r for r in _inside(trace, c.row, c.region_start, c.start).tolist()]
        window = [r for r in window if trace.cat[r] == "cpu_op" and r != c.row]
        inside = set(window)  # once: a range of a million tiny ops made this quadratic
        ops = [r for r in window if trace.parent[r] not in inside]
        for a, b in itertools.pairwise([*ops, None]):
            if trace.name[a] in patterns.REPEAT_OPS:
                found.add(a)
            elif trace.name[a] == "aten::expand" and b is not None and _copies(trace, b):
                found.add(b)
        if c.implementation == "eager":
            found |= {
                r
                for r in _inside(trace, c.row, c.start, c.end).tolist()
                if trace.name[r] == "aten::matmul"
                and _broadcast_heads(_dims(trace.args[r]))
                and _copies(trace, r)
            }
    return len(found), _copy_detail(trace, found, calls)


def _copy_detail(trace: Trace, found: set[int], calls: list[Call]) -> str | None:
    """What the copies cost on the device beside the attention they feed, per call."""
    if not found or not trace.has_device_activity:
        return None
    runtime: set[int] = set()
    for r in found:
        inner = _inside(trace, r, trace.ts[r], trace.end[r])
        copies = [x for x in inner.tolist() if trace.name[x] == "aten::copy_"] or [r]
        for x in copies:
            rows = _inside(trace, x, trace.ts[x], trace.end[x])
            runtime |= set(rows[trace.is_runtime[rows]].tolist())
    device = trace.launched_by(np.array(sorted(runtime), dtype=np.int64))
    copies_us = float(trace.dur[device].sum()) / len(calls)
    attention_us = sum(_device_us(trace, c) for c in calls) / len(calls)
    return (
        f"the copies take {time_text(copies_us)} per call on the device, the attention "
        f"{time_text(attention_us)}"
    )


def _qkv_copies(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """A .contiguous() (or clone) that copies, among the ops just before a fused call in its
    scope: SDPA takes strided q, k and v as they are."""
    found = set()
    for c in calls:
        if c.implementation == "eager":
            continue
        window = _inside(trace, c.row, c.region_start, c.start).tolist()
        found |= {
            r
            for r in window
            if (
                trace.name[r] == "aten::contiguous"
                or (trace.name[r] == "aten::clone" and trace.cat[int(trace.parent[r])] != "cpu_op")
            )  # a clone under a reshape is repeat_kv's (an expand made contiguous)
            and _copies(trace, r)
        }
    return len(found), _copy_detail(trace, found, calls)


def _mask_per_call(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    """Calls whose scope builds a triangular mask (tril or triu) before the call, or inside an
    eager one (not inside an op: SDPA's math backend builds its causal mask itself)."""
    return sum(
        any(
            trace.name[r] in ("aten::tril", "aten::triu")
            for r in _inside(
                trace, c.row, c.region_start, c.end if c.implementation == "eager" else c.start
            ).tolist()
        )
        for c in calls
    ), None


def _inputs(args: dict) -> tuple[list, list] | None:
    """(Input Dims, Input type) as the profiler records them, a list of int lists and a list of
    names; None where absent or malformed (what cannot be read is not guessed at)."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    ints = lambda d: isinstance(d, list) and all(type(x) is int for x in d)  # noqa: E731
    if not (isinstance(dims, list) and all(ints(d) for d in dims)):
        return None
    if not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        return None
    return dims, types


def _refusals(args: dict) -> list[str]:
    """What in SDPA's recorded inputs rules its fused backends out."""
    dims, types = _inputs(args) or ([], [])
    if len(dims) < 3 or len(types) < 3:
        return []
    found = []
    if types[0] in ("float", "double"):
        found.append(f"{types[0]} inputs (flash and cuDNN take float16 or bfloat16)")
    if len(set(types[:3])) > 1:
        found.append(f"q, k and v of different dtypes ({', '.join(map(str, types[:3]))})")
    head_dim = dims[0][-1] if dims[0] else None
    if head_dim and (head_dim > 256 or head_dim % 8):
        found.append(f"head_dim {head_dim} (the fused kernels take multiples of 8 up to 256)")
    if len(dims) > 3 and dims[3]:
        found.append(f"an explicit attn_mask of shape {dims[3]}")
    return found


def _math_fallback(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    on_gpu = [c for c in calls if c.implementation == patterns.sdpa("math") and c.device_rows]
    if not on_gpu:
        return 0, None
    if all(_inputs(trace.args[c.row]) is None for c in on_gpu):
        return len(on_gpu), f"why cannot be read: {NO_SHAPES}"
    reasons = dict.fromkeys(r for c in on_gpu for r in _refusals(trace.args[c.row]))
    return len(on_gpu), "; ".join(reasons) or (
        "nothing in the recorded dtypes and shapes rules a fused backend out: was one pinned?"
    )


def _math_backward(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Backwards of SDPA's math backend on a GPU: the forward's inputs say whether a fused one
    (whose backward is fused too) could have run."""
    on_gpu = [c for c in calls if c.implementation == patterns.sdpa("math") and c.device_rows]
    forwards = [c.forward for c in on_gpu if c.forward is not None and c.forward.row is not None]
    reasons = dict.fromkeys(r for f in forwards for r in _refusals(trace.args[f.row]))
    return len(on_gpu), "; ".join(reasons) or None


def _fp32(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    inputs = [_inputs(trace.args[c.row]) for c in calls if c.device_rows]
    types = [(i[1] or [None])[0] if i else None for i in inputs]
    if types and all(t is None for t in types):
        return None, NO_SHAPES
    return sum(t == "float" for t in types), None


def _sync(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    if trace.has_device_activity and not trace.is_runtime.any():
        return None, "no CUDA runtime calls were recorded"
    found = set()
    for c in calls:
        lo, hi = (c.start, c.end) if c.scope is None else (trace.ts[c.scope], trace.end[c.scope])
        rows = _inside(trace, c.row, lo, hi)
        runtime = rows[trace.is_runtime[rows]].tolist()
        found |= {r for r in runtime if re.search(patterns.SYNCHRONIZE, trace.name[r])}
    return len(found), None


CHECKS = {  # kind -> (check, the pass whose calls it reads)
    "out_of_place_masked_fill": (_masked_fill, FORWARD),
    "eager_attention": (_eager, FORWARD),
    "repeat_kv": (_repeat_kv, FORWARD),
    "qkv_copies": (_qkv_copies, FORWARD),
    "mask_per_call": (_mask_per_call, FORWARD),
    "math_fallback": (_math_fallback, FORWARD),
    "math_backward": (_math_backward, BACKWARD),
    "fp32_attention_on_gpu": (_fp32, FORWARD),
    "sync_in_forward": (_sync, FORWARD),
}


def chapter(kind: str, teaching: Teaching = lambda kind: None) -> str | None:
    """The page in docs/ that teaches the fix for a finding (`teaching`: attn.specs.chapter_teaching)."""
    return PAGES.get(kind) or teaching(kind)


def findings(
    trace: Trace, calls: list[Call], teaching: Teaching = lambda kind: None
) -> tuple[list[dict], list[dict]]:
    """(findings with a count, the kinds the trace cannot tell and why)."""
    with_cpu = [c for c in calls if c.row is not None]
    if "cpu_op" not in trace.cat:
        return [], [{"kind": kind, "why": NO_CPU_OPS} for kind in CHECKS]
    if not calls:
        return [], []
    no_call = GRAPH_REPLAY if any(c.graph for c in calls) else NO_CPU_CALL
    found, unchecked = [], []
    for kind, (check, pass_) in CHECKS.items():
        mine = [c for c in with_cpu if c.pass_ == pass_]
        if not with_cpu:
            count, detail = None, no_call
        else:
            count, detail = check(trace, mine) if mine else (0, None)
        if count is None:
            unchecked.append({"kind": kind, "why": detail})
        elif count:
            row = {
                "kind": kind,
                "count": count,
                "chapter": chapter(kind, teaching),
                "advice": ADVICE[kind],
            }
            found.append(row | ({"detail": detail} if detail else {}))
    lacking = [c for c in calls if c.row is None]
    if with_cpu and lacking:  # the others were checked; these cannot be
        why = GRAPH_REPLAY if any(c.graph for c in lacking) else NO_CPU_CALL
        why = f"for {len(lacking)} of the {len(calls)} calls, {why}"
        unchecked += [{"kind": kind, "why": why} for kind in CHECKS]
    return found, unchecked


def _shapes(trace: Trace, call: Call) -> str | None:
    """The recorded input shapes of a call's op (a backward: its forward's), as text."""
    op = call.forward.row if call.forward is not None else call.row
    dims = [] if op is None else [d for d in _dims(trace.args[op]) if d]
    return " ".join(f"[{','.join(map(str, d))}]" for d in dims) or None


def _device_us(trace: Trace, call: Call) -> float:
    return float(trace.dur[call.device_rows].sum()) if call.device_rows else 0.0


def _gaps(calls: list[Call], times: dict[int, float]) -> list[list[Call]]:
    """Calls split where, in order of device time, one takes GAP times the one before."""
    ordered = sorted(calls, key=lambda c: times[id(c)])
    kinds, last = [[ordered[0]]], times[id(ordered[0])]
    for c in ordered[1:]:
        if times[id(c)] > GAP * max(last, _EPS):
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
    times = {id(c): _device_us(trace, c) for c in calls}
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
        num, den = (
            (_device_us(trace, b), _device_us(trace, f)) if on_device else (b.cpu_us, f.cpu_us)
        )
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
            per_call = [_device_us(trace, c) for c in kind]
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
                "device_time_us_range": [min(per_call), max(per_call)] if on_device else None,
                "share_of_device_time": sum(per_call) / total if on_device and total else None,
                "kernels": list(dict.fromkeys(trace.name[d] for d in kernels)),
            }
            if pass_ == BACKWARD:
                row["linked_to_forward"] = sum(c.forward is not None for c in kind)
                row["backward_forward_ratio"] = _ratio(trace, kind)
            rows.append(row)
    return rows


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


def diagnose(trace: Trace, teaching: Teaching = lambda kind: None) -> dict:
    """The report as data: the trace's facts, its attention, the findings and what went unchecked;
    `teaching` names the chapter that teaches a finding's fix (attn.specs.chapter_teaching)."""
    calls = find_calls(trace)
    found, unchecked = findings(trace, calls, teaching)
    rows = attention_rows(trace, calls)
    shares = [r["share_of_device_time"] for r in rows if r["share_of_device_time"] is not None]
    return {
        "trace": {
            "device_name": device_name_of(trace.raw),
            "cpu_ops": "cpu_op" in trace.cat,
            "shapes": any("Input Dims" in a for a in trace.args),
            "device_activity": trace.has_device_activity,
            "device_time_us": trace_device_us(trace) if trace.has_device_activity else None,
        },
        "attention": rows,
        "attention_share_of_device_time": sum(shares) if shares else None,
        "layout_kernels": layout_kernels(trace),
        "findings": found,
        "not_checked": unchecked,
        "lint": trace_lint.lint(trace),
    }


def _time_cell(r: dict) -> str:
    """Time per call with its spread over the calls (times move with load; counts do not)."""
    if r["device_time_us_per_call"] is None:
        return "–"
    lo, hi = r["device_time_us_range"]
    spread = "" if hi - lo <= 0.05 * max(hi, _EPS) else f" ({time_text(lo)}–{time_text(hi)})"
    return time_text(r["device_time_us_per_call"]) + spread


def _ratio_text(r: dict) -> str:
    ratio = r.get("backward_forward_ratio")
    if not ratio:
        return ""
    spread = f"{ratio['min']:.2f}–{ratio['max']:.2f}"
    return f"{ratio['median']:.2f}x the forward's {ratio['of']} ({spread})"


def shown(text: object) -> str:
    """A name from the trace for the terminal: no rich markup, no escape sequence."""
    return _markup(visible(str(text)))


def report(result: dict, console: Console) -> None:
    """The report as the terminal shows it: a table of attention, then findings, gaps and lint."""
    if not result["attention"]:
        console.print("No attention found in this trace.")
    else:
        table = Table(title="Attention", caption="kernels, device time and share: per call")
        headers = ("implementation", "pass", "compiled", "where", "shapes", "calls", "kernels",
                   "device time", "share")  # fmt: skip
        for header in headers:
            table.add_column(header, overflow="fold", no_wrap=header not in ("where", "shapes"))
        for r in result["attention"]:
            share = r["share_of_device_time"]
            table.add_row(
                shown(r["implementation"]),
                r["pass"],
                "yes" if r["compiled"] else "no",
                shown(r["where"]),
                shown(r["shapes"] or "–"),
                str(r["calls"]),
                "–" if r["kernels_per_call"] is None else count_text(r["kernels_per_call"]),
                _time_cell(r),
                "–" if share is None else f"{share:.1%}",
            )
        console.print(table)
        if result["attention_share_of_device_time"] is not None:
            share = result["attention_share_of_device_time"]
            console.print(f"Attention takes {share:.1%} of the trace's summed device time.")
        for r in result["attention"]:
            if text := _ratio_text(r):
                console.print(f"  {r['implementation']} backward: {text}")
            for kernel in r["kernels"]:
                console.print(
                    f"  {shown(r['implementation'])} {r['pass']}: {shown(kernel)}",
                    overflow="ellipsis",
                    no_wrap=True,
                )
    layout = result.get("layout_kernels") or {}
    if layout.get("kernels"):
        console.print(
            f"Layout work, not attention: {layout['kernels']} Inductor pointwise or reduction "
            f"kernel(s) named after attention ops, {time_text(layout['device_time_us'])} in all."
        )
    if result["findings"]:
        table = Table("finding", "count", "chapter", "advice", title="Findings")
        for f in result["findings"]:
            advice = f["advice"] + (f" ({f['detail']})" if f.get("detail") else "")
            table.add_row(shown(f["kind"]), str(f["count"]), shown(f["chapter"]), shown(advice))
        console.print(table)
    elif result["attention"]:
        console.print("Findings: none.")
    gaps: dict[str, list[str]] = {}  # one line per reason, however many findings it stops
    for gap in result["not_checked"]:
        gaps.setdefault(gap["why"], []).append(gap["kind"])
    for why, kinds in gaps.items():
        console.print(f"[dim]{shown(', '.join(kinds))}: not checked, {shown(why)}[/dim]")
    for line in result.get("lint", []):
        console.print(f"Trace: {shown(line)}.")
