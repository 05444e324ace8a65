"""The custom kernels chapter's variants (docs/custom-kernels.md): our C++, CUDA and Triton ops."""

from __future__ import annotations

from attn.specs.record import Spec, V
from attn.traces.claims.benchmark_checks import BenchmarkClaim, bound_by, ratio_to_baseline_below
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.shape_checks import peak_in_score_matrices
from attn.traces.claims.trace_checks import absent, one_kernel_matching, present
from attn.traces.read.patterns import OUR_CUDA_KERNEL, OUR_TRITON_KERNEL, SOFTMAX_OPS, exactly

# fmt: off
SPECS: tuple[Spec, ...] = (
    Spec(
        "custom_cpu", "Custom C++ kernel (CPU)",
        "our tiled C++ op: one op, online softmax, GEMM tiles",
        lambda: V.CustomCpuVariant(), "custom-kernels.md",
        ("examples/custom_kernel_attention.py", "--impl", "cpu"),
        ("attn/custom_cpu.py", "csrc/cpu/flash_attention_cpu.cpp"),
        focus=exactly("attn::flash_attention_forward"),
        claims=(
            Claim("one-op", "cpu",
                "One op from our library: attn::flash_attention_forward, and no separate softmax.",
                both(present("attn::flash_attention_forward"), absent(*SOFTMAX_OPS, "aten::bmm"))),
            Claim("peak-under-one-score-matrix", "cpu",
                "Peak memory stays under one score matrix: the [seq_q, seq_k] scores are never "
                "allocated.",
                peak_in_score_matrices(0), at_scale=True),
            BenchmarkClaim("compute-bound-float32", "cpu",
                "In float32, compute bounds custom_cpu, not memory: at every shape benchmarked, "
                "its arithmetic intensity is above the machine's balance (its fp32 peak over the "
                "triad's memory bandwidth, both measured in the same run).",
                bound_by("compute", dtype="float32")),
            BenchmarkClaim("under-flash-causal-head-dim-64", "cpu",
                "At head_dim 64, custom_cpu takes less time than sdpa_flash (time ÷ sdpa_flash "
                "under 1) at every causal shape benchmarked, in float32 and in bfloat16.",
                ratio_to_baseline_below(1.0, is_causal=True, head_dim=64)),
            BenchmarkClaim("within-1.25x-of-flash", "cpu",
                "custom_cpu stays within 1.25× of sdpa_flash's time at every shape benchmarked, "
                "causal or not, float32 or bfloat16.",
                ratio_to_baseline_below(1.25)),
        ),
        sweeps=("scaling", "benchmark"), ratio=True,
    ),
    Spec(
        "custom_cuda", "Custom CUDA kernel",
        "our FlashAttention-2-style CUDA kernel: one launch",
        lambda: V.CustomCudaVariant(), "custom-kernels.md",
        ("examples/custom_kernel_attention.py", "--impl", "cuda"),
        ("attn/custom_cuda.py", "csrc/cuda/flash_fwd.cu"),
        claims=(
            Claim("gpu-one-kernel", "cuda",
                "One kernel per forward: our flash_fwd_kernel.",
                one_kernel_matching(OUR_CUDA_KERNEL)),
            BenchmarkClaim("gpu-within-2x-of-flash", "cuda",
                "custom_cuda stays within 2× of sdpa_flash's time at every shape benchmarked.",
                ratio_to_baseline_below(2.0)),
        ),
        sweeps=("scaling", "benchmark"), ratio=True,
    ),
    Spec(
        "custom_triton", "Custom Triton kernel",
        "our Triton kernel: one launch, written in Python",
        lambda: V.CustomTritonVariant(), "custom-kernels.md",
        ("examples/custom_kernel_attention.py", "--impl", "triton"),
        ("attn/custom_triton.py",),
        claims=(
            Claim("gpu-one-kernel", "cuda",
                "One kernel per forward: the Triton _attn_fwd.",
                one_kernel_matching(OUR_TRITON_KERNEL)),
            BenchmarkClaim("gpu-within-2x-of-flash", "cuda",
                "custom_triton stays within 2× of sdpa_flash's time at every shape benchmarked.",
                ratio_to_baseline_below(2.0)),
        ),
        sweeps=("scaling", "benchmark"), ratio=True,
    ),
)
# fmt: on
