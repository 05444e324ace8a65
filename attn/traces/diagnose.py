"""Find the attention in any trace, name its implementation, and point to the chapter that helps.

    python -m attn.profiling diagnose TRACE [--json OUT]

Attention is found three ways, on the table attn.traces.trace builds: CPU ops the name table
(attn.traces.patterns) knows (SDPA's backend ops, serving and custom ops, generated FlexAttention);
the eager pattern, a product, a softmax and a product with nothing of the kind between, inside one
module or range; and GPU kernels the table knows that no such op launched (CUDA-graph replays,
launches the trace did not record). Findings are counted over the calls found; where the trace
lacks what one needs (CPU ops, shapes), the report says so instead of guessing.
"""

from __future__ import annotations

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

from attn.traces import patterns
from attn.traces.markdown import visible
from attn.traces.trace import KERNEL, MEMCPY, STEP_PREFIX, Trace, device_name_of
from attn.traces.units import count_text, time_text

ADVICE = {  # finding -> one sentence: what to change, and why
    "out_of_place_masked_fill": "Mask in place with masked_fill_ (safe where no backward needs the "
    "scores): the out-of-place masked_fill clones the whole score matrix before filling it.",
    "eager_attention": "Call F.scaled_dot_product_attention instead of matmul, softmax, matmul: "
    "one fused kernel that never writes the [seq_q, seq_k] scores to memory.",
    "repeat_kv": "Pass K and V with their own head count and enable_gqa=True to "
    "F.scaled_dot_product_attention: repeating them copies the KV cache on every call.",
    "math_fallback": "Make the inputs fit a fused backend (float16 or bfloat16, head_dim a multiple "
    "of 8 up to 256): SDPA's math backend is the many-kernel reference path.",
    "fp32_attention_on_gpu": "Run attention in bfloat16 or float16 (torch.autocast): in float32 "
    "the flash and cuDNN kernels cannot run and the products miss the tensor cores.",
    "sync_in_forward": "Move the synchronize (an .item(), .cpu() or print of a GPU tensor) out of "
    "the attention: the CPU waits there for the GPU, so no launch can run ahead of it.",
}
PAGES = {"sync_in_forward": "reading-a-profile.md"}  # taught by a page, not a variant's chapter
Teaching = Callable[[str], "str | None"]  # a finding -> the chapter whose variant teaches its fix
NO_CPU_OPS = "the trace has no CPU ops (recorded with the GPU activity only)"
NO_CPU_CALL = "no CPU op was recorded around the attention's kernels (e.g. a CUDA-graph replay)"
NO_SHAPES = "dtypes and shapes were not recorded (the trace was taken without record_shapes)"
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
    return Call(
        implementation, _compiled(trace, row), _where(trace, scope), device, row, start, end, scope
    )


@functools.cache
def _kind(name: str) -> str | None:
    """What an op is to the eager pattern: a product, a softmax, or neither."""
    if name in patterns.MATMUL_OPS:
        return "product"
    return "softmax" if re.search(patterns.SOFTMAX, name) else None


def _op_calls(trace: Trace) -> list[Call]:
    """Calls of ops the table knows, outermost only (SDPA's backend op once, not its children)."""
    known = {
        i
        for i, (name, cat) in enumerate(zip(trace.name, trace.cat, strict=True))
        if cat == "cpu_op" and (row := patterns.row_for(name)) and row.implementation
    }
    return [
        _found_call(
            trace, patterns.row_for(trace.name[i]).implementation, i, trace.ts[i], trace.end[i]
        )
        for i in sorted(known)
        if not any(a in known for a in trace.ancestors(i))
    ]


def _eager_calls(trace: Trace, taken: list[Call]) -> list[Call]:
    """A product, a softmax, a product: adjacent among a thread's outermost products and softmaxes
    (those of calls already found left out), all three in one scope."""
    kinds = {i: k for i, n in enumerate(trace.name) if trace.cat[i] == "cpu_op" and (k := _kind(n))}
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
            if shape == ("product", "softmax", "product") and len(scopes) == 1:
                call = _found_call(trace, "eager", qk, trace.ts[qk], trace.end[pv])
                call.compiled = _compiled(trace, softmax)
                calls.append(call)
    return calls


def _kernel_calls(trace: Trace, claimed: set[int]) -> list[Call]:
    """Kernels the table knows (or whose names say attention) that no call found launched."""
    calls: list[Call] = []
    last: dict[tuple, Call] = {}  # (implementation, stream) -> the call a helper kernel finishes
    for d in np.flatnonzero(trace.is_device).tolist():
        name = trace.name[d]
        if d in claimed or trace.cat[d] != KERNEL:
            continue
        row = patterns.row_for(name)
        implementation = row.implementation if row else "unknown"
        if implementation is None or (row is None and not patterns.says_attention(name)):
            continue
        if row is not None and row.helper:
            if (implementation, trace.thread[d]) in last:
                last[implementation, trace.thread[d]].device_rows.append(d)
            continue
        launcher = trace.launcher(d)
        if launcher is None:
            where = "kernels whose launch is not in the trace"
        elif "GraphLaunch" in trace.name[launcher]:
            where = f"a graph replay ({trace.name[launcher]})"
        else:
            where = _where(trace, _scope(trace, launcher))
        call = Call(implementation, bool(re.search(patterns.GENERATED, name)), where, [d])
        calls.append(call)
        last[implementation, trace.thread[d]] = call
    return calls


def find_calls(trace: Trace) -> list[Call]:
    """Every attention call in the trace: ops, eager patterns, then kernels no call launched."""
    calls = _op_calls(trace)
    calls += _eager_calls(trace, calls)
    calls.sort(key=lambda c: c.start)
    shared = collections.Counter(c.scope for c in calls)
    for c in calls:  # a range around many calls (a whole step) is no one call's range
        c.scope = c.scope if shared[c.scope] == 1 else None
        c.region_start = c.start if c.scope is None else float(trace.ts[c.scope])
    claimed = {d for c in calls for d in c.device_rows}
    return calls + _kernel_calls(trace, claimed)


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


def _repeat_kv(trace: Trace, calls: list[Call]) -> tuple[int, None]:
    """repeat_interleave or repeat, or an expand made contiguous by a copying reshape, before a
    call in its scope."""
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
    return len(found), None


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
        found.append(f"q, k and v of different dtypes ({', '.join(types[:3])})")
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


CHECKS = {
    "out_of_place_masked_fill": _masked_fill,
    "eager_attention": _eager,
    "repeat_kv": _repeat_kv,
    "math_fallback": _math_fallback,
    "fp32_attention_on_gpu": _fp32,
    "sync_in_forward": _sync,
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
    found, unchecked = [], []
    for kind, check in CHECKS.items():
        count, detail = check(trace, with_cpu) if with_cpu else (None, NO_CPU_CALL)
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
    return found, unchecked


def attention_rows(trace: Trace, calls: list[Call]) -> list[dict]:
    """Calls grouped by implementation, compiled or not, and where they run."""
    groups: dict[tuple, list[Call]] = {}
    for c in calls:
        groups.setdefault((c.implementation, c.compiled, c.where), []).append(c)
    on_device = trace.has_device_activity
    rows = []
    for (implementation, compiled, where), group in groups.items():
        device = [d for c in group for d in c.device_rows]
        kernels = [d for d in device if trace.cat[d] == KERNEL]
        n = len(group)
        rows.append(
            {
                "implementation": implementation,
                "compiled": compiled,
                "where": where,
                "calls": n,
                "kernels_per_call": len(kernels) / n if on_device else None,
                "device_time_us_per_call": float(trace.dur[device].sum()) / n
                if on_device
                else None,
                "kernels": list(dict.fromkeys(trace.name[d] for d in kernels)),
            }
        )
    return rows


def diagnose(trace: Trace, teaching: Teaching = lambda kind: None) -> dict:
    """The report as data: the trace's facts, its attention, the findings and what went unchecked;
    `teaching` names the chapter that teaches a finding's fix (attn.specs.chapter_teaching)."""
    calls = find_calls(trace)
    found, unchecked = findings(trace, calls, teaching)
    return {
        "trace": {
            "device_name": device_name_of(trace.raw),
            "cpu_ops": "cpu_op" in trace.cat,
            "shapes": any("Input Dims" in a for a in trace.args),
            "device_activity": trace.has_device_activity,
        },
        "attention": attention_rows(trace, calls),
        "findings": found,
        "not_checked": unchecked,
    }


def shown(text: object) -> str:
    """A name from the trace for the terminal: no rich markup, no escape sequence."""
    return _markup(visible(str(text)))


def report(result: dict, console: Console) -> None:
    """The report as the terminal shows it: a table of attention, then findings, then gaps."""
    if not result["attention"]:
        console.print("No attention found in this trace.")
    else:
        table = Table(title="Attention", caption="kernels and device time: per call")
        for header in ("implementation", "compiled", "where", "calls", "kernels", "device time"):
            table.add_column(header, overflow="fold", no_wrap=header != "where")
        for r in result["attention"]:
            table.add_row(
                shown(r["implementation"]),
                "yes" if r["compiled"] else "no",
                shown(r["where"]),
                str(r["calls"]),
                "–" if r["kernels_per_call"] is None else count_text(r["kernels_per_call"]),
                "–"
                if r["device_time_us_per_call"] is None
                else time_text(r["device_time_us_per_call"]),
            )
        console.print(table)
        for r in result["attention"]:
            for kernel in r["kernels"]:
                console.print(
                    f"  {shown(r['implementation'])}: {shown(kernel)}",
                    overflow="ellipsis",
                    no_wrap=True,
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
