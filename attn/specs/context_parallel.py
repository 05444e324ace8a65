"""The context-parallel chapter's variants (docs/context-parallel.md): ring attention."""

from __future__ import annotations

from attn.specs.record import Spec, V
from attn.traces.claims.claim import both
from attn.traces.claims.rank_checks import (
    RankClaim,
    blocks_per_rank,
    imbalance_above,
    imbalance_below,
    sends_carry_a_kv_block,
    sends_per_rank,
    straggler_is,
)
from attn.traces.read.patterns import RING_BLOCK_OP, exactly


def ring(name: str, title: str, lesson: str, **facts) -> Spec:
    """Ring attention with one sharding (the name after `ring_`), its example started on 2 ranks
    (gloo on a CPU), causal."""
    sharding = name.removeprefix("ring_")
    return Spec(
        name, title, lesson, lambda: V.RingVariant(sharding), "context-parallel.md",
        ("examples/ring_attention.py", "--sharding", sharding, "--world", "2"), ("attn/ring.py",),
        exactly(RING_BLOCK_OP), **facts,
    )  # fmt: skip


RING_COUNTS = (  # both shardings move every block past every rank
    RankClaim("sends-world-minus-one", "cpu",
        "Every rank sends world - 1 times per forward: one gloo:send per step but the last.",
        sends_per_rank(lambda rank, world: world - 1)),
    RankClaim("send-is-one-kv-block", "cpu",
        "Every send carries one K block and one V block, together: 2 × batch × heads × "
        "seq/world × head_dim values.",
        sends_carry_a_kv_block),
)  # fmt: skip


# fmt: off
SPECS: tuple[Spec, ...] = (
    ring(
        "ring_contiguous", "Ring attention: contiguous shards",
        "with a causal mask the last rank computes every block, the first one: the first waits",
        claims=(
            RankClaim("last-rank-computes-longest", "cpu",
                "The imbalance is clearly above 1: the slowest rank's attention compute is over "
                "1.1× the mean of both ranks', and the slowest is the last rank.",
                both(imbalance_above(1.1), straggler_is(lambda world: world - 1))),
            RankClaim("blocks-grow-with-the-rank", "cpu",
                "Rank r computes r + 1 blocks per forward: the later blocks are all in its "
                "future, and skipped.",
                blocks_per_rank(lambda rank, world: rank + 1)),
            *RING_COUNTS,
        ),
    ),
    ring(
        "ring_zigzag", "Ring attention: zigzag shards",
        "each rank holds an early and a late chunk: the same work on every rank",
        claims=(
            RankClaim("ranks-even", "cpu",
                "The imbalance is near 1: the slowest rank's attention compute stays under 1.1× "
                "the mean of both ranks'.",
                imbalance_below(1.1)),
            RankClaim("every-rank-computes-every-block", "cpu",
                "Every rank computes a block at every step, world blocks per forward: its own "
                "under the causal mask, then half of each other rank's.",
                blocks_per_rank(lambda rank, world: world)),
            *RING_COUNTS,
        ),
    ),
)
# fmt: on
