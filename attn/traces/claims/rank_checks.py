"""Checks on a variant run on several ranks, read from its summary across the ranks (each rank's row,
the imbalance and straggler, the shape it ran): a time as an interval that may not tell, and the
counts every rank must agree on. See attn.traces.claims.claim and attn.traces.ranks.folder."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from attn.traces.claims.claim import Check, Claim
from attn.traces.common import intervals
from attn.traces.common.units import DTYPE_BYTES, bytes_text, count_text


@dataclasses.dataclass(frozen=True)
class RankClaim(Claim):
    """A sentence about a variant run on several ranks; its check takes the variant's summary
    across the ranks (attn.traces.sets.rank_artifacts), not one rank's trace."""


def _ranks(summary: dict) -> list[dict]:
    return summary.get("ranks") or []


def _imbalance(summary: dict, limit: float, verdict) -> tuple[bool | None, str]:
    imb = summary.get("imbalance")
    if not imb:
        return None, "cannot tell: fewer than two ranks, or no compute to compare"
    holds = verdict(imb["low"], imb["high"], limit)
    said = intervals.ratio_text(imb["value"], imb["low"], imb["high"])
    return holds, (
        f"the slowest rank (rank {imb['straggler']}) computes {said} the mean of every rank "
        f"(the median of {imb['ranges']} forwards, and their lowest and highest)"
        + ("; cannot tell: the interval holds " + f"{limit:g}" if holds is None else "")
    )


def imbalance_above(limit: float) -> Check:
    """The slowest rank's compute over the mean is above `limit` over the whole interval."""
    return lambda summary: _imbalance(summary, limit, intervals.above)


def imbalance_below(limit: float) -> Check:
    """... below `limit` over the whole interval."""
    return lambda summary: _imbalance(summary, limit, intervals.below)


def straggler_is(rank: Callable[[int], int]) -> Check:
    """The straggler (the rank whose compute is longest) is rank(world)."""

    def check(summary: dict) -> tuple[bool | None, str]:
        if summary.get("imbalance") is None:
            return None, "cannot tell: no straggler among fewer than two ranks"
        found = summary.get("straggler")
        return found == rank(len(_ranks(summary))), f"the straggler is rank {found}"

    return check


def _every_rank(summary: dict, key: str, expected: Callable[[int, int], object], shown) -> tuple:
    """Whether each rank's `key` is expected(rank, world), and what each had."""
    ranks = _ranks(summary)
    if not ranks or any(r.get(key) is None for r in ranks):
        return None, f"cannot tell: a rank has no {key.replace('_', ' ')}"
    world = len(ranks)
    holds = all(r[key] == expected(r["rank"], world) for r in ranks)
    return holds, ", ".join(f"rank {r['rank']} {shown(r[key])}" for r in ranks)


def sends_per_rank(expected: Callable[[int, int], int]) -> Check:
    """Each rank's sends per forward (its send spans) are expected(rank, world)."""
    return lambda s: _every_rank(s, "sends_per_range", expected, lambda n: f"{count_text(n)} sends")


def blocks_per_rank(expected: Callable[[int, int], int]) -> Check:
    """Each rank computes expected(rank, world) blocks per forward (attn/ring.py's, counted by
    their row maximum: patterns.RING_BLOCK_OP)."""
    return lambda s: _every_rank(s, "blocks", expected, lambda n: f"{count_text(n)} blocks")


def kv_block_bytes(summary: dict) -> int | None:
    """The bytes of one rank's K block and V block together: 2 x batch x heads x seq/world x
    head_dim x the dtype's size."""
    shape, size, world = (
        summary.get("shape") or {},
        DTYPE_BYTES.get(summary.get("dtype")),
        len(_ranks(summary)),
    )
    dims = [shape.get(k) for k in ("batch", "heads", "seq_k", "head_dim")]
    if not size or not world or not all(isinstance(d, int) for d in dims) or dims[2] % world:
        return None
    batch, heads, seq, head_dim = dims
    return 2 * batch * heads * (seq // world) * head_dim * size


def sends_carry_a_kv_block(summary: dict) -> tuple[bool | None, str]:
    """Every send of every rank carries one K block and one V block, as its recorded input says."""
    expected = kv_block_bytes(summary)
    if expected is None:
        return None, "cannot tell: the summary has no shape, dtype or ranks to size a block by"
    ranks = _ranks(summary)
    sizes = {r["rank"]: r.get("bytes_per_send") or [] for r in ranks}
    if not all(sizes.values()):
        return None, "cannot tell: a rank's sends recorded no input shapes"
    holds = all(s == [expected] for s in sizes.values())
    seen = ", ".join(
        f"rank {r}: {' and '.join(bytes_text(b) for b in s)}" for r, s in sizes.items()
    )
    return (
        holds,
        f"one K and one V block: {bytes_text(expected)} ({expected:,} bytes); sent: {seen}",
    )
