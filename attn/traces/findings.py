"""What to fix in the attention a trace holds: each finding one record, beside its detector.

A record names the finding, says in one sentence what to change and why, and where the fix is
taught: a page of its own, else the chapter whose variant's spec `teaches` it. Its detector takes
the calls of one pass that have a CPU op and returns (count, detail): a count of None where the
trace cannot tell (the detail then says why), else a detail the advice may carry. A new finding is
one `@finding` detector here and its test; the report lists findings in the order they are defined.
Where the trace lacks what a finding needs (CPU ops, shapes), it is said unchecked, not guessed.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable

import numpy as np

from attn.traces import patterns
from attn.traces.calls import BACKWARD, FORWARD, Call, device_us, input_dims, inside, launched
from attn.traces.trace import MEMCPY, Trace
from attn.traces.units import time_text

Detector = Callable[[Trace, list[Call]], tuple["int | None", "str | None"]]
Teaching = Callable[[str], "str | None"]  # a finding -> the chapter whose variant teaches its fix
NO_CPU_OPS = "the trace has no CPU ops (recorded with the GPU activity only)"
NO_CPU_CALL = "no CPU op was recorded around the attention's kernels"
GRAPH_REPLAY = "the attention's kernels are a graph replay (no CPU op launched them one by one)"
NO_SHAPES = "dtypes and shapes were not recorded (the trace was taken without record_shapes)"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing to fix: its name, the advice, where the fix is taught, and how it is found."""

    kind: str
    advice: str  # one sentence: what to change, and why
    detect: Detector
    page: str | None = None  # a page that teaches the fix; None: a variant's chapter (`teaches`)
    reads: str = FORWARD  # the pass whose calls the detector reads

    def chapter(self, teaching: Teaching = lambda kind: None) -> str | None:
        """The page in docs/ that teaches the fix (`teaching`: attn.specs.chapter_teaching)."""
        return self.page or teaching(self.kind)


FINDINGS: list[Finding] = []  # in the order they are defined, which is the report's


def finding(
    kind: str, advice: str, *, page: str | None = None, reads: str = FORWARD
) -> Callable[[Detector], Detector]:
    """Record the detector below as the finding `kind`."""

    def record(detect: Detector) -> Detector:
        FINDINGS.append(Finding(kind, advice, detect, page, reads))
        return detect

    return record


@finding(
    "out_of_place_masked_fill",
    "Mask in place with masked_fill_ (safe where no backward needs the scores): the out-of-place "
    "masked_fill clones the whole score matrix before filling it.",
)
def _masked_fill(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    found = {
        r
        for c in calls
        for r in inside(trace, c.row, c.region_start, c.end).tolist()
        if trace.name[r] == patterns.MASKED_FILL and _copies(trace, r)
    }
    return len(found), None


def _copies(trace: Trace, row: int) -> bool:
    """The op copies memory: an aten::clone or aten::copy_ under it, or a Memcpy it launched."""
    under = inside(trace, row, trace.ts[row], trace.end[row])
    device = launched(trace, row, trace.ts[row], trace.end[row])
    return any(trace.name[r] in patterns.COPY_OPS for r in under if r != row) or any(
        trace.cat[d] == MEMCPY for d in device
    )


@finding(
    "eager_attention",
    "Call F.scaled_dot_product_attention instead of matmul, softmax, matmul: one fused kernel "
    "that never writes the [seq_q, seq_k] scores to memory.",
)
def _eager(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    return sum(c.implementation == "eager" for c in calls), None


@finding(
    "repeat_kv",
    "Pass K and V with their own head count and enable_gqa=True to "
    "F.scaled_dot_product_attention: repeating or broadcasting them copies K and V for every head.",
)
def _repeat_kv(trace: Trace, calls: list[Call]) -> tuple[int, str | None]:
    """repeat_interleave or repeat, or an expand made contiguous by a copying reshape, before a
    call in its scope; or, in eager attention, a product that broadcasts K or V over the heads
    and copies them to do it."""
    found = set()
    for c in calls:
        window = [r for r in inside(trace, c.row, c.region_start, c.start).tolist()]
        window = [r for r in window if trace.cat[r] == "cpu_op" and r != c.row]
        within = set(window)  # once: a range of a million tiny ops made this quadratic
        ops = [r for r in window if trace.parent[r] not in within]
        for a, b in itertools.pairwise([*ops, None]):
            if trace.name[a] in patterns.REPEAT_OPS:
                found.add(a)
            elif trace.name[a] == patterns.EXPAND and b is not None and _copies(trace, b):
                found.add(b)
        if c.implementation == "eager":
            found |= {
                r
                for r in inside(trace, c.row, c.start, c.end).tolist()
                if trace.name[r] == patterns.MATMUL
                and _broadcast_heads(input_dims(trace.args[r]))
                and _copies(trace, r)
            }
    return len(found), _copy_detail(trace, found, calls)


def _broadcast_heads(dims: list) -> bool:
    """A product of [.., heads, s, d] by [.., 1, s, d] (or the reverse): matmul expands the one
    head to all of them, and its reshape copies it for every head."""
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) < 3:
        return False
    a, b = dims[0][-3], dims[1][-3]
    return a != b and 1 in (a, b)


def _copy_detail(trace: Trace, found: set[int], calls: list[Call]) -> str | None:
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
            and _copies(trace, r)
        }
    return len(found), _copy_detail(trace, found, calls)


@finding(
    "mask_per_call",
    "Build the mask once (a buffer) or pass is_causal=True: building it in every call launches "
    "its kernels and allocates a [seq_q, seq_k] tensor each time.",
    page="sdpa.md",
)
def _mask_per_call(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    """Calls whose scope builds a triangular mask (tril or triu) before the call, or inside an
    eager one (not inside an op: SDPA's math backend builds its causal mask itself)."""
    return sum(
        any(
            trace.name[r] in patterns.MASK_OPS
            for r in inside(
                trace, c.row, c.region_start, c.end if c.implementation == "eager" else c.start
            ).tolist()
        )
        for c in calls
    ), None


@finding(
    "math_fallback",
    "Make the inputs fit a fused backend (float16 or bfloat16, head_dim a multiple of 8 up to "
    "256): SDPA's math backend is the many-kernel reference path.",
)
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
    reasons = dict.fromkeys(r for f in forwards for r in _refusals(trace.args[f.row]))
    return len(on_gpu), "; ".join(reasons) or None


@finding(
    "fp32_attention_on_gpu",
    "Run attention in bfloat16 or float16 (torch.autocast): in float32 the flash and cuDNN "
    "kernels cannot run and the products miss the tensor cores.",
)
def _fp32(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    inputs = [_inputs(trace.args[c.row]) for c in calls if c.device_rows]
    types = [(i[1] or [None])[0] if i else None for i in inputs]
    if types and all(t is None for t in types):
        return None, NO_SHAPES
    return sum(t == "float" for t in types), None


@finding(
    "sync_in_forward",
    "Move the synchronize (an .item(), .cpu() or print of a GPU tensor) out of the attention: the "
    "CPU waits there for the GPU, so no launch can run ahead of it.",
    page="reading-a-profile.md",
)
def _sync(trace: Trace, calls: list[Call]) -> tuple[int | None, str | None]:
    if trace.has_device_activity and not trace.is_runtime.any():
        return None, "no CUDA runtime calls were recorded"
    found = set()
    for c in calls:
        lo, hi = (c.start, c.end) if c.scope is None else (trace.ts[c.scope], trace.end[c.scope])
        rows = inside(trace, c.row, lo, hi)
        runtime = rows[trace.is_runtime[rows]].tolist()
        found |= {r for r in runtime if re.search(patterns.SYNCHRONIZE, trace.name[r])}
    return len(found), None


def findings(
    trace: Trace, calls: list[Call], teaching: Teaching = lambda kind: None
) -> tuple[list[dict], list[dict]]:
    """(findings with a count, the kinds the trace cannot tell and why)."""
    with_cpu = [c for c in calls if c.row is not None]
    if "cpu_op" not in trace.cat:
        return [], [{"kind": f.kind, "why": NO_CPU_OPS} for f in FINDINGS]
    if not calls:
        return [], []
    no_call = GRAPH_REPLAY if any(c.graph for c in calls) else NO_CPU_CALL
    found, unchecked = [], []
    for f in FINDINGS:
        mine = [c for c in with_cpu if c.pass_ == f.reads]
        if not with_cpu:
            count, detail = None, no_call
        else:
            count, detail = f.detect(trace, mine) if mine else (0, None)
        if count is None:
            unchecked.append({"kind": f.kind, "why": detail})
        elif count:
            row = {
                "kind": f.kind,
                "count": count,
                "chapter": f.chapter(teaching),
                "advice": f.advice,
            }
            found.append(row | ({"detail": detail} if detail else {}))
    lacking = [c for c in calls if c.row is None]
    if with_cpu and lacking:  # the others were checked; these cannot be
        why = GRAPH_REPLAY if any(c.graph for c in lacking) else NO_CPU_CALL
        why = f"for {len(lacking)} of the {len(calls)} calls, {why}"
        unchecked += [{"kind": f.kind, "why": why} for f in FINDINGS]
    return found, unchecked
