"""What an op's recorded inputs say (record_shapes): their dtypes and bytes, the shape and dtype a
factory op was given, and what in SDPA's inputs rules its fused backends out. Where the trace did
not record them, None or nothing: what cannot be read is not guessed at. attn.traces.diagnosis's
findings read them; the shapes themselves are attn.traces.diagnosis.eager_scores.tensor_dims.
"""

from __future__ import annotations

import math
import re

from attn.traces.common.units import PROFILER_DTYPES, RECORDED_BYTES
from attn.traces.diagnosis import eager_scores
from attn.traces.diagnosis.calls import Call
from attn.traces.read import patterns
from attn.traces.read.trace import Trace


def factory_shape(args: dict) -> tuple[list[int], str | None] | None:
    """The shape and dtype a factory op was given (its concrete inputs: "[8, 1, 128, 128]", then
    the dtype's number), where recorded."""
    concrete = args.get("Concrete Inputs")
    if not isinstance(concrete, list):
        return None
    for i, value in enumerate(concrete):
        if isinstance(value, str) and re.fullmatch(r"\[\d+(, \d+)+\]", value):
            dtype = concrete[i + 1] if i + 1 < len(concrete) else None
            return [int(n) for n in value[1:-1].split(", ")], patterns.SCALAR_TYPES.get(dtype)
    return None


def concrete(args: dict, index: int) -> str | None:
    """An op's concrete input (a scalar argument, as the profiler spells it), where recorded."""
    found = args.get("Concrete Inputs")
    ok = isinstance(found, list) and index < len(found) and isinstance(found[index], str)
    return found[index] if ok and found[index] else None


def tensor_bytes(dims: list[int], dtype: str | None) -> int:
    """The bytes of a tensor of this shape and recorded dtype (0 where the dtype is unknown)."""
    return RECORDED_BYTES.get(dtype or "", 0) * math.prod(dims)


def input_type(trace: Trace, row: int, index: int) -> str | None:
    """The recorded dtype of an op's input, in the profiler's spelling, where recorded."""
    types = trace.args[row].get("Input type")
    return types[index] if isinstance(types, list) and index < len(types) else None


def input_bytes(trace: Trace, row: int, index: int) -> int | None:
    """The bytes of an op's input, from its recorded shape and dtype."""
    dims = eager_scores.tensor_dims(trace.args[row])
    size = RECORDED_BYTES.get(input_type(trace, row, index) or "")
    return None if size is None or index >= len(dims) else size * math.prod(dims[index])


def inputs(args: dict) -> tuple[list, list] | None:
    """(Input Dims, Input type) as the profiler records them, a list of int lists and a list of
    names; None where absent or malformed (what cannot be read is not guessed at)."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    ints = lambda d: isinstance(d, list) and all(type(x) is int for x in d)  # noqa: E731
    if not (isinstance(dims, list) and all(ints(d) for d in dims)):
        return None
    if not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        return None
    return dims, types


def fused_refusals(args: dict) -> list[str]:
    """What in SDPA's recorded inputs rules its fused backends out."""
    dims, types = inputs(args) or ([], [])
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


def first_input_dtype(trace: Trace, c: Call) -> str | None:
    """The dtype the call's first input is computed in: as the profiler recorded it, unless
    autocast casts it just under the call's op; in torch's spelling."""
    if c.row is not None and (cast := autocast_dtype(trace, c.row)):
        return cast
    types = trace.args[c.row].get("Input type") if c.row is not None else None
    first = types[0] if isinstance(types, list) and types else None
    return PROFILER_DTYPES.get(first) if isinstance(first, str) else None


def head_dim(trace: Trace, c: Call) -> int | None:
    """The head dim the call's op was given (q's last dimension), where recorded."""
    dims = eager_scores.tensor_dims(trace.args[c.row])
    return dims[0][-1] if dims and dims[0] else None


def score_size(trace: Trace, c: Call) -> tuple[int, int] | None:
    """(seq_q, seq_k) of the call: its softmax's input (eager), else q's and k's sequences."""
    if c.softmax is not None:
        shape = eager_scores.softmax_input(trace, c.softmax)
        return (shape[-2], shape[-1]) if shape else None
    dims = eager_scores.tensor_dims(trace.args[c.row]) if c.row is not None else []
    if len(dims) >= 2 and len(dims[0]) >= 3 and len(dims[1]) >= 3:
        return dims[0][-2], dims[1][-2]
    return None


def autocast_dtype(trace: Trace, row: int) -> str | None:
    """The lower precision an op's first input is cast to right under it, as autocast does (the
    op records float32 inputs; an aten::to just under it casts them), in torch's spelling."""
    for r in trace.thread_within(row, trace.ts[row], trace.end[row]).tolist():
        if int(trace.parent[r]) != row or trace.name[r] not in patterns.CAST_OPS:
            continue
        dtype = PROFILER_DTYPES.get(patterns.SCALAR_TYPES.get(concrete(trace.args[r], 1), ""))
        if dtype in ("float16", "bfloat16"):
            return dtype
    return None


def autocast_casts(trace: Trace) -> int:
    """The ops in the trace whose inputs autocast casts to a lower precision (a product, a
    linear, SDPA): where there are any, autocast is on."""
    casts = [i for i, n in enumerate(trace.name) if n in patterns.CAST_OPS]
    held = {int(trace.parent[i]) for i in casts if trace.parent[i] >= 0}
    return sum(
        trace.name[r] in patterns.AUTOCAST_OPS and autocast_dtype(trace, r) is not None
        for r in held
    )


def padded_into(trace: Trace, c: Call, dims: list[int]) -> bool:
    """A tensor of these dims becomes one of the call's inputs once padded: the same leading dims
    as q, k or v, a smaller last one."""
    given = eager_scores.tensor_dims(trace.args[c.row])[:3]
    return any(len(g) == len(dims) and g[:-1] == dims[:-1] and dims[-1] < g[-1] for g in given)
