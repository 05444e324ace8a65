"""Claims and the checks they are built from: logic only; the claims themselves live in attn.specs.

A claim is a sentence plus a check over evidence: a run's trace (its summary and recorded forwards)
or, for a benchmark claim, the rows of a hardware set's benchmark.json. The check returns whether
the claim holds (True, False, or None when the evidence cannot tell) and what was observed; a claim
that does not hold is a finding, not an error. This module imports nothing that names a variant.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable

import numpy as np

from attn.traces import intervals
from attn.traces.backward import as_forward
from attn.traces.trace import (
    BACKWARD_RANGE,
    CPU_DEVICE_TYPE,
    EPS_US,
    KERNEL,
    Forward,
    Trace,
    memory_events,
    top_level,
)
from attn.traces.units import bytes_text, count_text, time_text


@dataclasses.dataclass
class Evidence:
    """What a claim may look at: the run's summary and its recorded forwards."""

    summary: dict
    forwards: list[Forward]

    def inputs(self, name: str) -> list[list[int]]:
        """The first input's shape of every event called `name` that recorded shapes."""
        return [
            e.args["Input Dims"][0]
            for f in self.forwards
            for e in f.cpu_events
            if e.name == name and e.args.get("Input Dims")
        ]

    def names(self) -> set[str]:
        """Every CPU event name seen under attn_fwd, in any forward."""
        return {e.name for f in self.forwards for e in f.cpu_events}

    def under(self, parent: str) -> set[str]:
        """Names of the events nested under any event called `parent`."""
        found: set[str] = set()
        for f in self.forwards:
            for p in (e for e in f.cpu_events if e.name == parent):
                found |= {e.name for e in f.cpu_events if e is not p and p.contains(e)}
        return found

    def kernels(self) -> list[str]:
        """The first forward's kernels, in launch order (the summary lists only the first few)."""
        if self.forwards:
            return [e.name for e in self.forwards[0].of_kind(KERNEL)]
        return self.summary.get("kernels") or []

    @functools.cached_property
    def backwards(self) -> list[Forward]:
        """The backward ranges (attn_bwd) of the trace the forwards come from, any thread's ops."""
        return (
            self.forwards[0].trace.forwards(BACKWARD_RANGE, any_thread=True)
            if self.forwards
            else []
        )


Check = Callable[[Evidence], tuple[bool, str]]
NO_SHAPES = "input shapes not recorded (the trace was taken without record_shapes)"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A sentence about a variant's trace, keyed by a short name unique within the variant: the
    name a chapter's `<!-- profile-claim: VARIANT KEY -->` marker uses."""

    key: str
    device_type: str  # "cpu" or "cuda": the hardware the sentence is about
    text: str
    check: Check
    # True when the verdict needs a run large enough for the score matrix to dominate (times, gaps
    # between ops, fixed-size tile buffers): checked on every run like any claim, but a test's tiny
    # run cannot be expected to show it.
    at_scale: bool = False


# Building blocks. Each returns (holds, observed).
def op_under(parent: str, child: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        holds = child in ev.under(parent)
        return holds, f"{child} {'found' if holds else 'not found'} under {parent}"

    return check


def only_under(parent: str, *allowed: str) -> Check:
    """`parent` runs, and nothing but `allowed` (none: nothing at all) runs under it."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if parent not in ev.names():
            return False, f"no {parent}"
        extra = sorted(ev.under(parent) - set(allowed))
        return not extra, f"under {parent}: {', '.join(sorted(ev.under(parent))) or 'nothing'}"

    return check


def absent(*names: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        seen = sorted(set(names) & ev.names())
        return not seen, f"seen: {', '.join(seen)}" if seen else f"none of {', '.join(names)}"

    return check


def present(*names: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        missing = sorted(set(names) - ev.names())
        return (
            not missing,
            f"missing: {', '.join(missing)}" if missing else f"seen: {', '.join(names)}",
        )

    return check


def only_scalar_copies(ev: Evidence) -> tuple[bool | None, str]:
    """Every aten::copy_ copies a 0-dim tensor (a wrapped Python number), not the scores."""
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == "aten::copy_"]
    if any("Input Dims" not in e.args for e in copies):
        return None, NO_SHAPES
    big = [e.args["Input Dims"][0] for e in copies if e.args["Input Dims"][0] != []]
    if big:
        return False, f"aten::copy_ of shape {big[0]}"
    per_fwd = len(copies) // max(len(ev.forwards), 1)
    return True, f"{per_fwd} aten::copy_ per forward, each of a 0-dim tensor"


def copies_of_scores_and_scalar(ev: Evidence) -> tuple[bool | None, str]:
    """aten::copy_ runs twice over: on the scores (under aten::clone) and on a 0-dim scalar (under
    aten::mul, the Python float converted to a tensor)."""
    found = score_shape(ev)
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == "aten::copy_"]
    if found is None or any("Input Dims" not in e.args for e in copies):
        return None, NO_SHAPES
    shapes = {json_shape(e.args["Input Dims"][0]) for e in copies}
    parents = {name for name in ("aten::clone", "aten::mul") if "aten::copy_" in ev.under(name)}
    holds = {json_shape(found[0]), "[]"} <= shapes and parents == {"aten::clone", "aten::mul"}
    return holds, (
        f"aten::copy_ of {' and of '.join(sorted(shapes, key=len, reverse=True))}; "
        f"under {', '.join(sorted(parents)) or 'neither aten::clone nor aten::mul'}"
    )


def json_shape(dims: list) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def top_level_ops(*names: str) -> Check:
    """Every forward's own ops (those directly under the range) are exactly these, in this order."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        seen = [[e.name for e in top_level(f)] for f in ev.forwards]
        holds = all(ops == list(names) for ops in seen)
        odd = next((ops for ops in seen if ops != list(names)), seen[0])
        return holds, " → ".join(odd) or "no ops"

    return check


def kernel_count(expected: int, at_least: bool = False) -> Check:
    """`expected` kernels per forward (or more, with at_least); memcpys and memsets are apart."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        return (n >= expected if at_least else n == expected), f"{n:g} kernels per forward"

    return check


def one_kernel_matching(pattern: str) -> Check:
    """Exactly one kernel per forward, and its name matches `pattern` (a regular expression)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        names = ev.kernels()
        hits = [k for k in names if re.search(pattern, k)]
        shown = (hits or names or ["no kernels"])[0][:90]
        return (n == 1 and len(hits) == 1), f"{n:g} kernel(s) per forward; {shown}"

    return check


def kernel_matching(pattern: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        hits = [k for k in ev.kernels() if re.search(pattern, k)]
        return bool(hits), (hits[0][:90] if hits else f"no kernel matching {pattern}")

    return check


def memcpys(direction: str, expected: int) -> Check:
    """`expected` memcpys per forward in that direction (DtoD, HtoD, DtoH), and no other memcpy."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        counts = ev.summary.get("memcpy_per_forward")
        if counts is None:
            return None, "no device activity recorded"
        others = {d: n for d, n in counts.items() if d != direction and n}
        seen = ", ".join(f"{n:g} {d}" for d, n in counts.items() if n) or "no Memcpy"
        return counts.get(direction, 0) == expected and not others, f"{seen} per forward"

    return check


def launched_with(api: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        apis = sorted({e.name for f in ev.forwards for e in f.runtime_calls if "Launch" in e.name})
        return api in apis, f"launch APIs: {', '.join(apis) or 'none'}"

    return check


# Bytes per element of the dtypes the profiler names in "Input type".
ELEMENT_BYTES = {"double": 8, "float": 4, "c10::BFloat16": 2, "c10::Half": 2}


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


def costs_more(slow: str, fast: str) -> Check:
    """Per forward, the events named `slow` take more CPU time (inclusive) than those named `fast`."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = max(len(ev.forwards), 1)
        times = {
            name: sum(e.dur for f in ev.forwards for e in f.cpu_events if e.name == name) / n
            for name in (slow, fast)
        }
        if not times[slow] or not times[fast]:
            missing = [name for name, t in times.items() if not t]
            return None, f"not in the trace: {', '.join(missing)}"
        ratio = times[slow] / times[fast]
        return (
            ratio > 1,
            f"{slow} {time_text(times[slow])}, {fast} {time_text(times[fast])} per forward ({ratio:.1f}×)",
        )

    return check


END = "the end"  # where a gap is: after the range's last op, before the range itself ends


def gaps(forward: Forward) -> dict[str, float]:
    """Time between the range's top-level ops, keyed by where: 'after aten::x' or END."""
    found: dict[str, float] = {}
    previous, end = "the start", forward.range.ts
    for e in top_level(forward):
        where = f"after {previous}"
        found[where] = found.get(where, 0.0) + max(e.ts - end, 0.0)
        previous, end = e.name, e.end
    found[END] = found.get(END, 0.0) + max(forward.range.end - end, 0.0)
    return found


def longest_gaps(*where: str, alone: bool = False) -> Check:
    """In every forward the longest gaps between ops are at `where` (and, with alone, every other
    gap is under a tenth of the shortest of them)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        holds = True
        for f in ev.forwards:
            ranked = sorted(gaps(f).items(), key=lambda kv: -kv[1])
            top, rest = ranked[: len(where)], ranked[len(where) :]
            holds &= {w for w, _ in top} == set(where)
            if alone and rest and top:
                holds &= rest[0][1] < 0.1 * top[-1][1]
        n = len(ev.forwards)
        mean: dict[str, float] = {}
        for f in ev.forwards:
            for w, t in gaps(f).items():
                mean[w] = mean.get(w, 0.0) + t / n
        ranked = sorted(mean.items(), key=lambda kv: -kv[1])
        self_us = sum(mean.values())
        total = sum(f.range.dur for f in ev.forwards) / n
        shown = ", ".join(
            f"{time_text(t)} {'at the end' if w == END else w}" for w, t in ranked[: len(where) + 1]
        )
        return holds, (
            f"{time_text(self_us)} per forward in no op ({self_us / total:.0%} of attn_fwd); "
            f"longest gaps: {shown}"
        )

    return check


def both(*checks: Check) -> Check:
    """All checks hold; None (cannot tell) when one cannot tell and none fails."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        results = [c(ev) for c in checks]
        holds = [h for h, _ in results]
        verdict = False if False in holds else (None if None in holds else True)
        return verdict, "; ".join(dict.fromkeys(o for _, o in results))

    return check


FUSED_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"
SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")


def ops_per_forward(name: str, expected: int) -> Check:
    """Exactly `expected` events called `name` in every forward."""

    def check(ev: Evidence) -> tuple[bool, str]:
        counts = sorted({sum(e.name == name for e in f.cpu_events) for f in ev.forwards})
        seen = " or ".join(str(n) for n in counts) or "0"
        return counts == [expected], f"{seen} {name} per forward"

    return check


def generated_kernel(pattern: str) -> Check:
    """A CPU event whose name matches `pattern` (Inductor names its generated kernels this way)."""

    def check(ev: Evidence) -> tuple[bool, str]:
        hits = sorted({n for n in ev.names() if re.search(pattern, n)})
        return bool(hits), hits[0] if hits else f"no event matching {pattern}"

    return check


COMPILED_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def runs_a_recompilation(ev: Evidence) -> tuple[bool, str]:
    """The forwards run in a Torch-Compiled Region numbered <frame>/1 or later: a recompilation.
    The frame number counts the functions compiled before in the process, so only the second
    number says anything about this variant."""
    regions = sorted({n for n in ev.names() if COMPILED_REGION.match(n)})
    if not regions:
        return False, "no Torch-Compiled Region"
    holds = all(int(COMPILED_REGION.match(n)[2]) >= 1 for n in regions)
    return holds, ", ".join(regions)


def compile_costs_forwards(at_least: int) -> Check:
    """The first call (tracing, code generation and build, or a load from Inductor's cache) costs
    at least `at_least` profiled forwards."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        seconds = (ev.summary.get("first_calls_seconds") or {}).get("first")
        if seconds is None:
            return None, "the first call was not timed (a run of the example times it)"
        ratio = seconds * 1e6 / ev.summary["cpu_time_us"]
        return ratio >= at_least, f"first call {seconds:.2f} s = {ratio:,.0f} profiled forwards"

    return check


def second_call_cheaper(factor: int) -> Check:
    """The second call costs under 1/`factor` of the first: the code compiled by the first is reused."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        calls = ev.summary.get("first_calls_seconds") or {}
        if calls.get("second") is None:
            return None, "the first calls were not timed (a run of the example times them)"
        ratio = calls["first"] / max(calls["second"], 1e-9)
        return ratio > factor, f"first call {calls['first']:.2f} s, second {calls['second']:.3f} s"

    return check


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


SDPA_OPS = (
    FUSED_CPU,
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
)

# A kernel that copies memory: the elementwise direct_copy kernel a clone or copy_ launches.
COPY_KERNEL = r"(?i)copy"


def _numel(dims: list) -> int:
    return math.prod(dims) if dims else 1


def _repeats(ev: Evidence) -> list[list[tuple]]:
    """Per forward: (repeat_interleave event, the aten::copy_ events beneath it)."""
    found = []
    for f in ev.forwards:
        copies = [e for e in f.cpu_events if e.name == "aten::copy_"]
        found.append(
            [
                (r, [c for c in copies if r.contains(c)])
                for r in f.cpu_events
                if r.name == "aten::repeat_interleave"
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
            return False, f"{seen} aten::repeat_interleave per forward"
        pairs = [pair for forward in per_forward for pair in forward]
        if any("Input Dims" not in r.args for r, _ in pairs):
            return None, NO_SHAPES
        for r, copies in pairs:
            source = _numel(r.args["Input Dims"][0])
            copied = max((_numel(c.args["Input Dims"][0]) for c in copies), default=0)
            if copied < source:
                return False, f"aten::repeat_interleave of {r.args['Input Dims'][0]} copied less"
        r, copies = pairs[0]
        dims = copies[0].args["Input Dims"][0]
        ratio = _numel(dims) / _numel(r.args["Input Dims"][0])
        return True, (
            f"{expected} aten::repeat_interleave per forward, each an aten::copy_ of {dims} "
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


def copy_kernels(expected: int) -> Check:
    """Exactly `expected` kernels per forward whose names say they copy."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        hits = [k for k in ev.kernels() if re.search(COPY_KERNEL, k)]
        shown = f": {hits[0][:70]}" if hits else ""
        n = ev.summary["kernels_per_forward"]
        return len(hits) == expected, f"{len(hits)} copy kernel(s) of {n:g} per forward{shown}"

    return check


# --- a training step: the backward, and what autograd kept for it -----------------------------


def in_backward(check: Check) -> Check:
    """`check` run on the backward ranges (attn_bwd), reading the summary's backward block."""

    def run(ev: Evidence) -> tuple[bool | None, str]:
        block = ev.summary.get("backward")
        if not block or not ev.backwards:
            return None, "no backward recorded (no attn_bwd range)"
        return check(Evidence({**ev.summary, **as_forward(block)}, ev.backwards))

    return run


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


def backward_over_forward(at_least: float) -> Check:
    """The backward takes at least `at_least` times the forward's time (device time where it was
    measured, else CPU time), mean over the steps."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        block = ev.summary.get("backward") or {}
        key = "device_time_us" if block.get("device_time_us") is not None else "cpu_time_us"
        fwd, bwd = ev.summary.get(key), block.get(key)
        if not fwd or not bwd:
            return None, "no backward recorded (no attn_bwd range)"
        where = "device" if key == "device_time_us" else "CPU"
        return bwd / fwd >= at_least, (
            f"{where} time per step: backward {time_text(bwd)}, forward {time_text(fwd)} "
            f"({bwd / fwd:.1f}×)"
        )

    return check


# --- claims about a hardware set's benchmark.json ---------------------------------------------


@dataclasses.dataclass
class BenchmarkEvidence:
    """What a benchmark claim may look at: the set's benchmark rows, and which variant it is about."""

    variant: str
    rows: list[dict]


@dataclasses.dataclass(frozen=True)
class BenchmarkClaim(Claim):
    """A sentence about the variant's rows in a set's `<figure>.json` (benchmark.json unless said),
    checked when the site is built against each set that has that figure; its check takes a
    BenchmarkEvidence."""

    figure: str = "benchmark"


def _span(values: list) -> str:
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]} to {values[-1]}"


def benchmark_shapes(rows: list[dict]) -> str:
    """What the rows measured, in words: 'batch 1 × 8 heads, seq 512 to 4096, head_dim 64, 128,
    float32 and bfloat16' (dtypes where the rows record them)."""
    sizes = sorted({(r.get("batch"), r.get("heads")) for r in rows})
    size = ", ".join(f"batch {b} × {h} heads" for b, h in sizes if b is not None and h is not None)
    dims = ", ".join(str(d) for d in sorted({r["head_dim"] for r in rows}))
    dtypes = " and ".join(dict.fromkeys(r["dtype"] for r in rows if r.get("dtype")))
    parts = [size] if size else []
    parts += [f"seq {_span([r['seq'] for r in rows])}", f"head_dim {dims}"]
    return ", ".join(parts + ([dtypes] if dtypes else []))


def _where(r: dict) -> str:
    """One benchmarked shape in words: 'seq 2048, head_dim 64', after its dtype where recorded."""
    shape = f"seq {r['seq']}, head_dim {r['head_dim']}"
    return f"{r['dtype']}, {shape}" if r.get("dtype") else shape


def _row_time(row: dict) -> dict:
    """A benchmark row's time as intervals reads it: the median `time_us` and its interval (a row
    written before intervals were recorded: the median alone)."""
    t = row["time_us"]
    return {"median_us": t, "low_us": row.get("low_us", t), "high_us": row.get("high_us", t),
            "repeats": row.get("repeats", 1)}  # fmt: skip


def _verdict(verdicts: list[bool | None]) -> bool | None:
    """All hold: True; any fails for sure: False; else (an interval holds the limit) cannot tell."""
    if any(v is False for v in verdicts):
        return False
    return True if all(verdicts) else None


def ratio_to_baseline_below(limit: float, **only) -> Check:
    """At every benchmarked shape (those whose rows have the values `only` gives, such as
    is_causal=True or head_dim=64), the variant's time ÷ the baseline's (`ratio_to_flash`, measured
    in the same run) is under `limit`; cannot tell where a ratio's interval holds `limit`."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        mine = [
            r
            for r in ev.rows
            if r.get("variant") == ev.variant
            and r.get("ratio_to_flash") is not None
            and all(r.get(field) == value for field, value in only.items())
        ]
        if not mine:
            return None, f"no {ev.variant} row with a ratio to the baseline in benchmark.json"
        lo = min(mine, key=lambda r: r["ratio_to_flash"])
        hi = max(mine, key=lambda r: r["ratio_to_flash"])
        masking = {True: " causal", False: " non-causal", None: ""}[only.get("is_causal")]
        bounds = [(r.get("ratio_low", r["ratio_to_flash"]), r.get("ratio_high", r["ratio_to_flash"]))
                  for r in mine]  # fmt: skip
        return _verdict([intervals.below(low, high, limit) for low, high in bounds]), (
            f"{lo['ratio_to_flash']:.2f}× ({_where(lo)}) to {hi['ratio_to_flash']:.2f}× ({_where(hi)}) "
            f"over {len(mine)}{masking} shapes: {benchmark_shapes(mine)}"
        )

    return check


def slower_than(other: str) -> Check:
    """At every shape benchmarked with both, the variant takes more time than `other` (same run);
    cannot tell where their intervals overlap."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        fields = ("batch", "heads", "seq", "head_dim", "is_causal", "dtype")
        key = lambda r: tuple(r.get(f) for f in fields)  # noqa: E731
        theirs = {key(r): r for r in ev.rows if r.get("variant") == other}
        pairs = [
            (r, intervals.ratio(_row_time(r), _row_time(theirs[key(r)])))
            for r in ev.rows
            if r.get("variant") == ev.variant and theirs.get(key(r))
        ]
        if not pairs:
            return None, f"no shape in benchmark.json has both {ev.variant} and {other}"
        lo, hi = min(x[0] for _, x in pairs), max(x[0] for _, x in pairs)
        mine = [r for r, _ in pairs]
        verdicts = [intervals.above(low, high) for _, (_, low, high) in pairs]
        return _verdict(verdicts), (
            f"{ev.variant} ÷ {other}: {lo:.2f}× to {hi:.2f}× over {len(pairs)} shapes: "
            f"{benchmark_shapes(mine)}"
        )

    return check


def keeps_times(factor: float, other: str, from_seq: int) -> Check:
    """At every length swept from `from_seq` on, the variant saves for the backward at least
    `factor` times the bytes `other` saves (training.json, both measured in one run)."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        key = "saved_for_backward_bytes"
        theirs = {r["seq"]: r[key] for r in ev.rows if r.get("variant") == other}
        ratios = [
            (r["seq"], r[key] / theirs[r["seq"]])
            for r in ev.rows
            if r.get("variant") == ev.variant and r["seq"] >= from_seq and theirs.get(r["seq"])
        ]
        if not ratios:
            return None, f"no length from {from_seq} on has both {ev.variant} and {other}"
        shown = ", ".join(f"{x:.1f}× at seq {seq}" for seq, x in ratios)
        return min(x for _, x in ratios) >= factor, f"{ev.variant} ÷ {other}: {shown}"

    return check


# --- claims about a GPU trace recorded by others, and what diagnose found in it ----------------


@dataclasses.dataclass
class PublicEvidence:
    """What a claim about someone else's trace may look at: diagnose's report, its calls (each with
    the device rows it launched), and the trace."""

    diagnosis: dict
    calls: list
    trace: Trace


def diagnosed(
    implementation: str,
    *,
    where: str,
    compiled: bool = False,
    kernels_per_call: float | None = None,
) -> Check:
    """Every attention diagnose found is this implementation, in a place matching `where` (and
    with this many kernels per call, if given)."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        rows = ev.diagnosis["attention"]
        holds = bool(rows) and all(
            (r["implementation"], r["compiled"]) == (implementation, compiled)
            and re.search(where, r["where"])
            and kernels_per_call in (None, r["kernels_per_call"])
            for r in rows
        )
        seen = "; ".join(
            f"{r['implementation']}{' (compiled)' if r['compiled'] else ''} in {r['where']}: "
            f"{r['calls']} call(s), {count_text(r['kernels_per_call'] or 0)} kernel(s) per call"
            for r in rows
        )
        return holds, seen or "no attention found"

    return check


def op_chain(*names: str) -> Check:
    """An event named names[-1] whose parents are the others, innermost last."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        outer = list(reversed(names[:-1]))
        for i in (i for i, n in enumerate(t.name) if n == names[-1]):
            if [t.name[a] for a in t.ancestors(i)][: len(outer)] == outer:
                return True, " → ".join(names)
        return False, f"no {names[-1]} directly under {' under '.join(outer)}"

    return check


def _kernel_time(trace: Trace, rows) -> float:
    return float(sum(trace.dur[d] for d in rows if trace.cat[d] == KERNEL))


def longest_kernel(pattern: str) -> Check:
    """In the attention call with the most device time, the longest kernel's name matches."""

    def check(ev: PublicEvidence) -> tuple[bool | None, str]:
        t, calls = ev.trace, [c for c in ev.calls if c.device_rows]
        if not calls:
            return None, "no device work recorded for the attention"
        call = max(calls, key=lambda c: _kernel_time(t, c.device_rows))
        longest = max(call.device_rows, key=lambda d: t.dur[d])
        return bool(re.search(pattern, t.name[longest])), (
            f"{t.name[longest][:70]}: {time_text(t.dur[longest])} of the call's "
            f"{time_text(_kernel_time(t, call.device_rows))}"
        )

    return check


def attention_share(low: float, high: float) -> Check:
    """The attention's kernels take between `low` and `high` of all kernel time in the trace."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        total = _kernel_time(t, range(len(t.name)))
        mine = _kernel_time(t, {d for c in ev.calls for d in c.device_rows})
        share = mine / total if total else 0.0
        return low <= share < high, (
            f"{time_text(mine)} of {time_text(total)} of kernel time ({share:.0%})"
        )

    return check


def kernels_launched_under(*patterns: str) -> Check:
    """Every kernel was launched from under an op whose name matches one of the patterns."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        kernels = [d for d, cat in enumerate(t.cat) if cat == KERNEL]
        stray = []
        for d in kernels:
            launcher = t.launcher(d)
            above = [] if launcher is None else [t.name[a] for a in t.ancestors(launcher)]
            if not any(re.search(p, n) for p in patterns for n in above):
                stray.append(t.name[d])
        if stray:
            return False, f"{len(stray)} of {len(kernels)} kernels elsewhere, e.g. {stray[0][:60]}"
        return True, f"all {len(kernels)} kernels"

    return check


def each_op_launches(op: str, device: str) -> Check:
    """Every CPU op named `op` launched device work whose name matches `device` (at least one op);
    observed: how many did, the first one's input shape, and that work's time with its spread."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        ops = [i for i, n in enumerate(t.name) if n == op and t.cat[i] == "cpu_op"]
        if not ops:
            return False, f"no {op}"
        times, name = [], device
        for i in ops:  # the runtime calls inside the op, on its thread, by binary search
            rows = t.thread_rows(i)
            lo, hi = np.searchsorted(t.ts[rows], [t.ts[i] - EPS_US, t.end[i] + EPS_US])
            inside = rows[lo:hi]
            inside = inside[(t.end[inside] <= t.end[i] + EPS_US) & t.is_runtime[inside]]
            found = [d for d in t.launched_by(inside).tolist() if re.search(device, t.name[d])]
            if found:
                times.append(float(t.dur[found].sum()))
                name = t.name[found[0]]
        dims = (t.args[ops[0]].get("Input Dims") or [None])[0]
        spread = f"{time_text(min(times))}–{time_text(max(times))}" if times else "none"
        return len(times) == len(ops), (
            f"{len(times)} of {len(ops)} {op} (first input {dims}) launched {name}: {spread} each"
        )

    return check


def kinds_apart(where: str, most_share: float) -> Check:
    """diagnose splits the calls in `where` into two or more kinds, and the kind with the most
    device time takes at least `most_share` of the trace's device time."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        rows = [r for r in ev.diagnosis["attention"] if re.search(where, r["where"])]
        if not rows or rows[0]["share_of_device_time"] is None:
            return False, f"no device time for the calls in {where}"
        top = max(r["share_of_device_time"] for r in rows)
        seen = "; ".join(
            f"{r['shapes'] or 'no shapes'}: {r['calls']} call(s), "
            f"{time_text(r['device_time_us_per_call'])} each, {r['share_of_device_time']:.0%}"
            for r in rows
        )
        return len(rows) >= 2 and top >= most_share, seen

    return check


def reported_on_every_call(kind: str) -> Check:
    """diagnose reports the finding `kind` once for every forward call it found."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        calls = sum(r["calls"] for r in ev.diagnosis["attention"] if r["pass"] == "forward")
        count = next((f["count"] for f in ev.diagnosis["findings"] if f["kind"] == kind), 0)
        return count == calls > 0, f"{kind}: {count} for {calls} forward call(s)"

    return check


# --- evaluating ------------------------------------------------------------------------------


def evaluate(claims: list[Claim], device_type: str, evidence) -> list[dict]:
    """Check each claim about this device type: [{"key", "text", "holds", "observed"}].

    `holds` is True or False, or None when the evidence cannot tell (e.g. shapes were not recorded).
    """
    results = []
    for claim in claims:
        if claim.device_type == device_type:
            holds, observed = claim.check(evidence)
            results.append(
                {"key": claim.key, "text": claim.text, "holds": holds, "observed": observed}
            )
    return results
