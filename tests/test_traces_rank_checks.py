"""The checks on a variant run on several ranks (attn.traces.claims.rank_checks), on summaries made by
hand: an imbalance that holds, fails or cannot tell, and the counts every rank must agree on."""

import pytest

from attn import specs
from attn.traces.claims.rank_checks import (
    RankClaim,
    blocks_per_rank,
    imbalance_above,
    imbalance_below,
    kv_block_bytes,
    sends_carry_a_kv_block,
    sends_per_rank,
    straggler_is,
)

SHAPE = {"batch": 2, "heads": 8, "seq_q": 1024, "seq_k": 1024, "head_dim": 64}
KV = 2 * 2 * 8 * 512 * 64 * 4  # K and V of one of 2 ranks, float32


def summary(low=1.3, high=1.4, value=1.33, straggler=1, **row) -> dict:
    ranks = [
        {"rank": r, "blocks": r + 1, "sends_per_range": 1.0, "bytes_per_send": [KV]} | row
        for r in range(2)
    ]
    imb = {"value": value, "low": low, "high": high, "ranges": 3, "straggler": straggler}
    return {"shape": SHAPE, "dtype": "float32", "ranks": ranks, "imbalance": imb,
            "straggler": straggler}  # fmt: skip


@pytest.mark.parametrize(
    ("low", "high", "above", "below"),
    [(1.2, 1.4, True, False), (1.02, 1.08, False, True), (1.05, 1.2, None, None)],
)
def test_an_imbalance_holds_fails_or_cannot_tell_by_its_whole_interval(low, high, above, below):
    s = summary(low=low, high=high, value=(low + high) / 2)
    assert imbalance_above(1.1)(s)[0] is above and imbalance_below(1.1)(s)[0] is below
    holds, observed = imbalance_above(1.1)(s)
    assert "rank 1" in observed and "3 forwards" in observed
    assert ("cannot tell" in observed) is (holds is None)


def test_no_imbalance_cannot_tell():
    s = summary() | {"imbalance": None}
    assert imbalance_above(1.1)(s)[0] is None and straggler_is(lambda w: w - 1)(s)[0] is None


def test_the_straggler_is_the_rank_expected():
    assert straggler_is(lambda world: world - 1)(summary(straggler=1)) == (
        True,
        "the straggler is rank 1",
    )
    assert straggler_is(lambda world: world - 1)(summary(straggler=0))[0] is False


def test_every_rank_must_agree_on_its_counts():
    assert blocks_per_rank(lambda r, w: r + 1)(summary()) == (
        True,
        "rank 0 1 blocks, rank 1 2 blocks",
    )
    assert blocks_per_rank(lambda r, w: w)(summary())[0] is False
    assert sends_per_rank(lambda r, w: w - 1)(summary())[0] is True
    assert sends_per_rank(lambda r, w: w - 1)(summary(sends_per_range=2.0))[0] is False
    assert blocks_per_rank(lambda r, w: r + 1)(summary(blocks=None))[0] is None


def test_a_send_carries_one_k_block_and_one_v_block():
    assert kv_block_bytes(summary()) == KV == 4 * 2**20
    holds, observed = sends_carry_a_kv_block(summary())
    assert holds is True and "4.0 MiB (4,194,304 bytes)" in observed
    assert sends_carry_a_kv_block(summary(bytes_per_send=[KV // 2]))[0] is False
    assert sends_carry_a_kv_block(summary(bytes_per_send=[]))[0] is None  # no shapes recorded
    assert sends_carry_a_kv_block(summary() | {"dtype": "int8"})[0] is None


def test_the_ring_specs_claims_are_about_ranks():
    for name in ("ring_contiguous", "ring_zigzag"):
        spec = specs.spec(name)
        assert spec.ranks == 2 and spec.rank_claims and not spec.trace_claims
        assert all(isinstance(c, RankClaim) for c in spec.claims)
