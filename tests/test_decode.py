"""attn/decode.py and its variants: GQA over a KV cache, against the float64 reference."""

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import attn
from attn.decode import GQA, causal_arguments
from attn.validation import check_qkv

DECODE = ["decode_repeat_kv", "decode_enable_gqa"]
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def qkv(batch, q_heads, kv_heads, seq_q, seq_k, head_dim, dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(batch, q_heads, seq_q, head_dim, generator=gen)
    k, v = (torch.randn(batch, kv_heads, seq_k, head_dim, generator=gen) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def expected(q, k, v, *, is_causal):
    """The reference with K and V expanded to q's heads; causal aligned bottom-right."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    if not is_causal:
        return attn.reference_attention(q, k, v, is_causal=False)
    # Bottom-right: the queries are the last seq_q of seq_k positions. Pad q in front up to seq_k
    # rows, take the top-left reference, keep the last seq_q rows.
    pad = q.new_zeros(*q.shape[:2], k.shape[2] - q.shape[2], q.shape[3])
    full = attn.reference_attention(torch.cat([pad, q], dim=2), k, v, is_causal=True)
    return full[:, :, -q.shape[2] :]


SHAPES = [
    # batch, q_heads, kv_heads, seq_q, seq_k, head_dim
    (1, 8, 2, 1, 1, 32),  # a one-token cache
    (2, 8, 2, 1, 37, 64),  # one new token, GQA 4:1
    (2, 6, 1, 1, 50, 32),  # multi-query: one KV head
    (1, 4, 4, 1, 64, 64),  # plain multi-head
    (2, 8, 2, 5, 23, 64),  # a few new tokens (speculative decoding, chunked prefill)
    (1, 4, 2, 16, 16, 32),  # prefill: as many queries as keys
]


@pytest.mark.parametrize("name", DECODE)
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_decode_matches_the_reference(name, dtype, is_causal, shape):
    q, k, v = qkv(*shape, dtype=dtype)
    out = attn.get_variant(name).forward(q, k, v, is_causal=is_causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    torch.testing.assert_close(
        out.double(), expected(q, k, v, is_causal=is_causal), atol=TOLERANCE[dtype], rtol=0
    )


@pytest.mark.parametrize("gqa", GQA)
def test_modules_alone_match_the_reference(gqa):
    q, k, v = qkv(2, 8, 2, 1, 40, 32)
    out = GQA[gqa]()(q, k, v)
    torch.testing.assert_close(out.double(), expected(q, k, v, is_causal=True), atol=2e-5, rtol=0)


def test_query_head_reads_its_own_kv_head():
    # Query heads 0-3 belong to KV head 0, 4-7 to KV head 1: changing KV head 1 leaves 0-3 alone.
    q, k, v = qkv(1, 8, 2, 1, 20, 16)
    variant = attn.get_variant("decode_enable_gqa")
    before = variant.forward(q, k, v)
    v2 = v.clone()
    v2[:, 1] += 3
    after = variant.forward(q, k, v2)
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


# --- causal alignment ----------------------------------------------------------------------------


def test_plain_sdpa_causal_shows_one_query_only_the_first_key():
    # SDPA aligns is_causal top-left: query 0 sees key 0 and nothing else, however long the cache.
    q, k, v = qkv(1, 2, 2, 1, 12, 16)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, v[:, :, :1])
    full = F.scaled_dot_product_attention(q, k, v, is_causal=False)
    assert not torch.allclose(out, full)


@pytest.mark.parametrize("name", DECODE)
def test_one_new_token_with_is_causal_sees_the_whole_cache(name):
    q, k, v = qkv(1, 4, 2, 1, 12, 16)
    variant = attn.get_variant(name)
    causal = variant.forward(q, k, v, is_causal=True)
    torch.testing.assert_close(causal, variant.forward(q, k, v, is_causal=False))
    # The last key counts: changing it changes the output.
    v2 = v.clone()
    v2[:, :, -1] += 5
    assert not torch.allclose(causal, variant.forward(q, k, v2, is_causal=True))


@pytest.mark.parametrize("name", DECODE)
def test_causal_new_tokens_never_see_later_ones(name):
    # 3 new tokens at the end of a 10-key cache: the first new token (position 7) sees keys 0-7.
    q, k, v = qkv(1, 4, 2, 3, 10, 16)
    variant = attn.get_variant(name)
    before = variant.forward(q, k, v)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 8:] += 5
    v2[:, :, 8:] -= 5
    after = variant.forward(q, k2, v2)
    torch.testing.assert_close(before[:, :, 0], after[:, :, 0])
    assert not torch.allclose(before[:, :, 1], after[:, :, 1])


@pytest.mark.parametrize("name", DECODE)
def test_more_queries_than_keys_is_refused_when_causal(name):
    q, k, v = qkv(1, 4, 2, 6, 4, 16)
    with pytest.raises(ValueError, match=r"\(1, 4, 6, 16\)"):
        attn.get_variant(name).forward(q, k, v, is_causal=True)
    out = attn.get_variant(name).forward(q, k, v, is_causal=False)
    torch.testing.assert_close(out.double(), expected(q, k, v, is_causal=False), atol=2e-5, rtol=0)


def test_causal_arguments():
    assert causal_arguments(1, 9, torch.device("cpu"), True) == {"is_causal": False}
    assert causal_arguments(5, 9, torch.device("cpu"), False) == {"is_causal": False}
    assert causal_arguments(9, 9, torch.device("cpu"), True) == {"is_causal": True}
    mask = causal_arguments(2, 4, torch.device("cpu"), True)["attn_mask"]
    assert mask.tolist() == [[True, True, True, False], [True, True, True, True]]
    with pytest.raises(ValueError, match="5 new tokens but only 4"):
        causal_arguments(5, 4, torch.device("cpu"), True)


# --- what the two ways run ------------------------------------------------------------------------


def op_names(name, q, k, v):
    variant = attn.get_variant(name)
    with torch.no_grad():
        variant.forward(q, k, v)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            variant.forward(q, k, v)
    return [e.name for e in prof.events()]


def test_repeat_copies_the_cache_and_enable_gqa_does_not():
    q, k, v = qkv(1, 8, 2, 1, 64, 32)
    repeat = op_names("decode_repeat_kv", q, k, v)
    assert repeat.count("aten::repeat_interleave") == 2 and "aten::copy_" in repeat
    gqa = op_names("decode_enable_gqa", q, k, v)
    assert not {"aten::repeat_interleave", "aten::copy_", "aten::clone"} & set(gqa)


# --- validation ----------------------------------------------------------------------------------

BAD = {
    "not divisible": ((1, 6, 1, 8), (1, 4, 5, 8), (1, 4, 5, 8), "not a multiple"),
    "kv heads differ": ((1, 4, 1, 8), (1, 2, 5, 8), (1, 4, 5, 8), "k and v head counts"),
    "batch": ((2, 4, 1, 8), (1, 2, 5, 8), (1, 2, 5, 8), "batch"),
    "head_dim": ((1, 4, 1, 8), (1, 2, 5, 16), (1, 2, 5, 16), "head_dim"),
    "kv seq": ((1, 4, 1, 8), (1, 2, 5, 8), (1, 2, 6, 8), "k and v sequence"),
    "empty": ((1, 4, 0, 8), (1, 2, 5, 8), (1, 2, 5, 8), "empty"),
}


@pytest.mark.parametrize("name", DECODE)
@pytest.mark.parametrize("case", list(BAD))
def test_bad_shapes_name_the_shapes(name, case):
    *shapes, words = BAD[case]
    q, k, v = (torch.randn(*s) for s in shapes)
    with pytest.raises(ValueError, match=words) as err:
        attn.get_variant(name).forward(q, k, v)
    assert str(tuple(q.shape)) in str(err.value)


def check_gqa(q, k, v):
    check_qkv(q, k, v, grouped=True)


def test_check_gqa_accepts_fewer_kv_heads_and_rejects_the_rest():
    q, k, v = qkv(1, 8, 2, 1, 5, 8)
    check_gqa(q, k, v)
    with pytest.raises(ValueError, match="rank|4 dims"):
        check_gqa(q[0], k, v)
    with pytest.raises(ValueError, match="float64"):
        check_gqa(q, k.double(), v)
    with pytest.raises(ValueError, match="int32"):
        check_gqa(*(t.to(torch.int32) for t in (q, k, v)))
    with pytest.raises(ValueError, match="list"):
        check_gqa([1.0], k, v)
    with pytest.raises(ValueError, match="is_causal"):
        attn.get_variant("decode_enable_gqa").forward(q, k, v, is_causal=1)


def test_decode_module_imports_only_torch():
    tree = ast.parse((Path(attn.__file__).parent / "decode.py").read_text())
    roots = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert roots == {"torch"}
