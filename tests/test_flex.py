"""flex_causal and flex_sliding_window (and the document mask): the float64 reference with the same
mask, what is_causal=False means for them, inference only on CPU, and one generated kernel."""

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention
from torch.profiler import ProfilerActivity, profile, record_function

import attn
from attn.flex import WINDOW, FlexAttention, same_document

TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


def qkv(seq_q=16, seq_k=16, head_dim=16, dtype=torch.float32):
    return (
        torch.randn(1, 2, seq_q, head_dim).to(dtype),
        torch.randn(1, 2, seq_k, head_dim).to(dtype),
        torch.randn(1, 2, seq_k, head_dim).to(dtype),
    )


def masked_reference(q, k, v, visible):
    """Attention in float64 where query i sees key j only if visible[i, j]; a query that sees no key
    gets zeros (FlexAttention's rule)."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~visible, float("-inf"))
    return scores.softmax(dim=-1).nan_to_num(0.0) @ v


def positions(seq_q, seq_k):
    return torch.arange(seq_q)[:, None], torch.arange(seq_k)[None, :]


def window(seq_q, seq_k, *, is_causal):
    i, j = positions(seq_q, seq_k)
    near = (i - j < WINDOW) & (j - i < WINDOW)
    return near & (j <= i) if is_causal else near


def run(variant_or_module, q, k, v, **kwargs):
    with torch.no_grad():
        if isinstance(variant_or_module, attn.Variant):
            return variant_or_module.forward(q, k, v, **kwargs)
        return variant_or_module(q, k, v, **kwargs)


@pytest.mark.parametrize(
    "dtype,is_causal,seq_q,seq_k",
    [
        (torch.float32, True, 16, 16),
        (torch.float32, False, 16, 16),  # no mask at all: every key
        (torch.float32, True, 9, 20),
        (torch.float32, True, 20, 9),
        (torch.bfloat16, True, 16, 16),
    ],
    ids=str,
)
def test_flex_causal_matches_float64_reference(dtype, is_causal, seq_q, seq_k):
    variant = attn.get_variant("flex_causal")
    assert variant.why_unavailable("cpu", dtype) is None
    q, k, v = qkv(seq_q, seq_k, dtype=dtype)
    out = run(variant, q, k, v, is_causal=is_causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    expected = attn.reference_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out.double(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize(
    "is_causal,seq_q,seq_k",
    [
        (True, 300, 300),  # queries past 256 lose their first keys
        (False, 300, 300),  # a window on both sides: |i - j| < 256
        (True, 300, 280),
    ],
    ids=str,
)
def test_sliding_window_matches_reference_with_that_mask(is_causal, seq_q, seq_k):
    variant = attn.get_variant("flex_sliding_window")
    q, k, v = qkv(seq_q, seq_k)
    out = run(variant, q, k, v, is_causal=is_causal)
    expected = masked_reference(q, k, v, window(seq_q, seq_k, is_causal=is_causal))
    torch.testing.assert_close(out.double(), expected, atol=2e-5, rtol=2e-5)
    if is_causal:  # the window really cuts: plain causal attention differs for late queries
        causal = attn.reference_attention(q, k, v, is_causal=True)
        assert not torch.allclose(out.double()[..., WINDOW:, :], causal[..., WINDOW:, :])


def test_a_query_that_sees_no_key_gets_zeros():
    # 300 queries over 20 keys: query i >= 20 + 255 sees none of them inside its window.
    q, k, v = qkv(300, 20)
    out = run(attn.get_variant("flex_sliding_window"), q, k, v)
    assert torch.equal(
        out[..., 20 + WINDOW - 1 :, :], torch.zeros_like(out[..., 20 + WINDOW - 1 :, :])
    )
    expected = masked_reference(q, k, v, window(300, 20, is_causal=True))
    torch.testing.assert_close(out.double(), expected, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "block-diagonal"])
def test_document_mask_matches_reference(is_causal):
    ids = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)  # three packed documents, 16 tokens
    q, k, v = qkv()
    out = run(FlexAttention(same_document(ids)), q, k, v, is_causal=is_causal)
    i, j = positions(16, 16)
    visible = (ids[:, None] == ids[None, :]) & ((j <= i) if is_causal else True)
    torch.testing.assert_close(
        out.double(), masked_reference(q, k, v, visible), atol=2e-5, rtol=2e-5
    )


def test_block_masks_are_built_once_per_shape():
    module = attn.get_variant("flex_sliding_window").module
    first = module.block_mask(True, 300, 300, torch.device("cpu"))
    assert module.block_mask(True, 300, 300, torch.device("cpu")) is first
    assert module.block_mask(False, 300, 300, torch.device("cpu")) is not first
    assert attn.get_variant("flex_causal").module.block_mask(False, 16, 16, "cpu") is None


def test_compiled_once_and_kept():
    variant = attn.get_variant("flex_causal")
    run(variant, *qkv())
    first = variant.module.compiled
    run(variant, *qkv())
    assert first is not None and variant.module.compiled is first


@pytest.mark.parametrize("name", ["flex_causal", "flex_sliding_window"])
def test_cpu_is_inference_only(name):
    variant = attn.get_variant(name)
    q, k, v = qkv()
    q.requires_grad_(True)
    with pytest.raises(ValueError, match="inference only") as err:
        variant.forward(q, k, v)
    assert "q requires grad" in str(err.value)
    with torch.no_grad(), pytest.raises(ValueError, match="inference only"):
        variant.forward(q, k, v)  # torch refuses such inputs on CPU even under no_grad
    out = run(variant, q.detach(), k, v)
    assert not out.requires_grad


@pytest.mark.parametrize("name", ["flex_causal", "flex_sliding_window"])
def test_bad_inputs_raise_value_error(name):
    variant = attn.get_variant(name)
    q, k, v = qkv()
    with pytest.raises(ValueError, match="float64"):
        variant.forward(q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match="k and v sequence"):
        variant.forward(q, k, v[..., :5, :])
    with pytest.raises(ValueError, match="is_causal"):
        variant.forward(q, k, v, is_causal="yes")


def test_without_avx2_the_reason_says_so(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    variant = attn.get_variant("flex_causal")
    reason = variant.why_unavailable("cpu")
    assert reason and "AVX2" in reason and "DEFAULT" in reason
    with pytest.raises(RuntimeError, match="AVX2"):
        variant.forward(*qkv())
    assert "float64" in attn.get_variant("flex_causal").why_unavailable("cpu", torch.float64)


def test_eager_flex_attention_is_many_ops_compiled_one_kernel():
    q, k, v = qkv()
    module = FlexAttention()
    block_mask = module.block_mask(True, 16, 16, torch.device("cpu"))

    def names(fn):
        with torch.no_grad():
            fn()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with record_function("attn_fwd"):
                    fn()
        return [e.name for e in prof.events()]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eager = names(lambda: flex_attention(q, k, v, block_mask=block_mask))
    assert any("without torch.compile" in str(w.message) for w in caught)
    assert "aten::bmm" in eager and "aten::_softmax" in eager
    compiled = names(lambda: module(q, k, v))  # FlexAttention turns kernel rows on itself
    assert not [n for n in compiled if n.startswith("aten::")], compiled
    kernels = [n for n in compiled if n.startswith("graph_") and n.endswith("kernel")]
    assert len(kernels) == 1, compiled
