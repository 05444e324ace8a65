"""compiled_naive and compiled_additive: they match the float64 reference, and a profile shows how each
was compiled (the additive mask becomes SDPA's fused CPU op; masked_fill stays two matmuls)."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

import attn
from attn.compiled import AdditiveMaskAttention, CompiledAttention
from attn.naive import NaiveAttention

NAMES = ["compiled_naive", "compiled_additive"]
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 3e-2}
# (dtype, is_causal, seq_q, seq_k): tiny, because every case is a compile of its own.
CASES = [
    (torch.float32, True, 16, 16),
    (torch.float32, False, 16, 16),
    (torch.float32, True, 9, 20),
    (torch.float32, True, 20, 9),
    (torch.bfloat16, True, 16, 16),
]
SDPA_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"


def qkv(seq_q=16, seq_k=16, head_dim=16, dtype=torch.float32):
    return (
        torch.randn(1, 2, seq_q, head_dim).to(dtype),
        torch.randn(1, 2, seq_k, head_dim).to(dtype),
        torch.randn(1, 2, seq_k, head_dim).to(dtype),
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype,is_causal,seq_q,seq_k", CASES, ids=str)
def test_matches_float64_reference(name, dtype, is_causal, seq_q, seq_k):
    variant = attn.get_variant(name)
    assert variant.why_unavailable("cpu", dtype) is None
    q, k, v = qkv(seq_q, seq_k, dtype=dtype)
    with torch.no_grad():
        out = variant.forward(q, k, v, is_causal=is_causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    expected = attn.reference_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out.double(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("name", NAMES)
def test_compiled_once_and_kept(name):
    module = attn.get_variant(name).module
    q, k, v = qkv()
    with torch.no_grad():
        attn.get_variant(name).forward(q, k, v)
        first = module.compiled
        attn.get_variant(name).forward(q, k, v)
    assert first is not None and module.compiled is first


def op_names(call):
    """Names of every event under one profiled forward, after warm-up calls (the compile)."""
    with torch.no_grad():
        for _ in range(3):  # NaiveAttention compiles twice: its first call stores the mask
            call()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with record_function("attn_fwd"):
                call()
    return [e.name for e in prof.events()]


def profiled_op_names(module, q, k, v):
    """The events of `module` compiled as the variants compile it (kernel rows on)."""
    compiled = CompiledAttention(module)
    return op_names(lambda: compiled(q, k, v))


def test_additive_mask_becomes_sdpa():
    names = profiled_op_names(AdditiveMaskAttention(), *qkv())
    assert SDPA_CPU in names
    assert "aten::bmm" not in names
    assert any(n.startswith("## Call CompiledFxGraph") for n in names)
    # SDPA gets the mask as a tensor, not is_causal: a generated kernel builds it on every call.
    mask_kernels = [n for n in names if "cpp_fused" in n and "triu" in n]
    assert len(mask_kernels) == 1, names


def test_masked_fill_stays_two_matmuls_and_one_fused_softmax():
    names = profiled_op_names(NaiveAttention(), *qkv())
    assert names.count("aten::bmm") == 2
    assert not any("scaled_dot_product" in n for n in names)
    # The generated kernel's name lists what it fused: the mask and the softmax in one loop.
    fused = [n for n in names if "cpp_fused" in n and "softmax" in n]
    assert len(fused) == 1 and "masked_fill" in fused[0], names


def test_generated_kernels_are_hidden_without_kernel_profile():
    q, k, v = qkv()
    with torch._inductor.config.patch({"cpp.enable_kernel_profile": False}):  # the default
        compiled = torch.compile(NaiveAttention(), dynamic=False)
        names = op_names(lambda: compiled(q, k, v))
    assert any(n.startswith("## Call CompiledFxGraph") for n in names)
    assert not any("cpp_fused" in n for n in names)
    assert names.count("aten::bmm") == 2  # ops Inductor calls (extern kernels) stay visible


@pytest.mark.parametrize("name", NAMES)
def test_bad_inputs_raise_value_error(name):
    variant = attn.get_variant(name)
    q, k, v = qkv()
    with pytest.raises(ValueError, match="head_dim"):
        variant.forward(q, k[..., :8], v)
    with pytest.raises(ValueError, match="4 dims"):
        variant.forward(q[0], k, v)
    with pytest.raises(ValueError, match="is_causal"):
        variant.forward(q, k, v, is_causal=1)


@pytest.mark.parametrize("name", NAMES)
def test_without_a_cxx_compiler_the_reason_names_it(name, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-c++")
    variant = attn.get_variant(name)
    reason = variant.why_unavailable("cpu")
    assert reason and "no-such-c++" in reason and "C++ compiler" in reason
    with pytest.raises(RuntimeError, match=name) as err:
        variant.forward(*qkv())
    assert reason in str(err.value)


def test_float64_is_supported_but_unknown_devices_are_not():
    variant = attn.get_variant("compiled_additive")
    assert variant.why_unavailable("cpu", torch.float64) is None
    assert "not mps" in variant.module.why_unavailable("mps")
