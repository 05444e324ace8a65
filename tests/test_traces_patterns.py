"""The name table: each family on a name as traces spell it, what it must not take for attention,
and the names the claims and checks match, which agree with the table."""

import re

import pytest

from attn.traces.read.patterns import (
    ANY_COMPILED_REGION,
    AOTRITON_KERNEL,
    BOOKKEEPING_OPS,
    FLASH_BACKWARD_KERNEL,
    FUSED_CPU,
    FUSED_CPU_BACKWARD,
    MOVES_DATA,
    NUMBERED_COMPILED_REGION,
    OP_NAME,
    PAGED_ROCM_KERNEL,
    SDPA_BACKEND_OP,
    SDPA_OPS,
    SOFTMAX,
    SOFTMAX_MASK_CPP,
    SOFTMAX_MASK_TRITON,
    SOFTMAX_OPS,
    exactly,
    row_for,
    says_attention,
)

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
    ("sage_quant_kernel", "quantised"),  # SageAttention (aiter): no attention word in its names
    ("sage_fwd", "quantised"),
    # Kernels derived from Triton's fused-attention tutorial: their names say no attention.
    ("_fwd_kernel", "custom"),  # LightLLM, vLLM's prefix prefill, SGLang's extend
    ("_fwd_kernel_splitK", "custom"),  # xformers' split-K decode
    ("_attn_fwd_ws", "custom"),
    ("_fwd_kernel_stage1", "paged"),  # Triton decode attention, a stage of its own
    # Vendors' fused attention.
    ("void flashinfer::BatchMLAPagedAttentionKernel<true, 128>", "paged"),
    ("fmha_v2_flash_attention_fp16_64_128_S_qkv_128_causal_sm80_kernel_nl", "custom"),
    ("void transformer_engine::fused_attn::cudnn_fused_attn_fwd<bf16>", "custom"),
    ("_ZN7ck_tile6kentryILi2ENS_13FmhaFwdKernelINS_26BlockFmhaPipelineQRKSVSAsync", "custom"),
    ("_ZN5aiter33fmha_fwd_hd128_bf16_causal_rtne_gfx942E", "custom"),
    # Names that mention attention without being attention.
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", None),
    ("triton_tem_fused_mm_0", None),  # a max-autotune GEMM template: no row at all
    # Inductor's layout kernels, named after the ops fused into them.
    ("triton_poi_fused__scaled_dot_product_flash_attention_cat_0", None),
    ("triton_red_fused__scaled_dot_product_efficient_attention_backward_sum_3", None),
    ("triton_per_fused_flex_attention_backward_2", None),
    ("graph_0_cpp_fused__scaled_dot_product_flash_attention_for_cpu_full_triu_0", None),
    # Triton kernels of other ops whose names end in fwd_kernel.
    ("_layer_norm_fwd_1pass_kernel", None),
    ("_chunk_scan_fwd_kernel", None),
]
BACKWARD = [  # (a backward's name as a trace spells it, its implementation)
    ("aten::_scaled_dot_product_flash_attention_backward", "sdpa_flash"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "sdpa_flash"),
    ("aten::_scaled_dot_product_efficient_attention_backward", "sdpa_efficient"),
    ("aten::_scaled_dot_product_cudnn_attention_backward", "sdpa_cudnn"),
    ("void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64> >", "sdpa_flash"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_kernel<>", "sdpa_flash"),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel)", "sdpa_efficient"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128", "sdpa_cudnn"),
    ("triton_tem_fused_flex_attention_backward_0", "flex"),
    ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<int, int>, 128> >(flash::FlashAttnBwdPreprocess)", "custom"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<flash::CollectiveMainloopBwdSm90<2> > > >()", "custom"),
    ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128> >", "custom"),
    ("flash_attn_3::_flash_attn_backward", "custom"),
    ("attn::flash_attention_backward", "custom"),
    ("_attn_bwd_preprocess", "custom"),  # Triton's tutorial: the preprocess starts a call
    ("_attn_bwd", "custom"),
    ("_bwd_kernel", "custom"),
    ("_ZN7ck_tile6kentryILi2ENS_20FmhaBwdDQDKDVKernelINS_", "custom"),
    ("_attn_bwd_dkdv", "custom"),  # this project's Triton backward
    ("void (anonymous namespace)::flash_bwd_dq_kernel(FlashBwdParams)", "custom"),  # and CUDA
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "starts"),
    [
        ("_attn_bwd_preprocess", True),
        ("_attn_bwd_dkdv", False),
        ("_attn_bwd_dq", False),
        ("void (anonymous namespace)::flash_bwd_delta_kernel(FlashBwdParams)", True),
        ("flash_bwd_dkdv_kernel", False),
        ("void (anonymous namespace)::flash_bwd_dq_kernel(FlashBwdParams)", False),
    ],
)
def test_our_backward_kernels_are_named_ours_and_the_first_starts_a_call(name, starts):
    """Our Triton backward keeps the tutorial's _attn_bwd prefix; it is labelled as ours, not the
    tutorial's, and its delta kernel (D = rowsum(dO * O)) starts a call as the tutorial's does."""
    row = row_for(name)
    assert row.what.startswith("this project's") and row.backward
    assert row.helper is not starts


@pytest.mark.parametrize(("name", "implementation"), NAMES)
def test_a_name_says_its_implementation(name, implementation):
    row = row_for(name)
    assert (row.implementation if row else None) == implementation
    assert row is None or not row.backward


@pytest.mark.parametrize(("name", "implementation"), BACKWARD)
def test_a_backward_says_its_implementation_and_pass(name, implementation):
    row = row_for(name)
    assert row is not None and (row.implementation, row.backward) == (implementation, True)


def test_a_backward_is_one_call_started_by_its_first_kernel():
    """FlashAttention's backward: dot(dO, O) first starts a call, the loop and dQ's convert finish
    it; a lone kernel of a family (cutlassB) is a call of its own."""
    assert not row_for("void pytorch_flash::flash_bwd_dot_do_o_kernel<>").helper
    assert row_for("void pytorch_flash::flash_bwd_convert_dq_kernel<>").helper
    assert not row_for("fmha_cutlassB_f16_aligned_64x64_k64_sm80").helper


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


def test_exactly_matches_the_whole_name_and_nothing_longer():
    assert exactly("aten::clone") == "^aten::clone$"
    assert re.search(exactly("aten::masked_fill"), "aten::masked_fill")
    assert not re.search(exactly("aten::masked_fill"), "aten::masked_fill_")
    assert re.search(exactly("a.b"), "a.b") and not re.search(exactly("a.b"), "axb")


def test_the_numbered_compiled_region_is_dynamo_s_own_of_the_compiled_regions():
    numbered = "Torch-Compiled Region: 3/1"
    match = re.match(NUMBERED_COMPILED_REGION, numbered)
    assert match and match.groups() == ("3", "1")  # <frame>/<compile>
    assert re.search(ANY_COMPILED_REGION, numbered)
    for other in ("CompiledFunction", "## Call CompiledFxGraph f3abc ##", "Torch-Compiled Region"):
        assert re.search(ANY_COMPILED_REGION, other) and not re.match(
            NUMBERED_COMPILED_REGION, other
        )


def test_the_claims_names_say_what_the_table_says():
    assert row_for(FUSED_CPU).implementation == "sdpa_flash" and FUSED_CPU in SDPA_OPS
    assert (row_for(FUSED_CPU_BACKWARD).implementation, row_for(FUSED_CPU_BACKWARD).backward) == (
        "sdpa_flash",
        True,
    )
    assert all(re.search(SOFTMAX, name) for name in SOFTMAX_OPS)
    assert all(re.search(SDPA_BACKEND_OP, name) for name in SDPA_OPS if name.startswith("aten::_"))
    kernels = [  # (a kernel as a trace spells it, the claims' pattern for it)
        ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_kernel<>", FLASH_BACKWARD_KERNEL),
        ("attn_fwd", AOTRITON_KERNEL),
        ("void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16>", PAGED_ROCM_KERNEL),
    ]
    for name, pattern in kernels:
        assert row_for(name).pattern == pattern, name


def test_generated_softmax_kernels_are_named_after_what_they_fused():
    assert re.search(SOFTMAX_MASK_CPP, "graph_0_cpp_fused__softmax_masked_fill_0")
    assert re.search(SOFTMAX_MASK_TRITON, "triton_per_fused__softmax_masked_fill_0")
    assert not re.search(SOFTMAX_MASK_CPP, "cpp_fused__softmax_0")  # no mask fused in
    assert re.search(SOFTMAX, "triton_per_fused__softmax_masked_fill_0")  # eager's softmax too


def test_what_moves_data_and_what_is_bookkeeping():
    assert re.search(MOVES_DATA, "aten::clone") and re.search(MOVES_DATA, "Memcpy DtoD")
    assert "aten::view" in BOOKKEEPING_OPS and not re.search(MOVES_DATA, "aten::view")
    assert re.findall(OP_NAME, "aten::clone under attn::flash_attention_forward, not x::y") == [
        "aten::clone",
        "attn::flash_attention_forward",
    ]
