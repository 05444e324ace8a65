"""Claims about the decoding variants, to merge into attn.profiling.claims.CLAIMS.

    CLAIMS.update(DECODE_CLAIMS)

Each check reads only the trace (and the per-forward counts every summary has), so the claims hold
or fail the same way on a run of ours, an example's trace, or a committed trace rechecked later.
"""

from __future__ import annotations

import math
import re

from attn.profiling.claims import (
    FUSED_CPU,
    Check,
    Claim,
    Evidence,
    absent,
    both,
    memcpys,
    present,
)

# A kernel that copies memory: the elementwise direct_copy kernel a clone or copy_ launches.
COPY_KERNEL = r"(?i)copy"
ELEMENT_BYTES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8}


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
            return None, "input shapes not recorded (the trace was taken without record_shapes)"
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
    return peak >= copied, f"peak {peak / 2**20:.2f} MiB; the copies {copied / 2**20:.2f} MiB"


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


DECODE_CLAIMS: dict[str, list[Claim]] = {
    "decode_repeat_kv": [
        Claim(
            "repeat_interleave materialises K and V: two aten::repeat_interleave per forward, "
            "each an aten::copy_ of the whole repeated cache.",
            "cpu",
            repeat_copies(2),
        ),
        Claim(
            "A forward's peak memory holds both copies.",
            "cpu",
            peak_holds_the_copies,
        ),
        Claim(
            f"Attention itself is one fused op over the copies: {FUSED_CPU}.",
            "cpu",
            present(FUSED_CPU),
        ),
        Claim(
            "Two copy kernels per forward (the repeats of K and V) before attention.",
            "cuda",
            copy_kernels(2),
        ),
    ],
    "decode_enable_gqa": [
        Claim(
            "No copy of the cache: no aten::repeat_interleave, aten::clone or aten::copy_.",
            "cpu",
            absent("aten::repeat_interleave", "aten::clone", "aten::copy_"),
        ),
        Claim(
            f"One fused op reads each KV head in place for its query heads: {FUSED_CPU}.",
            "cpu",
            present(FUSED_CPU),
        ),
        Claim(
            "No copy kernel and no Memcpy: the attention kernels read K and V where they are.",
            "cuda",
            both(copy_kernels(0), memcpys("DtoD", 0)),
        ),
    ],
}
