"""The SDPA chapter's variants (docs/sdpa.md): each backend pinned, and naive scaling the scores."""

from __future__ import annotations

from attn.specs.record import SDPA_CPU_OP, Spec, V
from attn.traces.claims.benchmark_checks import BenchmarkClaim, slower_than
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.dispatch_checks import ran, refused
from attn.traces.claims.shape_checks import (
    never_on_scores,
    on_scores,
    passes_over_scores,
    peak_in_score_matrices,
)
from attn.traces.claims.trace_checks import (
    absent,
    kernel_count,
    kernel_matching,
    launched_with,
    one_kernel_matching,
    present,
    top_level_ops,
)
from attn.traces.read.patterns import (
    CUDNN_KERNEL,
    CUTLASS_KERNEL,
    FLASH_KERNEL,
    FUSED_CPU,
    SOFTMAX_OPS,
    TRIL_KERNEL,
    exactly,
)


def sdpa(name: str, title: str, lesson: str, focus: str | None = None, **facts) -> Spec:
    """SDPA pinned to one backend: the name after `sdpa_` (the example's `--backend`)."""
    backend = name.removeprefix("sdpa_")
    return Spec(
        name, title, lesson, lambda: V.SdpaVariant(backend), "sdpa.md",
        ("examples/sdpa_attention.py", "--backend", backend), ("attn/sdpa.py",), focus, **facts,
    )  # fmt: skip


# fmt: off
SPECS: tuple[Spec, ...] = (
    sdpa(
        "sdpa_math", "SDPA: math backend",
        "the reference path: mask rebuilt per call, safe softmax, many small ops",
        exactly("aten::_safe_softmax"),
        claims=(
            Claim("safe-softmax", "cpu",
                "Uses aten::_safe_softmax, which guards fully masked rows.",
                present("aten::_safe_softmax")),
            Claim("mask-rebuilt-each-call", "cpu",
                "Rebuilds the causal mask on every call: aten::ones, aten::tril, aten::where.",
                present("aten::ones", "aten::tril", "aten::where")),
            Claim("scales-q-and-k", "cpu",
                "Scales q and k before the product, never the scores: no aten::mul takes a "
                "[seq_q, seq_k] input.",
                never_on_scores("aten::mul")),
            Claim("extra-passes-over-scores", "cpu",
                "Makes extra full passes over the [seq_q, seq_k] scores: aten::add_ adds the mask, "
                "aten::isneginf and aten::all look for fully masked rows.",
                on_scores("aten::add_", "aten::isneginf", "aten::all")),
            Claim("gpu-many-kernels-tril", "cuda",
                "10 or more kernels per forward, the mask rebuilt by a tril kernel.",
                both(kernel_count(10, at_least=True), kernel_matching(TRIL_KERNEL))),
            BenchmarkClaim("slower-than-inplace", "cpu",
                "sdpa_math takes more time than the in-place module at every shape benchmarked.",
                slower_than("inplace")),
            BenchmarkClaim("gpu-slower-than-inplace", "cuda",
                "sdpa_math takes more time than the in-place module at every shape benchmarked.",
                slower_than("inplace")),
            BenchmarkClaim("unpinned-with-dropout", "cpu",
                "With dropout_p > 0 and nothing pinned, SDPA runs its math backend, at every dtype "
                "and head_dim tried; pinned to flash, it refuses.",
                both(ran(("sdpa_math",), inputs="dropout"), refused("flash", inputs="dropout")),
                figure="dispatch"),
        ),
        diff_with=("sdpa_flash",), sweeps=("scaling", "benchmark"), holds_scores=True,
    ),
    sdpa(
        "sdpa_efficient", "SDPA: memory-efficient backend",
        "one fused CUTLASS kernel (from xformers); GPU only",
        claims=(
            Claim("gpu-one-cutlass-kernel", "cuda",
                "One fused fmha_cutlassF kernel per forward.",
                one_kernel_matching(CUTLASS_KERNEL)),
            BenchmarkClaim("refuses-every-case", "cpu",
                "Pinned to the memory-efficient backend on a CPU, SDPA refuses every case: no "
                "backend is viable.",
                refused("efficient"), figure="dispatch"),
        ),
        sweeps=("scaling", "benchmark"),
    ),
    sdpa(
        "sdpa_flash", "SDPA: flash backend",
        "one fused op; the score matrix never reaches memory",
        SDPA_CPU_OP,
        claims=(
            Claim("one-fused-op", "cpu",
                f"One fused op, {FUSED_CPU}, and no separate softmax.",
                both(present(FUSED_CPU), absent(*SOFTMAX_OPS))),
            Claim("peak-under-one-score-matrix", "cpu",
                "Peak memory stays under one score matrix: the [seq_q, seq_k] scores are never "
                "allocated.",
                peak_in_score_matrices(0), at_scale=True),
            Claim("gpu-one-flash-kernel", "cuda",
                "One kernel per forward, of FlashAttention's pytorch_flash::flash_fwd family.",
                one_kernel_matching(FLASH_KERNEL)),
            BenchmarkClaim("unpinned-runs-flash", "cpu",
                "With nothing pinned, SDPA runs its flash backend at every dtype and head_dim "
                "tried, with no mask, with is_causal, and with a boolean or a float attn_mask.",
                ran(("sdpa_flash",), inputs=("none", "is_causal", "bool mask", "float mask")),
                figure="dispatch"),
            BenchmarkClaim("gpu-refuses-a-mask", "cuda",
                "On a GPU, flash refuses an explicit attn_mask, boolean or float: pinned, it "
                "raises; unpinned, another backend runs.",
                both(
                    refused("flash", inputs=("bool mask", "float mask")),
                    ran(("sdpa_efficient", "sdpa_cudnn", "sdpa_math"),
                        inputs=("bool mask", "float mask")),
                ),
                figure="dispatch"),
            BenchmarkClaim("gpu-refuses-float32", "cuda",
                "On a GPU, flash refuses float32 inputs: it computes in float16 and bfloat16 only.",
                refused("flash", dtype="float32"), figure="dispatch"),
            BenchmarkClaim("gpu-refuses-head-dim-over-256", "cuda",
                "On a GPU, flash refuses a head_dim over 256 (here 320).",
                refused("flash", head_dim=320), figure="dispatch"),
        ),
        sweeps=("scaling", "benchmark"),
    ),
    sdpa(
        "sdpa_cudnn", "SDPA: cuDNN backend",
        "a generated cuDNN kernel; cost moves to the CPU side; GPU only",
        claims=(
            Claim("gpu-one-cudnn-kernel", "cuda",
                "One cudnn_generated kernel per forward, launched with cuLaunchKernelEx, and no "
                "aten::transpose.",
                both(
                    one_kernel_matching(CUDNN_KERNEL),
                    launched_with("cuLaunchKernelEx"),
                    absent("aten::transpose"),
                )),
            BenchmarkClaim("refuses-every-case", "cpu",
                "Pinned to the cuDNN backend on a CPU, SDPA refuses every case: no backend is "
                "viable.",
                refused("cudnn"), figure="dispatch"),
        ),
        sweeps=("scaling", "benchmark"),
    ),
    Spec(
        "naive_scale_scores", "Naive, scaling the scores",
        "scaling the scores, not q: one more pass over a score matrix",
        lambda: V.ModuleVariant(V.ScoresScaledAttention()), "sdpa.md",
        ("examples/naive_attention.py", "--scale-scores"),
        ("attn/naive.py",),
        focus=exactly("aten::mul"),
        claims=(
            Claim("one-mul-on-scores", "cpu",
                "One aten::mul per forward takes the [batch, heads, seq_q, seq_k] scores: it reads "
                "a score matrix and writes another.",
                passes_over_scores("aten::mul", 1)),
            Claim("ops-follow-the-code", "cpu",
                "The forward's own ops follow the code: aten::transpose (of k), aten::matmul, "
                "aten::mul (the scores by the scale), aten::masked_fill, aten::softmax, "
                "aten::matmul.",
                top_level_ops(
                    "aten::transpose", "aten::matmul", "aten::mul", "aten::masked_fill",
                    "aten::softmax", "aten::matmul",
                )),
            Claim("gpu-one-mul-on-scores", "cuda",
                "One aten::mul per forward takes the [batch, heads, seq_q, seq_k] scores.",
                passes_over_scores("aten::mul", 1)),
        ),
        holds_scores=True,
    ),
)
# fmt: on
