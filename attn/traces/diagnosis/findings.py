"""What to fix in the attention a trace holds: each finding one record, beside its detector.

A record names the finding, says in one sentence what to change and why, and names the page in
docs/ that teaches the fix (the record, not its caller, knows it). Its detector takes
the calls of one pass that have a CPU op (every call of the pass, for a finding that needs none:
the dtype a kernel's name says) and returns (count, detail): a count of None where the
trace cannot tell (the detail then says why), else a detail the advice may carry. A new finding is
one `@finding` detector here and its test; the report lists findings in the order they are defined.
Where the trace lacks what a finding needs (CPU ops, shapes), it is said unchecked, not guessed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from attn.traces.common.units import bytes_text, count_text, time_text
from attn.traces.diagnosis import device_work, eager_scores, preparation
from attn.traces.diagnosis import recorded_inputs as recorded
from attn.traces.diagnosis.calls import (
    BACKWARD,
    FORWARD,
    Call,
    device_us,
    input_dims,
    inside,
    linked_by,
    outermost,
)
from attn.traces.diagnosis.preparation import copies
from attn.traces.read import patterns
from attn.traces.read.trace import Trace

Detector = Callable[[Trace, list[Call]], tuple["int | None", "str | None"]]
NO_CPU_OPS = "the trace has no CPU ops (recorded with the GPU activity only)"
NO_CPU_CALL = "no CPU op was recorded around the attention's kernels"
GRAPH_REPLAY = "the attention's kernels are a graph replay (no CPU op launched them one by one)"
NO_SHAPES = "dtypes and shapes were not recorded (the trace was taken without record_shapes)"
NO_DTYPE = "no CPU op recorded the dtype, and the attention kernels' names do not say it"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing to fix: its name, the advice, where the fix is taught, and how it is found."""

    kind: str
    advice: str  # one sentence: what to change, and why
    detect: Detector
    page: str  # the page in docs/ that teaches the fix
    reads: str = FORWARD  # the pass whose calls the detector reads
    needs_cpu: bool = True  # reads only calls with a CPU op; else every call (kernels alone too)


FINDINGS: list[Finding] = []  # in the order they are defined, which is the report's


def finding(
    kind: str,
    advice: str,
    *,
    page: str,
    reads: str = FORWARD,
    needs_cpu: bool = True,
) -> Callable[[Detector], Detector]:
    """Record the detector below as the finding `kind`."""

    def record(detect: Detector) -> Detector:
        FINDINGS.append(Finding(kind, advice, detect, page, reads, needs_cpu))
        return detect

    return record


@finding(
    "out_of_place_masked_fill",
    "Mask in place with masked_fill_ (safe where no backward needs the scores): the out-of-place "
    "masked_fill clones the whole score matrix before filling it.",
    page="inplace.md",
)
def _masked_fill(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    found = {
        r
        for c in calls
        for r in inside(trace, c.row, c.region_start, c.end).tolist()
        if trace.name[r] == patterns.MASKED_FILL and copies(trace, r)
    }
    return len(found), None


@finding(
    "mha_need_weights",
    "Call nn.MultiheadAttention with need_weights=False where its weights go unused: its fast "
    "path then runs SDPA's fused kernel instead of writing the [seq_q, seq_k] weights.",
    page="sdpa.md",
    needs_cpu=False,  # the fast path is found by its CPU op: a call without one is not it
)
def _mha_weights(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    """Fast-path calls whose recorded need_weights is True (None where it was not recorded)."""
    mine = [c for c in calls if c.implementation == "mha_fastpath"]
    said = [recorded.concrete(trace.args[c.row], patterns.MHA_NEED_WEIGHTS) for c in mine]
    if mine and None in said:
        return None, NO_SHAPES
    return said.count("True"), None


@finding(
    "eager_attention",
    "Call F.scaled_dot_product_attention instead of matmul, softmax, matmul: one fused kernel "
    "that never writes the [seq_q, seq_k] scores to memory.",
    page="sdpa.md",
)
def _eager(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    return sum(c.implementation == "eager" for c in calls), None


@finding(
    "out_of_place_score_ops",
    "Work on the score matrix in place (mul_, add_, masked_fill_; or scale q before the product, "
    "or pass the bias as attn_mask to F.scaled_dot_product_attention): each out-of-place op on it "
    "writes a whole new [seq_q, seq_k] matrix.",
    page="inplace.md",
)
def _out_of_place_scores(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Eager calls' ops on the score matrix between Q.K^T and P.V that write a new one: out of
    place (no trailing underscore), not a product, not masked_fill (a finding of its own), not a
    dropout; on a GPU, those that launched work (a cast to the same dtype launches none)."""
    found = {id(c): [r for r in c.terms if _writes_new(trace, r)] for c in calls}
    mine = [c for c in calls if found[id(c)]]
    if not mine:
        return 0, None
    rows = [r for c in mine for r in found[id(c)]]
    names = ", ".join(dict.fromkeys(trace.name[r] for r in rows))
    detail = f"{len(rows)} in {len(mine)} call(s) ({names})"
    largest = max(mine, key=lambda c: recorded.input_bytes(trace, c.softmax, 0) or 0)
    if size := recorded.input_bytes(trace, largest.softmax, 0):
        shape = eager_scores.softmax_input(trace, largest.softmax)
        detail += f"; each writes a new score matrix, up to {shape} ({bytes_text(size)})"
    if trace.has_device_activity:
        us = sum(device_work.under(trace, r) for r in rows) / len(mine)
        detail += f"; {time_text(us)} per call on the device"
    return len(rows), detail


def _writes_new(trace: Trace, row: int) -> bool:
    name = trace.name[row]
    if name.endswith("_") or name in patterns.MATMUL_OPS or name in patterns.NOT_NEW_SCORES:
        return False
    if trace.has_device_activity:
        return device_work.under(trace, row) > 0
    kids = inside(trace, row, trace.ts[row], trace.end[row])
    return name not in patterns.MAYBE_NO_OP or len(kids) > 1  # a cast copies in _to_copy


@finding(
    "repeat_kv",
    "Pass K and V with their own head count and enable_gqa=True to "
    "F.scaled_dot_product_attention: repeating or broadcasting them copies K and V for every head.",
    page="decoding.md",
)
def _repeat_kv(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """repeat_interleave or repeat, or an expand made contiguous by a copying reshape, before a
    call in its scope (not over the batch, not of a mask) or, since the call before, of the call's
    K or V with fewer heads; or, in eager attention, a product that broadcasts K or V over the
    heads and copies them to do it."""
    found = set()
    for c in calls:
        found |= {r for r, how in preparation.kv_repeats(trace, c).items() if how == "heads"}
        if c.implementation == "eager":
            found |= {
                r
                for r in inside(trace, c.row, c.start, c.end).tolist()
                if trace.name[r] == patterns.MATMUL
                and _broadcast_heads(input_dims(trace.args[r]))
                and copies(trace, r)
            }
    return len(found), device_work.copies_detail(trace, found, calls)


def _broadcast_heads(dims: list) -> bool:
    """A product of [.., heads, s, d] by [.., 1, s, d] (or the reverse): matmul expands the one
    head to all of them, and its reshape copies it for every head."""
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) < 3:
        return False
    a, b = dims[0][-3], dims[1][-3]
    return a != b and 1 in (a, b)


@finding(
    "qkv_copies",
    "Pass q, k and v to F.scaled_dot_product_attention as the views they are (a transpose of "
    "[batch, seq, heads, head_dim] is taken as it is): a .contiguous() copies each.",
    page="sdpa.md",
)
def _qkv_copies(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """A .contiguous() (or clone) that copies, among the ops just before a fused call in its
    scope: SDPA takes strided q, k and v as they are."""
    found = set()
    for c in calls:
        if c.implementation == "eager":
            continue
        window = inside(trace, c.row, c.region_start, c.start).tolist()
        found |= {
            r
            for r in window
            if (
                trace.name[r] == patterns.CONTIGUOUS
                or (trace.name[r] == patterns.CLONE and trace.cat[int(trace.parent[r])] != "cpu_op")
            )  # a clone under a reshape is repeat_kv's (an expand made contiguous)
            and copies(trace, r)
        }
    return len(found), device_work.copies_detail(trace, found, calls)


@finding(
    "kv_repeated_over_batch",
    "Let K and V (or the source they are projected from) broadcast over the batch, as expand() "
    "without a copy does, or project them once: repeating them over the batch copies them once "
    "for every sample, and the projections after then run on every copy.",
    page="decoding.md",
)
def _kv_over_batch(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """repeat_interleave or repeat (or an expand made contiguous) since the call before on its
    thread (a source repeated once before the layers, in their step or forward, counts for the
    first), of a tensor of the keys' sequence whose leading dimension is smaller than the call's
    batch and divides it."""
    found = {}
    for c in calls:
        found |= {
            r: (dims, preparation.batch(trace, c))
            for r, dims in preparation.repeats(trace, c, c.since)
            if preparation.over_batch(trace, c, dims)
        }
    if not found:
        return 0, None
    said = sorted({f"{dims} up to a batch of {batch}" for dims, batch in found.values()})
    detail = f"repeated: {', '.join(said[:3])}"
    copies = device_work.copies_detail(trace, set(found), calls)
    return len(found), detail + (f"; {copies}" if copies else "")


@finding(
    "head_dim_padding",
    "Give the attention a head dim its kernel supports, or a kernel that supports yours: q, k "
    "and v padded up to it are copied in every call, and the kernel computes on the zeros.",
    page="custom-kernels.md",
)
def _head_dim_padding(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Pads (F.pad) of a tensor of rank 3 or more before a call in its scope, or inside a call's
    own op (SDPA's mask padding is its own finding; a mask, as big as the scores, left out)."""
    found, widths = set(), set()
    for c in calls:
        size, head = recorded.score_size(trace, c), recorded.head_dim(trace, c)
        inner = trace.name[c.row] != patterns.SDPA_FRONT and c.implementation != "eager"
        end = c.end if inner else c.start
        for r in inside(trace, c.row, c.prep_start, end).tolist():
            dims = (eager_scores.tensor_dims(trace.args[r]) or [[]])[0]
            if not re.search(patterns.PAD_OPS, trace.name[r]) or len(dims) < 3:
                continue
            if size is not None and dims[-2:] == list(size):
                continue
            if trace.ts[r] < c.region_start and not recorded.padded_into(trace, c, dims):
                continue  # before the call's own range: only what its inputs are made from
            found.add(r)
            widths.add((dims[-1], head) if head and head > dims[-1] else (dims[-1], None))
    if not found:
        return 0, None
    said = ", ".join(f"{a} to {b}" if b else f"{a} (padded)" for a, b in sorted(widths, key=str))
    detail = f"head dim {said}"
    if trace.has_device_activity:
        pad = sum(device_work.under(trace, r) for r in found) / len(calls)
        attention = sum(device_us(trace, c) for c in calls) / len(calls)
        detail += f"; the padding takes {time_text(pad)} per call, the call {time_text(attention)}"
    return len(found), detail


@finding(
    "mask_padded_in_sdpa",
    f"Build the mask at a last dimension that is a multiple of {patterns.MASK_ALIGNMENT} once "
    "(pad it yourself, then slice it back to the keys' length: SDPA takes the view): the "
    "memory-efficient kernel needs that alignment, so SDPA pads any other mask in every call.",
    page="sdpa.md",
)
def _mask_padded(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """SDPA calls whose front op pads (F.pad's fill and copy kernels) around its backend op."""
    found, pads, masks = [], [], set()
    for c in calls:
        if trace.name[c.row] != patterns.SDPA_FRONT:
            continue
        mine = [
            r
            for r in inside(trace, c.row, c.start, c.end).tolist()
            if re.search(patterns.PAD_OPS, trace.name[r])
            and not any(re.search(patterns.PAD_OPS, trace.name[a]) for a in trace.ancestors(r))
        ]
        if mine:
            found.append(c)
            pads += mine
            dims = eager_scores.tensor_dims(trace.args[c.row])
            masks.add(str(dims[3]) if len(dims) > 3 and dims[3] else "?")
    if not found:
        return 0, None
    detail = f"the mask {', '.join(sorted(masks))}"
    if trace.has_device_activity:
        pad = sum(device_work.under(trace, r) for r in pads) / len(found)
        kernel = sum(
            float(trace.dur[device_work.attention_kernels(trace, c)].sum()) for c in found
        ) / len(found)
        detail += (
            f": the padding takes {time_text(pad)} per call, the attention kernel "
            f"{time_text(kernel)}"
        )
    return len(found), detail


@finding(
    "mask_per_call",
    "Build the mask or bias once (a buffer) or pass is_causal=True: building or converting it in "
    "every call launches its kernels and writes a [seq_q, seq_k] tensor each time.",
    page="sdpa.md",
)
def _mask_per_call(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Calls whose scope builds a triangular mask (tril or triu) before the call, or inside an
    eager one (not inside an op: SDPA's math backend builds its causal mask itself); or works
    there on a tensor as big as the scores (a mask or a bias) other than the scores themselves, in
    at least half the calls of their place (a bias built once per forward, in the first layer
    only, is not built per call)."""
    triangles, sized = set(), {}
    for c in calls:
        end = c.end if c.implementation == "eager" else c.start
        rows = inside(trace, c.row, c.region_start, end).tolist()
        if any(trace.name[r] in patterns.MASK_OPS for r in rows):
            triangles.add(id(c))
        if found := _score_sized(trace, c, end):
            sized[id(c)] = found
    places: dict[str, list[Call]] = {}
    for c in calls:
        places.setdefault(c.where, []).append(c)
    often = {
        id(c)
        for group in places.values()
        if 2 * sum(id(c) in sized for c in group) >= len(group)
        for c in group
        if id(c) in sized
    }
    count = len(triangles | often)
    built = [found for key, found in sized.items() if key in often]
    if not built:
        return count, None
    r, dims, dtype = max(
        (f for found in built for f in found), key=lambda f: recorded.tensor_bytes(*f[1:])
    )
    size = bytes_text(recorded.tensor_bytes(dims, dtype))
    detail = f"a {dims} {dtype} tensor ({size}) in {len(built)} call(s)"
    if trace.has_device_activity:
        us = sum(device_work.under(trace, r) for found in built for r, _, _ in found) / len(built)
        detail += f", {time_text(us)} of device work per call"
    return count, detail


@finding(
    "bias_from_arange_per_call",
    "Build the position bias (or mask) once per forward, or keep it per sequence length as a "
    "buffer: rebuilt from arange before every call, its index arithmetic runs and a tensor the "
    "size of the scores is written each time.",
    page="sdpa.md",
)
def _arange_bias(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Calls that take a bias their thread built from aten::arange since the call before
    (attn.traces.diagnosis.preparation), in at least half the calls of their place (a bias built
    once for all the layers is the first call's preparation, not a cost of every call)."""
    built = {id(c): preparation.arange_bias(trace, c) for c in calls}
    places: dict[str, list[Call]] = {}
    for c in calls:
        places.setdefault(c.where, []).append(c)
    mine = [
        c
        for group in places.values()
        if 2 * sum(bool(built[id(c)]) for c in group) >= len(group)
        for c in group
        if built[id(c)]
    ]
    if not mine:
        return 0, None
    ops = [r for c in mine for r in built[id(c)]]
    names = ", ".join(dict.fromkeys(trace.name[r] for r in ops))
    per_call = count_text(len(ops) / len(mine))
    detail = f"in {len(mine)} of {len(calls)} calls, {per_call} ops a call ({names})"
    if trace.has_device_activity:
        us = sum(device_work.under(trace, r) for r in ops) / len(mine)
        attention = sum(device_us(trace, c) for c in mine) / len(mine)
        detail += f"; {time_text(us)} of device work per call, the call {time_text(attention)}"
    return len(mine), detail


def _score_sized(trace: Trace, c: Call, end: float) -> list[tuple[int, list[int], str | None]]:
    """(op, shape, dtype) of each outermost op from the call's prep_start to `end` (the scores'
    own ops, the projections and ops that take a tensor only for its dtype left out) that reads
    or makes a tensor whose last two dims are the scores' and launches work."""
    size = recorded.score_size(trace, c)
    if size is None or min(size) <= 1:
        return []
    own = {c.row, c.softmax, c.pv, *c.terms}
    found = []
    for r in outermost(trace, c.row, c.prep_start, end):  # shapes tie them to the call
        name = trace.name[r]
        if r in own or name in patterns.NOT_MASK_WORK:
            continue
        if trace.has_device_activity and not device_work.under(trace, r):
            continue
        if re.search(patterns.FACTORY_OPS, name):
            made = recorded.factory_shape(trace.args[r])
            found += [(r, *made)] if made and tuple(made[0][-2:]) == size else []
        elif not re.search(patterns.NEW_FROM_OPTIONS, name):
            dims = eager_scores.tensor_dims(trace.args[r])
            found += [
                (r, d, recorded.input_type(trace, r, i))
                for i, d in enumerate(dims)
                if len(d) >= 2 and tuple(d[-2:]) == size
            ][:1]
    return found


@finding(
    "math_fallback",
    "Make the inputs fit a fused backend (float16 or bfloat16, head_dim a multiple of 8 up to "
    "256): SDPA's math backend is the many-kernel reference path.",
    page="sdpa.md",
)
def _math_fallback(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    on_gpu = [c for c in calls if c.implementation == patterns.sdpa("math") and c.device_rows]
    if not on_gpu:
        return 0, None
    if all(recorded.inputs(trace.args[c.row]) is None for c in on_gpu):
        return len(on_gpu), f"why cannot be read: {NO_SHAPES}"
    reasons = dict.fromkeys(r for c in on_gpu for r in recorded.fused_refusals(trace.args[c.row]))
    return len(on_gpu), "; ".join(reasons) or (
        "nothing in the recorded dtypes and shapes rules a fused backend out: was one pinned?"
    )


@finding(
    "math_backward",
    "Make the forward run a fused SDPA backend (float16 or bfloat16, no pinned math backend): its "
    "backward is then fused too, not the many-kernel math gradients.",
    page="training.md",
    reads=BACKWARD,
)
def _math_backward(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Backwards of SDPA's math backend on a GPU: the forward's inputs say whether a fused one
    (whose backward is fused too) could have run."""
    on_gpu = [c for c in calls if c.implementation == patterns.sdpa("math") and c.device_rows]
    forwards = [c.forward for c in on_gpu if c.forward is not None and c.forward.row is not None]
    reasons = dict.fromkeys(r for f in forwards for r in recorded.fused_refusals(trace.args[f.row]))
    return len(on_gpu), "; ".join(reasons) or None


# Attention's backward over its forward in FLOPs: five [seq_q, seq_k] products (the scores
# recomputed, dV, dP, dQ, dK) against the forward's two, as FlashAttention-2's paper counts them.
FLOP_RATIO = 2.5
SLOW = 2  # a backward this many times that ratio over its forward is slow beyond its FLOPs


@finding(
    "backward_beyond_its_flops",
    "Look at what the attention's backward runs (its kernel, dtype and what it recomputes): it "
    f"takes far longer over its forward than their FLOPs say ({FLOP_RATIO} times).",
    page="training.md",
    reads=BACKWARD,
    needs_cpu=False,
)
def _slow_backward(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """Backwards linked to their forward whose device time over the forward's is more than SLOW
    times FLOP_RATIO."""
    slow = [
        c
        for c in calls
        if c.forward
        and (f := device_us(trace, c.forward)) > 0
        and device_us(trace, c) / f > SLOW * FLOP_RATIO
    ]
    if not trace.has_device_activity or not slow:
        return 0, None
    ratios = sorted(device_us(trace, c) / device_us(trace, c.forward) for c in slow)
    return len(ratios), (
        f"the backward takes {ratios[len(ratios) // 2]:.1f} times its forward's device time "
        f"(median of {len(ratios)}), their FLOPs {FLOP_RATIO} times; linked by {linked_by(slow)}"
    )


@finding(
    "fp32_attention_on_gpu",
    "Run attention in bfloat16 or float16 (torch.autocast): in float32 the flash and cuDNN "
    "kernels cannot run and the products miss the tensor cores.",
    page="sdpa.md",
    needs_cpu=False,
)
def _fp32(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    """Calls on a GPU whose first input is float (its recorded dtype; where not recorded, the
    dtype its attention kernel's name says: f32, bf16, half...)."""
    on_gpu = [c for c in calls if c.device_rows]
    types = [_dtype(trace, c) for c in on_gpu]
    if types and all(t is None for t in types):
        return None, NO_SHAPES if any(c.row is not None for c in calls) else NO_DTYPE
    found = sum(t == "float32" for t in types)
    by_name = sum(
        t == "float32" and not recorded.first_input_dtype(trace, c)
        for t, c in zip(types, on_gpu, strict=True)
    )
    said = [f"read from kernel names for {by_name} call(s)"] if by_name else []
    if found and (casts := recorded.autocast_casts(trace)):  # then "use autocast" is no advice
        said.append(
            f"autocast is on (it casts the inputs of {casts} op(s)): the float32 reaches these "
            "calls past it, from a float32 mask or bias or inputs cast with .float()"
        )
    return found, "; ".join(said) or None


def _dtype(trace: Trace, c: Call) -> str | None:
    """The call's dtype: recorded, else the first its attention kernels' names say."""
    return recorded.first_input_dtype(trace, c) or next(
        (
            t
            for d in device_work.attention_kernels(trace, c)
            if (t := device_work.kernel_dtype(trace.name[d]))
        ),
        None,
    )


@finding(
    "sync_in_forward",
    "Move what waits for the GPU out of the attention (a synchronize, an .item() or .cpu(), a "
    "tensor built on the CPU and copied over in every call): the CPU blocks there, so no launch "
    "can run ahead of it.",
    page="reading-a-profile.md",
)
def _sync(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    """Runtime calls in a call's scope (or the call) that block the CPU: a synchronize, a copy to
    or from pageable memory, or to the host; with the CPU time they took."""
    if trace.has_device_activity and not trace.is_runtime.any():
        return None, "no CUDA runtime calls were recorded"
    found, holders = set(), {}
    for c in calls:
        lo, hi = (c.start, c.end) if c.scope is None else (trace.ts[c.scope], trace.end[c.scope])
        rows = inside(trace, c.row, lo, hi)
        mine = {
            r for r in rows[trace.is_runtime[rows]].tolist() if device_work.blocks_cpu(trace, r)
        }
        found |= mine
        holders |= {id(c): c} if mine else {}
    if not found:
        return 0, None
    blocked, n = float(trace.dur[sorted(found)].sum()), len(holders)
    where = ""  # the cost is the calls' that block, not spread over those that do not
    if n < len(calls):
        kinds = dict.fromkeys(f"{c.implementation} in {c.where}" for c in holders.values())
        where = f"in {n} of {len(calls)} calls ({', '.join(kinds)}): "
    return len(found), (
        f"{where}{count_text(len(found) / n)} per call, {time_text(blocked)} of CPU time "
        f"blocked in all, {time_text(blocked / n)} per call"
    )


def findings(trace: Trace, calls: list[Call]) -> tuple[list[dict], list[dict]]:
    """(findings with a count, the kinds the trace cannot tell and why)."""
    no_ops = "cpu_op" not in trace.cat
    if not calls and not no_ops:
        return [], []
    with_cpu = [c for c in calls if c.row is not None]
    no_call = GRAPH_REPLAY if any(c.graph for c in calls) else NO_CPU_CALL
    found, unchecked = [], []
    for f in FINDINGS:
        mine = [c for c in (with_cpu if f.needs_cpu else calls) if c.pass_ == f.reads]
        if f.needs_cpu and no_ops:
            count, detail = None, NO_CPU_OPS
        elif f.needs_cpu and not with_cpu:
            count, detail = None, no_call
        else:
            count, detail = f.detect(trace, mine) if mine else (0, None)
        if count is None:
            unchecked.append({"kind": f.kind, "why": detail})
        elif count:
            row = {
                "kind": f.kind,
                "count": count,
                "chapter": f.page,
                "advice": f.advice,
            }
            found.append(row | ({"detail": detail} if detail else {}))
    lacking = [c for c in calls if c.row is None]
    if with_cpu and lacking:  # the others were checked; these cannot be
        why = GRAPH_REPLAY if any(c.graph for c in lacking) else NO_CPU_CALL
        why = f"for {len(lacking)} of the {len(calls)} calls, {why}"
        unchecked += [{"kind": f.kind, "why": why} for f in FINDINGS if f.needs_cpu]
    return found, unchecked
