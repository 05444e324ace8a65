"""A call's preparation: the work before it that made its inputs, charged to it by kind.

What ran since the call before it on its thread (Call.since: never further back, so work done for
another call, or outside attention, is no call's) and is tied to the call by data flow, as far as
the trace records it (shapes; it keeps no storage for ops): K and V repeated up to the call's
heads or batch (KV_REPEATED), and a position bias (or a mask) built from aten::arange and
arithmetic into a tensor of the scores' last two dims that the call takes (ARANGE_BIAS). `charge` sets each call's
`prepared`; the report's rows show it per call with its device time, and its kernels are no
longer listed among those no call explains.
"""

from __future__ import annotations

import itertools

from attn.traces.diagnosis import eager_scores
from attn.traces.diagnosis.calls import FORWARD, Call, inside, launched
from attn.traces.diagnosis.recorded_inputs import score_size
from attn.traces.read import patterns
from attn.traces.read.trace import MEMCPY, Trace

KV_REPEATED, ARANGE_BIAS = "K/V repeated", "mask or bias built from arange"
ARANGE = "aten::arange"


def repeats(trace: Trace, c: Call, start: float) -> list[tuple[int, list[int]]]:
    """The repeats from `start` to the call: a repeat op, or the copying op after an expand, each
    with the shape of the tensor repeated (a mask, as big as the scores, left out)."""
    size = score_size(trace, c)
    found = []
    ops = _outer(trace, c, start)
    for a, b in itertools.pairwise([*ops, None]):
        dims = (eager_scores.tensor_dims(trace.args[a]) or [[]])[0]
        if size is not None and dims[-2:] == list(size):
            continue
        if trace.name[a] in patterns.REPEAT_OPS:
            found.append((a, dims))
        elif trace.name[a] == patterns.EXPAND and b is not None and copies(trace, b):
            found.append((b, dims))
    return found


def _outer(trace: Trace, c: Call, start: float) -> list[int]:
    """The CPU ops from `start` to the call that no other of them holds (the call's own left out)."""
    window = [r for r in inside(trace, c.row, start, c.start).tolist()]
    window = [r for r in window if trace.cat[r] == "cpu_op" and r != c.row]
    within = set(window)  # once: a range of a million tiny ops made this quadratic
    return [r for r in window if trace.parent[r] not in within]


def copies(trace: Trace, row: int) -> bool:
    """The op copies memory: an aten::clone or aten::copy_ under it, or a Memcpy it launched."""
    under = inside(trace, row, trace.ts[row], trace.end[row])
    device = launched(trace, row, trace.ts[row], trace.end[row])
    return any(trace.name[r] in patterns.COPY_OPS for r in under if r != row) or any(
        trace.cat[d] == MEMCPY for d in device
    )


def batch(trace: Trace, c: Call) -> int | None:
    """The call's batch: its first input's leading dimension, where recorded."""
    dims = eager_scores.tensor_dims(trace.args[c.row]) if c.row is not None else []
    return dims[0][0] if dims and len(dims[0]) >= 3 else None


def over_batch(trace: Trace, c: Call, dims: list[int]) -> bool:
    """K or V (or the source they are projected from: [.., seq_k, channels], or an image
    [.., channels, height, width] whose height by width are the keys) repeated up to the call's
    batch: its leading dimension smaller and dividing it."""
    n, size = batch(trace, c), score_size(trace, c)
    if n is None or size is None or len(dims) < 3:
        return False
    image = min(dims[-2:]) > 1 and dims[-2] * dims[-1] == size[1]  # a mask's [.., 1, seq_k] is not
    keys = dims[-2] == size[1] or image
    return 0 < dims[0] < n and n % dims[0] == 0 and keys


def over_heads(trace: Trace, c: Call, dims: list[int]) -> bool:
    """K or V [batch, kv_heads, seq_k, head_dim] repeated up to the call's heads: the call's k in
    all but its heads, fewer heads than q's, dividing them (eager's k is transposed: not read)."""
    given = eager_scores.tensor_dims(trace.args[c.row])
    if c.implementation == "eager" or len(given) < 2 or len(dims) != 4:
        return False
    q, k = given[0], given[1]
    if len(q) != 4 or len(k) != 4:
        return False
    return dims[0] == k[0] and dims[2:] == k[2:] and 0 < dims[1] < q[1] and q[1] % dims[1] == 0


def kv_repeats(trace: Trace, c: Call) -> dict[int, str]:
    """The call's K and V repeats, each "heads" or "batch": any repeat in its own range (not over
    the batch), and since the call before on its thread, those whose shape ties them to it."""
    found = {r: "heads" for r, dims in repeats(trace, c, c.region_start)}
    for r, dims in repeats(trace, c, c.since):
        if over_batch(trace, c, dims):
            found[r] = "batch"
        elif over_heads(trace, c, dims):
            found[r] = "heads"
    return found


def _sized(d: list[int], size: tuple[int, int]) -> bool:
    return len(d) >= 2 and tuple(d[-2:]) == size


def _positional(d: list[int], size: tuple[int, int]) -> bool:
    """A tensor of positions' shape, ones aside: [seq], [seq_q, seq_k] and anything ending in it,
    or [seq_q, seq_k, heads] (a bias looked up before it is permuted)."""
    kept = [n for n in d if n != 1]
    return kept in ([size[0]], [size[1]]) or (
        len(kept) >= 2 and size in (tuple(kept[-2:]), tuple(kept[:2]))
    )


def _takes_bias(trace: Trace, c: Call, size: tuple[int, int]) -> bool:
    """The call takes a tensor of the scores' last two dims besides the scores: an op's mask
    (after q, k and v), or in eager attention a term that reads two of them (scores + bias)."""
    if c.implementation == "eager":
        return any(
            sum(_sized(d, size) for d in eager_scores.tensor_dims(trace.args[r])) >= 2
            for r in c.terms
        )
    return any(_sized(d, size) for d in eager_scores.tensor_dims(trace.args[c.row])[3:])


def arange_bias(trace: Trace, c: Call) -> list[int]:
    """The ops since the call before that build, from aten::arange, a tensor of the scores' last
    two dims the call takes: each run from an arange through the arithmetic after it on tensors
    of positions' shapes (views pass; any other op that works ends the run), where one of them is
    the size of the scores (position ids looked up into embeddings are not)."""
    size = score_size(trace, c) if c.row is not None else None
    if size is None or min(size) <= 1 or not _takes_bias(trace, c, size):
        return []
    found: list[int] = []
    run: list[int] = []
    for r in [*_outer(trace, c, c.since), None]:
        name = None if r is None else trace.name[r]
        if name == ARANGE:
            run.append(r)
            continue
        if run and name in patterns.BOOKKEEPING_OPS:
            continue  # a view: no work, and the run goes on through it
        dims = [] if r is None else eager_scores.tensor_dims(trace.args[r])
        if run and name not in patterns.NOT_MASK_WORK and any(_positional(d, size) for d in dims):
            run.append(r)
            continue
        shapes = (d for x in run for d in eager_scores.tensor_dims(trace.args[x]))
        found += run if any(_sized(d, size) for d in shapes) else []
        run = []
    return found


def charge(trace: Trace, calls: list[Call]) -> None:
    """Set each call's preparation: its ops by kind (only kinds it has)."""
    for c in calls:
        if c.row is None or c.pass_ != FORWARD:
            continue
        found = {KV_REPEATED: sorted(kv_repeats(trace, c)), ARANGE_BIAS: arange_bias(trace, c)}
        c.prepared = {what: rows for what, rows in found.items() if rows}


def device_rows(trace: Trace, c: Call) -> dict[str, list[int]]:
    """The device work of the call's preparation, by kind."""
    return {
        what: [d for r in rows for d in launched(trace, r, trace.ts[r], trace.end[r])]
        for what, rows in c.prepared.items()
    }
