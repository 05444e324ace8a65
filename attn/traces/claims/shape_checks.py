"""Checks on what a run's recorded shapes and memory say: which ops take the [batch, heads, seq_q,
seq_k] scores, how many score matrices the peak holds, what is copied and freed, and what autograd
keeps for the backward. Shapes come from record_shapes, memory from profile_memory; without them a
check cannot tell (None). See attn.traces.claims.claim."""

from __future__ import annotations

import math

from attn.traces.claims.claim import Check
from attn.traces.claims.trace_checks import Evidence
from attn.traces.common.units import ELEMENT_BYTES, bytes_text
from attn.traces.read.patterns import CLONE, COPY, MUL, REPEAT_INTERLEAVE, SOFTMAX_OPS
from attn.traces.read.range_counts import memory_events
from attn.traces.read.trace import CPU_DEVICE_TYPE

NO_SHAPES = "input shapes not recorded (the trace was taken without record_shapes)"


def score_shape(ev: Evidence) -> tuple[list[int], str] | None:
    """The [batch, heads, seq_q, seq_k] shape of the score matrix and its dtype's name, from the
    recorded input shapes: the softmax's input, else q and k of the first op given both (a fused
    op). None when shapes were not recorded."""
    events = [e for f in ev.forwards for e in f.cpu_events if e.args.get("Input Dims")]
    for e in events:
        if e.name in SOFTMAX_OPS and len(e.args["Input Dims"][0]) == 4:
            return list(e.args["Input Dims"][0]), (e.args.get("Input type") or [""])[0]
    for e in events:
        dims = e.args["Input Dims"]
        if len(dims) >= 2 and len(dims[0]) == len(dims[1]) == 4 and dims[0][3] == dims[1][3]:
            (b, h, seq_q, _), seq_k = dims[0], dims[1][2]
            return [b, h, seq_q, seq_k], (e.args.get("Input type") or [""])[0]
    return None


def score_matrix_bytes(ev: Evidence) -> tuple[int, str] | None:
    """Bytes of one score matrix and a description of it; None when shapes were not recorded."""
    found = score_shape(ev)
    if found is None or found[1] not in ELEMENT_BYTES:
        return None
    dims, dtype = found
    return math.prod(dims) * ELEMENT_BYTES[dtype], f"{dims} {dtype}"


def on_scores(*names: str) -> Check:
    """Each op named takes the [batch, heads, seq_q, seq_k] scores as its first input."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = score_shape(ev)
        if found is None:
            return None, NO_SHAPES
        shapes = {name: ev.inputs(name) for name in names}
        missing = [n for n, dims in shapes.items() if found[0] not in dims]
        seen = "; ".join(f"{n} on {dims[0] if dims else 'nothing'}" for n, dims in shapes.items())
        return not missing, seen

    return check


def passes_over_scores(name: str, per_forward: int) -> Check:
    """`per_forward` calls of `name` per forward take the [batch, heads, seq_q, seq_k] scores as
    input: each reads a score matrix and writes one. Observed: the count and those bytes."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = score_matrix_bytes(ev)
        if found is None or not ev.forwards:
            return None, NO_SHAPES
        size, what = found
        dims = score_shape(ev)[0]
        calls = sum(d == dims for d in ev.inputs(name)) / len(ev.forwards)
        return calls == per_forward, (
            f"{calls:g} {name} per forward on the {what} scores: reads {bytes_text(calls * size)} "
            f"and writes {bytes_text(calls * size)}"
        )

    return check


def never_on_scores(name: str) -> Check:
    """Ops named `name` run, and none takes the [batch, heads, seq_q, seq_k] scores as input."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = score_shape(ev)
        if found is None:
            return None, NO_SHAPES
        dims = ev.inputs(name)
        shown = ", ".join(str(d) for d in dict.fromkeys(map(tuple, dims))) or "none"
        return bool(dims) and found[0] not in dims, f"{name} inputs: {shown}".replace(
            "(", "["
        ).replace(")", "]")

    return check


def peak_in_score_matrices(
    expected: int, at_least: bool = False, key: str = "peak_memory_bytes"
) -> Check:
    """The forward's peak memory (the summary's `key`, else its backward block's) holds `expected` score matrices at once (and
    less than one more; with at_least, any more); 0: the scores are never allocated."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        peak = ev.summary.get(key, (ev.summary.get("backward") or {}).get(key))
        if peak is None:
            return None, "memory not recorded (the trace was taken without profile_memory)"
        found = score_matrix_bytes(ev)
        if found is None:
            return None, NO_SHAPES
        scores, what = found
        ratio = peak / scores
        return (
            math.floor(ratio) >= expected if at_least else math.floor(ratio) == expected,
            f"peak {bytes_text(peak)} = {ratio:.2f} × one score matrix ({bytes_text(scores)}: {what})",
        )

    return check


def only_scalar_copies(ev: Evidence) -> tuple[bool | None, str]:
    """Every aten::copy_ copies a 0-dim tensor (a wrapped Python number), not the scores."""
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == COPY]
    if any("Input Dims" not in e.args for e in copies):
        return None, NO_SHAPES
    big = [e.args["Input Dims"][0] for e in copies if e.args["Input Dims"][0] != []]
    if big:
        return False, f"{COPY} of shape {big[0]}"
    per_fwd = len(copies) // max(len(ev.forwards), 1)
    return True, f"{per_fwd} {COPY} per forward, each of a 0-dim tensor"


def copies_of_scores_and_scalar(ev: Evidence) -> tuple[bool | None, str]:
    """aten::copy_ runs twice over: on the scores (under aten::clone) and on a 0-dim scalar (under
    aten::mul, the Python float converted to a tensor)."""
    found = score_shape(ev)
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == COPY]
    if found is None or any("Input Dims" not in e.args for e in copies):
        return None, NO_SHAPES
    shapes = {json_shape(e.args["Input Dims"][0]) for e in copies}
    parents = {name for name in (CLONE, MUL) if COPY in ev.under(name)}
    holds = {json_shape(found[0]), "[]"} <= shapes and parents == {CLONE, MUL}
    return holds, (
        f"{COPY} of {' and of '.join(sorted(shapes, key=len, reverse=True))}; "
        f"under {', '.join(sorted(parents)) or f'neither {CLONE} nor {MUL}'}"
    )


def json_shape(dims: list) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def frees_a_score_matrix(ev: Evidence) -> tuple[bool | None, str]:
    """Inside every forward a free of one score matrix or more: a [memory] event of minus that many
    bytes (a free is an instant event, not an op: the table has no row for it)."""
    found = score_matrix_bytes(ev)
    if not ev.forwards or found is None:
        return None, NO_SHAPES
    trace = ev.forwards[0].trace
    events = memory_events(trace.raw, 1 if trace.has_device_activity else CPU_DEVICE_TYPE)
    if not events:
        return None, "memory not recorded (the trace was taken without profile_memory)"
    largest = [
        -min((b for ts, b in events if f.range.ts <= ts <= f.range.end), default=0)
        for f in ev.forwards
    ]
    scores, what = found
    return min(largest) >= scores, (
        f"each forward frees {bytes_text(min(largest))} or more at once; one score matrix is "
        f"{bytes_text(scores)} ({what})"
    )


def backward_allocates_under_a_score_matrix(ev: Evidence) -> tuple[bool | None, str]:
    """No single allocation inside the backward ranges (attn_bwd) reaches one score matrix, sized
    from the forward's recorded shapes: the backward never makes a score-sized tensor."""
    found = score_matrix_bytes(ev)
    if found is None:
        return None, NO_SHAPES
    if not ev.backwards:
        return None, "no backward recorded (no attn_bwd range)"
    trace = ev.backwards[0].trace
    events = memory_events(trace.raw, 1 if trace.has_device_activity else CPU_DEVICE_TYPE)
    if not events:
        return None, "memory not recorded (the trace was taken without profile_memory)"
    largest = max(
        (b for f in ev.backwards for ts, b in events if f.range.ts <= ts <= f.range.end), default=0
    )
    scores, what = found
    return largest < scores, (
        f"largest allocation in the backward {bytes_text(largest)}; one score matrix is "
        f"{bytes_text(scores)} ({what})"
    )


def _numel(dims: list) -> int:
    return math.prod(dims) if dims else 1


def _repeats(ev: Evidence) -> list[list[tuple]]:
    """Per forward: (repeat_interleave event, the aten::copy_ events beneath it)."""
    found = []
    for f in ev.forwards:
        copies = [e for e in f.cpu_events if e.name == COPY]
        found.append(
            [
                (r, [c for c in copies if r.contains(c)])
                for r in f.cpu_events
                if r.name == REPEAT_INTERLEAVE
            ]
        )
    return found


def repeat_copies(expected: int) -> Check:
    """`expected` aten::repeat_interleave per forward, each copying at least its whole input."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        per_forward = _repeats(ev)
        counts = sorted({len(r) for r in per_forward})
        if counts != [expected]:
            seen = " or ".join(str(n) for n in counts) or "no"
            return False, f"{seen} {REPEAT_INTERLEAVE} per forward"
        pairs = [pair for forward in per_forward for pair in forward]
        if any("Input Dims" not in r.args for r, _ in pairs):
            return None, NO_SHAPES
        for r, copies in pairs:
            source = _numel(r.args["Input Dims"][0])
            copied = max((_numel(c.args["Input Dims"][0]) for c in copies), default=0)
            if copied < source:
                return False, f"{REPEAT_INTERLEAVE} of {r.args['Input Dims'][0]} copied less"
        r, copies = pairs[0]
        dims = copies[0].args["Input Dims"][0]
        ratio = _numel(dims) / _numel(r.args["Input Dims"][0])
        return True, (
            f"{expected} {REPEAT_INTERLEAVE} per forward, each an {COPY} of {dims} "
            f"({ratio:g}x the cache it repeats, {r.args['Input Dims'][0]})"
        )

    return check


def peak_holds_the_copies(ev: Evidence) -> tuple[bool | None, str]:
    """A forward's peak memory is at least the bytes the repeat_interleave copies wrote."""
    peak = ev.summary.get("peak_memory_bytes")
    if peak is None:
        return None, "no memory events (the trace was taken without profile_memory)"
    pairs = [pair for forward in _repeats(ev)[:1] for pair in forward]
    if not pairs or any("Input Dims" not in c.args for _, cs in pairs for c in cs):
        return None, "no recorded repeat_interleave copies to size"
    copied = 0
    for _, copies in pairs:
        for c in copies:
            kind = (c.args.get("Input type") or ["float"])[0]
            copied += _numel(c.args["Input Dims"][0]) * ELEMENT_BYTES.get(kind, 4)
    return peak >= copied, f"peak {bytes_text(peak)}; the copies {bytes_text(copied)}"


# --- what autograd kept for the backward ------------------------------------------------------


SCORE_SIZED, ROW_STATISTIC, INPUT_SIZED = "score-sized", "one per query row", "q-sized"


def _saved_roles(ev: Evidence) -> list[tuple[str, dict]] | None:
    """Each tensor autograd saved for the backward, with what its size makes it; None when the
    run recorded none (only a training run does)."""
    saved = (ev.summary.get("backward") or {}).get("saved_for_backward")
    shape = ev.summary.get("shape")
    if saved is None or not shape:
        return None
    b, h, sq, sk, d = (shape[k] for k in ("batch", "heads", "seq_q", "seq_k", "head_dim"))

    def role(dims: list[int]) -> str:
        n = math.prod(dims)
        if n >= b * h * sq * sk:
            return SCORE_SIZED
        if dims == [b, h, sq]:
            return ROW_STATISTIC
        if dims == [sq, sk]:
            return "seq_q × seq_k"
        return INPUT_SIZED if n in (b * h * sq * d, b * h * sk * d) else "other"

    return [(role(row["shape"]), row) for row in saved]


def keeps(*roles: str, lacks: tuple[str, ...] = ()) -> Check:
    """Autograd saves, for the backward, a tensor of each of `roles` and none of `lacks`: by size,
    SCORE_SIZED ([batch, heads, seq_q, seq_k] or more elements), ROW_STATISTIC ([batch, heads,
    seq_q]), INPUT_SIZED (as many elements as q, k or v), "seq_q × seq_k" or "other"."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = _saved_roles(ev)
        if found is None:
            return None, "no saved tensors recorded (a training run records them)"
        seen = {role for role, _ in found}
        total = bytes_text(sum(row["bytes"] for _, row in found))
        shown = "; ".join(
            f"{json_shape(row['shape'])} {row['dtype']} ({role})" for role, row in found
        )
        holds = set(roles) <= seen and not set(lacks) & seen
        return holds, f"{total} saved in {len(found)} tensor(s): {shown}"

    return check


def score_sized_input(name: str) -> Check:
    """An event called `name` takes a first input of one score matrix's elements (by the run's
    shape, so it holds for the [batch * heads, seq_q, seq_k] views of a matmul too)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        shape = ev.summary.get("shape")
        if not shape:
            return None, "the run's shape is not recorded"
        scores = math.prod(shape[k] for k in ("batch", "heads", "seq_q", "seq_k"))
        dims = ev.inputs(name)
        hits = [d for d in dims if _numel(d) == scores]
        shown = json_shape((hits or dims or [[]])[0]) if dims else "nothing"
        return bool(hits), f"{name} of {shown}"

    return check
