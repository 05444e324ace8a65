"""The name table: each family on a name as traces spell it, and what it must not take for attention."""

import pytest

from attn.traces.patterns import row_for, says_attention

NAMES = [  # (name as a trace spells it, the implementation it says, or None: not attention)
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "sdpa_flash"),
    ("aten::_scaled_dot_product_cudnn_attention", "sdpa_cudnn"),
    ("aten::_scaled_dot_product_attention_math", "sdpa_math"),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4> >",
        "sdpa_flash",
    ),
    (
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
        "sdpa_efficient",
    ),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64", "sdpa_cudnn"),
    ("attn_fwd", "sdpa_flash"),  # AOTriton, on ROCm
    ("triton_tem_fused_flex_attention_0", "flex"),
    ("triton_tem_fused_0", "flex"),
    ("graph_0_kernel", "flex"),
    ("attn::flash_attention_forward", "custom"),
    ("_attn_fwd", "custom"),
    ("flash_attn::_flash_attn_forward", "custom"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64> >", "custom"),
    ("void vllm::paged_attention_v1_kernel<__nv_bfloat16, 128, 16>", "paged"),
    ("kernel_unified_attention_3d", "paged"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<128, 4>", "paged"),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128", "paged"),
    ("vllm::unified_attention_with_output", "paged"),
    ("sglang_profiler::attention_paged_attention_ragged_100", "paged"),
    # Names that mention attention without being a forward of it.
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", None),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_kernel<>", None),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", None),
    ("triton_tem_fused_mm_0", None),  # a max-autotune GEMM template: no row at all
]


@pytest.mark.parametrize(("name", "implementation"), NAMES)
def test_a_name_says_its_implementation(name, implementation):
    row = row_for(name)
    assert (row.implementation if row else None) == implementation


@pytest.mark.parametrize(
    ("kernel", "mentions"),
    [
        ("void my_lib::fancy_attention_fwd<float>(float*)", True),  # unknown, reported as such
        ("void tensorrt_llm::quantize<flashinfer::Layout>(int)", False),  # only in an argument
        ("void at::native::cunn_SoftMaxForward<8, float>(float*)", False),
    ],
)
def test_an_unknown_kernel_counts_by_its_own_name(kernel, mentions):
    assert row_for(kernel) is None and says_attention(kernel) is mentions
