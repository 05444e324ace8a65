"""Every variant that runs on CPU against the float64 reference, over a grid of shapes."""

import pytest
import torch

import attn
from attn.registry import GeneratedVariant

# (seq_q, seq_k, head_dim): lengths 1, odd, unequal; head dims 32/64/128.
SHAPES = [(1, 1, 32), (7, 7, 64), (33, 33, 128), (17, 40, 64), (40, 17, 32), (128, 96, 64)]
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def cpu_variants():
    """Every variant but the compiled ones: each new shape is a recompile (tens of seconds cold),
    so tests/test_compiled.py and tests/test_flex.py check those against the reference instead."""
    return [v.name for v in attn.variants() if not isinstance(v, GeneratedVariant)]


@pytest.mark.parametrize("name", cpu_variants())
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("seq_q,seq_k,head_dim", SHAPES)
def test_matches_float64_reference(name, dtype, is_causal, seq_q, seq_k, head_dim):
    variant = attn.get_variant(name)
    reason = variant.why_unavailable("cpu", dtype)
    if reason:
        pytest.skip(reason)
    if variant.head_dims and head_dim not in variant.head_dims:
        pytest.skip(f"{name} supports head_dim {variant.head_dims}")
    q = torch.randn(2, 3, seq_q, head_dim).to(dtype)
    k = torch.randn(2, 3, seq_k, head_dim).to(dtype)
    v = torch.randn(2, 3, seq_k, head_dim).to(dtype)
    bottom_right = is_causal and getattr(variant, "causal_alignment", "") == "bottom_right"
    if bottom_right and seq_q > seq_k:  # the decoding variants refuse more queries than keys
        with pytest.raises(ValueError, match="is_causal"):
            variant.forward(q, k, v, is_causal=is_causal)
        return
    out = variant.forward(q, k, v, is_causal=is_causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    if bottom_right:  # the queries are the last positions: pad q in front, keep its rows
        pad = q.new_zeros(2, 3, seq_k - seq_q, head_dim)
        expected = attn.reference_attention(torch.cat([pad, q], 2), k, v)[:, :, seq_k - seq_q :]
    else:
        expected = attn.reference_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out.double(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def test_causal_row_sees_only_earlier_keys():
    # Changing a key after position 3 must not change output row 3.
    q, k, v = (torch.randn(1, 1, 8, 32) for _ in range(3))
    for name in ("naive", "inplace", "sdpa_math", "sdpa_flash"):
        variant = attn.get_variant(name)
        before = variant.forward(q, k, v)[..., 3, :]
        k2, v2 = k.clone(), v.clone()
        k2[..., 4:, :] += 5
        v2[..., 4:, :] -= 5
        after = variant.forward(q, k2, v2)[..., 3, :]
        torch.testing.assert_close(before, after)


def test_naive_mask_is_built_once_and_reused():
    module = attn.NaiveAttention()
    q = torch.randn(1, 2, 9, 16)
    module(q, q, q)
    first = module.mask
    module(q, q, q)
    assert module.mask is first
    module(torch.randn(1, 2, 5, 16), q, q)
    assert module.mask.shape == (5, 9)


def test_inplace_does_not_modify_its_inputs():
    q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
    copies = [t.clone() for t in (q, k, v)]
    attn.get_variant("inplace").forward(q, k, v)
    for t, c in zip((q, k, v), copies, strict=True):
        assert torch.equal(t, c)


def test_sdpa_names_the_inputs_a_pinned_backend_refuses():
    """CPU flash has no kernel for a strided last dimension: a ValueError saying so, not torch's
    bare "No available kernel"; math takes the same inputs."""
    q = torch.randn(1, 2, 16, 128)[..., ::2]
    k = v = torch.randn(1, 2, 16, 64)
    flash = attn.get_variant("sdpa_flash")
    assert flash.why_unavailable("cpu") is None  # the backend runs here ...
    with pytest.raises(ValueError, match=r"sdpa_flash has no kernel.*q \(1, 2, 16, 64\).*strided"):
        flash.forward(q, k, v)  # ... but not for these inputs
    expected = attn.reference_attention(q, k, v).float()
    torch.testing.assert_close(
        attn.get_variant("sdpa_math").forward(q, k, v), expected, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("is_causal", ["no", None, 1])
def test_is_causal_must_be_a_bool(is_causal):
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="is_causal must be True or False"):
        attn.get_variant("naive").forward(q, q, q, is_causal=is_causal)


def test_float16_scores_do_not_overflow_in_naive_and_inplace():
    """q @ kᵀ of large float16 inputs overflows unless q is scaled first, as SDPA does."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=gen).mul(60) for _ in range(3))
    expected = attn.reference_attention(q, k, v)
    for name in ("naive", "inplace"):
        out = attn.get_variant(name).forward(q.half(), k.half(), v.half())
        assert not out.isnan().any(), name
        assert (out.double() - expected).abs().max() < 0.5, name
