"""One spec per variant: every fact about it, in one place, in chapter order.

Everything that lists variants reads this table: the registry (`attn.variants()`), the examples that
`nox -s profile_examples` runs, the diffs, the screenshots, the sweeps, the sources the site
publishes and the tests' parametrisation. Adding a variant with a chapter is its module, its example,
its chapter, its entry here and its nav line in mkdocs.yml.

A claim is keyed by a short name unique within its variant; a chapter shows it with
`<!-- profile-claim: VARIANT KEY -->`. Claims are data built from the checks in attn.traces (logic),
and every op or kernel name they match by pattern comes from attn.traces.read.patterns.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from attn.traces.claims.benchmark_checks import (
    BenchmarkClaim,
    bound_by,
    keeps_times,
    ratio_to_baseline_below,
    slower_than,
)
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.dispatch_checks import ran, refused
from attn.traces.claims.public_checks import (
    attention_share,
    diagnosed,
    each_op_launches,
    kernels_launched_under,
    kinds_apart,
    longest_kernel,
    op_chain,
    reported_on_every_call,
)
from attn.traces.claims.rank_checks import (
    RankClaim,
    blocks_per_rank,
    imbalance_above,
    imbalance_below,
    sends_carry_a_kv_block,
    sends_per_rank,
    straggler_is,
)
from attn.traces.claims.shape_checks import (
    INPUT_SIZED,
    ROW_STATISTIC,
    SCORE_SIZED,
    copies_of_scores_and_scalar,
    frees_a_score_matrix,
    keeps,
    never_on_scores,
    on_scores,
    only_scalar_copies,
    passes_over_scores,
    peak_holds_the_copies,
    peak_in_score_matrices,
    repeat_copies,
    score_sized_input,
)
from attn.traces.claims.step_checks import profiled_over_timed
from attn.traces.claims.trace_checks import (
    END,
    absent,
    backward_over_forward,
    cold_call_costs_more,
    compile_costs_forwards,
    copy_kernels,
    costs_more,
    generated_kernel,
    in_backward,
    kernel_count,
    kernel_matching,
    launched_with,
    longest_gaps,
    memcpys,
    one_kernel_matching,
    only_under,
    op_under,
    ops_per_forward,
    present,
    runs_a_recompilation,
    second_call_cheaper,
    top_level_ops,
)
from attn.traces.read.patterns import (
    AOTRITON_KERNEL,
    CUDNN_KERNEL,
    CUTLASS_KERNEL,
    FLASH_BACKWARD_KERNEL,
    FLASH_KERNEL,
    FLEX_CPU_KERNEL,
    FLEX_KERNEL,
    FUSED_CPU,
    FUSED_CPU_BACKWARD,
    INDUCTOR_TEMPLATE,
    INDUCTOR_TRITON,
    MASK_BUILD_CPP,
    MEMCPY_DTOD,
    OUR_CUDA_KERNEL,
    OUR_TRITON_KERNEL,
    PAGED_ROCM_KERNEL,
    RING_BLOCK_OP,
    SDPA_BACKEND_OP,
    SDPA_OPS,
    SOFTMAX_KERNEL,
    SOFTMAX_MASK_CPP,
    SOFTMAX_MASK_TRITON,
    SOFTMAX_OPS,
    TRIL_KERNEL,
    exactly,
)

if TYPE_CHECKING:
    from attn.variant import Variant


class _Lazy:
    """The variants' classes, each imported when a variant is first made: the specs themselves are
    data (names, claims, chapters) that the trace commands read where torch is not installed."""

    def __init__(self, **homes: str) -> None:
        self._homes = homes

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self._homes[name]), name)


V = _Lazy(
    AdditiveMaskAttention="attn.compiled",
    CompiledAttention="attn.compiled",
    CustomCpuVariant="attn.custom_cpu",
    CustomCudaVariant="attn.custom_cuda",
    CustomTritonVariant="attn.custom_triton",
    EnableGqaAttention="attn.decode",
    RepeatKVAttention="attn.decode",
    FlexAttention="attn.flex",
    backward_problem="attn.flex",
    sliding_window="attn.flex",
    InPlaceAttention="attn.inplace",
    NaiveAttention="attn.naive",
    ScoresScaledAttention="attn.naive",
    RingVariant="attn.registry",
    SdpaAttention="attn.sdpa",
    Variant="attn.variant",
    reference_attention="attn.reference",
    DecodeVariant="attn.registry",
    GeneratedVariant="attn.registry",
    ModuleVariant="attn.registry",
    SdpaVariant="attn.registry",
    TrainingVariant="attn.registry",
)

SDPA_CPU_OP = exactly(FUSED_CPU)


@dataclasses.dataclass(frozen=True)
class Spec:
    """Everything the project knows about one variant."""

    name: str
    title: str
    lesson: str  # the one line the at-a-glance table says about it
    make: Callable[[], Variant]  # the variant object, without its name (the registry adds it)
    chapter: str  # the page in docs/ that teaches it
    example: tuple[str, ...]  # the script that profiles it, then that script's own flags
    # Files its chapter excerpts besides the example, published whole with the site.
    sources: tuple[str, ...] = ()
    focus: str | None = None  # the CPU event its trace-viewer screenshot selects (a regex)
    gpu_focus: str | None = None  # the same on a GPU; by default its first kernel
    claims: tuple[Claim, ...] = ()
    diff_with: tuple[str, ...] = ()  # variants whose runs are diffed against its (it -> them)
    # "scaling" (seq), "benchmark" (beside the baseline), "decoding", "training" (saved bytes, seq)
    sweeps: tuple[str, ...] = ()
    ratio: bool = False  # in the benchmark, its time ÷ the baseline's is reported and claimed
    holds_scores: bool = False  # materialises the [batch, heads, seq, seq] scores
    inputs: str = "square"  # "square": q, k, v alike; "decode": new tokens against a GQA KV cache
    trains: bool = False  # profiled as a training step: attn_fwd, a loss, attn_bwd
    # Its example times its first calls (compile.json): run once more before, on empty caches.
    times_first_calls: bool = False

    @property
    def trace_claims(self) -> list[Claim]:
        """The claims checked on the variant's own trace."""
        return [c for c in self.claims if not isinstance(c, BenchmarkClaim | RankClaim)]

    @property
    def rank_claims(self) -> list[RankClaim]:
        """The claims checked across the ranks of a variant run on several (its summary's rows)."""
        return [c for c in self.claims if isinstance(c, RankClaim)]

    @property
    def ranks(self) -> int:
        """How many ranks its example starts (its `--world N`), each writing a rank<r>/ folder of
        its own; 1 for an example that runs in one process."""
        flags = self.example[1:]
        return int(flags[flags.index("--world") + 1]) if "--world" in flags else 1

    @property
    def benchmark_claims(self) -> list[BenchmarkClaim]:
        """The claims checked on a set's benchmark.json rows."""
        return [c for c in self.claims if isinstance(c, BenchmarkClaim)]


REFERENCE = "naive"  # speedups on the site are over this one
BENCHMARK_BASELINE = "sdpa_flash"  # the benchmark reports times as multiples of this one's


def sdpa(backend: str, title: str, lesson: str, focus: str | None = None, **facts) -> Spec:
    return Spec(
        f"sdpa_{backend}", title, lesson, lambda: V.SdpaVariant(backend), "sdpa.md",
        ("examples/sdpa_attention.py", "--backend", backend), ("attn/sdpa.py",), focus, **facts,
    )  # fmt: skip


COMPILED = ("examples/compiled_attention.py",), ("attn/compiled.py", "attn/naive.py")
FIRST_CALL = Claim(  # every compiled and Flex variant's
    "first-call-costs", "cpu",
    "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
    compile_costs_forwards(10), at_scale=True,
)  # fmt: skip
COLD_FIRST_CALL = Claim(  # the same variants'
    "cold-first-call-costs-more", "cpu",
    "With empty compile caches (cold), the first call costs more than twice what it costs warm: "
    "the cache spares Inductor's code generation and the build.",
    cold_call_costs_more(2),
)  # fmt: skip
TEMPLATE_KERNEL = Claim(  # both Flex variants'
    "gpu-one-template-kernel", "cuda",
    "On a GPU, one generated Triton template kernel (triton_tem_) per forward.",
    one_kernel_matching(FLEX_KERNEL),
)  # fmt: skip
FLEX = ("examples/flex_attention.py",), ("attn/flex.py",)


def generated(name, title, lesson, make, files, flags, focus, **facts) -> Spec:
    """A compiled or FlexAttention variant: its module under torch.compile."""
    (script,), sources = files
    return Spec(
        name, title, lesson, lambda: V.GeneratedVariant(make()), "compiled-and-flex.md",
        (script, *flags), sources, focus, times_first_calls=True, **facts,
    )  # fmt: skip


def train(impl, title, lesson, make, sources, focus, *, backward_problem=None, **facts) -> Spec:
    """A training step through another variant's attention (the training example's `--impl`)."""
    return Spec(
        f"train_{impl}", title, lesson, lambda: V.TrainingVariant(make(), backward_problem),
        "training.md", ("examples/training_attention.py", "--impl", impl), sources, focus,
        trains=True, **facts,
    )  # fmt: skip


def ring(sharding: str, title: str, lesson: str, **facts) -> Spec:
    """Ring attention with one sharding, its example started on 2 ranks (gloo on a CPU), causal."""
    return Spec(
        f"ring_{sharding}", title, lesson, lambda: V.RingVariant(sharding), "context-parallel.md",
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


CHAPTER_SEQ = 1024  # the training chapter's sequence length (default_config's, CPU and GPU)


def keeps_score_sized(key: str, device_type: str, what: str) -> Claim:
    return Claim(key, device_type,
        f"Autograd keeps a score-sized tensor for the backward: {what}.",
        keeps(SCORE_SIZED))  # fmt: skip


def keeps_row_statistic(key: str, device_type: str, what: str) -> Claim:
    return Claim(key, device_type,
        f"Autograd keeps {what} and one number per query row (the logsumexp, [batch, heads, "
        "seq_q]): nothing score-sized.",
        keeps(ROW_STATISTIC, lacks=(SCORE_SIZED,)))  # fmt: skip


# fmt: off
SPECS: tuple[Spec, ...] = (
    Spec(
        "naive", "Naive attention",
        "out-of-place masked_fill copies the whole score matrix",
        lambda: V.ModuleVariant(V.NaiveAttention()), "naive.md",
        ("examples/naive_attention.py",),
        ("attn/naive.py",),
        focus=exactly("aten::clone"), gpu_focus=MEMCPY_DTOD,
        claims=(
            Claim("clone-under-masked-fill", "cpu",
                "Masking clones the scores: aten::clone under aten::masked_fill.",
                op_under("aten::masked_fill", "aten::clone")),
            Claim("clone-costs-more-than-scale", "cpu",
                "The clone costs more CPU time than the scale step: aten::clone copies a "
                "[seq_q, seq_k] matrix per head, aten::mul scales q, only [seq_q, head_dim].",
                costs_more("aten::clone", "aten::mul"), at_scale=True),
            Claim("peak-two-score-matrices", "cpu",
                "Peak memory is two score matrices, not three: the unmasked scores are freed as "
                "soon as their masked copy replaces them, before the softmax writes its output.",
                peak_in_score_matrices(2)),
            Claim("matmul-views-and-bmm", "cpu",
                "Under aten::matmul: aten::expand and aten::reshape, which only make views, and "
                "aten::bmm, which multiplies.",
                both(
                    op_under("aten::matmul", "aten::expand"),
                    op_under("aten::matmul", "aten::reshape"),
                    op_under("aten::matmul", "aten::bmm"),
                )),
            Claim("gaps-after-masking-and-at-end", "cpu",
                "The two longest gaps between ops inside attn_fwd come after aten::masked_fill and "
                "at its end: where score-sized tensors are freed, which takes time but is no op.",
                longest_gaps("after aten::masked_fill", END), at_scale=True),
            Claim("copy-row-adds-two-copies", "cpu",
                "The one aten::copy_ row of the table adds up two different copies: the scores, "
                "under aten::clone, and a 0-dim scalar, the scale, under aten::mul.",
                copies_of_scores_and_scalar),
            Claim("ops-follow-the-code", "cpu",
                "The forward's own ops follow the code: aten::mul (q by the scale), aten::transpose "
                "(of k), aten::matmul, aten::masked_fill, aten::softmax, aten::matmul.",
                top_level_ops(
                    "aten::mul", "aten::transpose", "aten::matmul", "aten::masked_fill",
                    "aten::softmax", "aten::matmul",
                ),  # fmt: skip
            ),
            Claim("scale-converted-under-mul", "cpu",
                "Under aten::mul sit aten::to and, under it, aten::_to_copy: the Python float "
                "scale becomes a tensor before the multiplication.",
                both(op_under("aten::mul", "aten::to"), op_under("aten::to", "aten::_to_copy"))),
            Claim("transpose-is-a-view", "cpu",
                "aten::transpose copies nothing: only aten::as_strided runs under it, a view.",
                only_under("aten::transpose", "aten::as_strided")),
            Claim("frees-are-memory-events", "cpu",
                "Every forward frees a score matrix or more at once: a [memory] event of a "
                "negative size, which the table has no row for.",
                frees_a_score_matrix),
            Claim("gpu-five-kernels-and-a-memcpy", "cuda",
                "5 kernels per forward, plus one device-to-device Memcpy: the clone in masked_fill.",
                both(kernel_count(5), memcpys("DtoD", 1))),
            Claim("gpu-peak-two-score-matrices", "cuda",
                "Peak memory is two score matrices, not three (the scores and the softmax output).",
                peak_in_score_matrices(2)),
        ),
        diff_with=("inplace", "naive_scale_scores"), sweeps=("scaling",), holds_scores=True,
    ),
    Spec(
        "inplace", "In-place masking",
        "masked_fill_, in place, removes that copy",
        lambda: V.ModuleVariant(V.InPlaceAttention()), "inplace.md",
        ("examples/inplace_attention.py",),
        ("attn/inplace.py",),
        focus=exactly("aten::masked_fill_"),
        claims=(
            Claim("no-clone", "cpu",
                "No aten::clone under attn_fwd, and no aten::copy_ of the scores (only of the "
                "scale factor).",
                both(absent("aten::clone"), only_scalar_copies)),
            Claim("masked-fill-alone", "cpu",
                "The masking step is one op, aten::masked_fill_, with nothing under it.",
                only_under("aten::masked_fill_")),
            Claim("peak-still-two-score-matrices", "cpu",
                "Peak memory is still two score matrices, as in naive: the scores and the softmax "
                "output. Masking in place saves an allocation and a copy, not the peak.",
                peak_in_score_matrices(2)),
            Claim("one-gap-at-end", "cpu",
                "The one long gap between ops inside attn_fwd is at its end, where the scores and "
                "the softmax output are freed: masking in place frees nothing.",
                longest_gaps(END, alone=True), at_scale=True),
            Claim("gpu-five-kernels-no-memcpy", "cuda",
                "5 kernels per forward and no Memcpy.",
                both(kernel_count(5), memcpys("DtoD", 0))),
            Claim("gpu-peak-still-two-score-matrices", "cuda",
                "Peak memory is still two score matrices, as in naive: the scores and the softmax "
                "output.",
                peak_in_score_matrices(2)),
        ),
        diff_with=("sdpa_math",), sweeps=("scaling", "benchmark"), holds_scores=True,
    ),
    sdpa(
        "math", "SDPA: math backend",
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
        "efficient", "SDPA: memory-efficient backend",
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
        "flash", "SDPA: flash backend",
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
        "cudnn", "SDPA: cuDNN backend",
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
    generated(
        "compiled_naive", "torch.compile: naive attention",
        "masked_fill stays two matmuls around one generated softmax kernel",
        lambda: V.CompiledAttention(V.NaiveAttention()),
        COMPILED, ("--mask", "masked_fill"), SOFTMAX_MASK_CPP,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("runs-a-recompilation", "cpu",
                "Its profiled forwards run in a recompilation: the second number of their "
                "Torch-Compiled Region is 1 or more (0 is the frame's first compilation).",
                runs_a_recompilation),
            Claim("bmm-around-generated-softmax", "cpu",
                "Compile keeps the masked_fill version as two aten::bmm around one generated "
                "softmax-and-mask kernel, and calls no SDPA op.",
                both(
                    ops_per_forward("aten::bmm", 2),
                    generated_kernel(SOFTMAX_MASK_CPP),
                    absent(*SDPA_OPS),
                )),
            Claim("gpu-triton-softmax-kernel", "cuda",
                "On a GPU the generated code is Triton: a kernel fusing softmax and masked_fill.",
                kernel_matching(SOFTMAX_MASK_TRITON)),
        ),
        diff_with=("naive",),
    ),
    generated(
        "compiled_additive", "torch.compile: additive mask",
        "an additive mask is recognised: Inductor calls SDPA's fused kernel",
        lambda: V.CompiledAttention(V.AdditiveMaskAttention()),
        COMPILED, ("--mask", "additive"), SDPA_CPU_OP,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("second-call-is-cheap", "cpu",
                "The second call costs under a tenth of the first: it reuses the compiled code.",
                second_call_cheaper(10), at_scale=True),
            Claim("calls-sdpa", "cpu",
                f"With an additive mask, Inductor's pattern matcher calls SDPA: one {FUSED_CPU} "
                "per forward and no aten::bmm.",
                both(ops_per_forward(FUSED_CPU, 1), absent("aten::bmm"))),
            Claim("mask-built-each-forward", "cpu",
                "The mask reaches SDPA as a tensor: a generated kernel builds it (full, triu) on "
                "every forward.",
                generated_kernel(MASK_BUILD_CPP)),
        ),
    ),
    generated(
        "flex_causal", "FlexAttention: causal",
        "a mask written as a Python function, compiled into one kernel",
        lambda: V.FlexAttention(),
        FLEX, ("--mask", "causal"), FLEX_CPU_KERNEL,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("one-generated-kernel", "cpu",
                "Compiled FlexAttention is one generated kernel per forward, with no aten::bmm or "
                "softmax.",
                both(generated_kernel(FLEX_CPU_KERNEL), absent("aten::bmm", *SOFTMAX_OPS))),
            TEMPLATE_KERNEL,
        ),
    ),
    generated(
        "flex_sliding_window", "FlexAttention: sliding window of 256 keys",
        "tiles outside the window are skipped, not computed and masked",
        lambda: V.FlexAttention(V.sliding_window(256)),
        FLEX, ("--mask", "sliding_window"), FLEX_CPU_KERNEL,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("one-generated-kernel", "cpu",
                "The sliding window compiles to one generated kernel per forward too: the mask is "
                "code.",
                both(generated_kernel(FLEX_CPU_KERNEL), absent("aten::bmm", *SOFTMAX_OPS))),
            TEMPLATE_KERNEL,
        ),
    ),
    Spec(
        "decode_repeat_kv", "Decoding: GQA by repeat_interleave",
        "repeat_interleave copies K and V to every query head, each step",
        lambda: V.DecodeVariant(V.RepeatKVAttention()), "decoding.md",
        ("examples/decode_attention.py", "--gqa", "repeat"),
        ("attn/decode.py", "attn/profiling/decoding.py"),
        focus=exactly("aten::repeat_interleave"),
        claims=(
            Claim("repeat-copies-the-cache", "cpu",
                "repeat_interleave materialises K and V: two aten::repeat_interleave per forward, "
                "each an aten::copy_ of the whole repeated cache.",
                repeat_copies(2)),
            Claim("peak-holds-the-copies", "cpu",
                "A forward's peak memory holds both copies.",
                peak_holds_the_copies),
            Claim("one-fused-op", "cpu",
                f"Attention itself is one fused op over the copies: {FUSED_CPU}.",
                present(FUSED_CPU)),
            Claim("gpu-two-copy-kernels", "cuda",
                "Two copy kernels per forward (the repeats of K and V) before attention.",
                copy_kernels(2)),
        ),
        diff_with=("decode_enable_gqa",), sweeps=("decoding",), inputs="decode",
    ),
    Spec(
        "decode_enable_gqa", "Decoding: GQA with enable_gqa",
        "enable_gqa reads each KV head in place: no copy of the cache",
        lambda: V.DecodeVariant(V.EnableGqaAttention()), "decoding.md",
        ("examples/decode_attention.py", "--gqa", "enable_gqa"),
        ("attn/decode.py",),
        focus=SDPA_CPU_OP,
        claims=(
            Claim("no-copy", "cpu",
                "No copy of the cache: no aten::repeat_interleave, aten::clone or aten::copy_.",
                absent("aten::repeat_interleave", "aten::clone", "aten::copy_")),
            Claim("one-fused-op", "cpu",
                f"One fused op reads each KV head in place for its query heads: {FUSED_CPU}.",
                present(FUSED_CPU)),
            Claim("gpu-no-copy", "cuda",
                "No copy kernel and no Memcpy: the attention kernels read K and V where they are.",
                both(copy_kernels(0), memcpys("DtoD", 0))),
        ),
        sweeps=("decoding",), inputs="decode",
    ),
    train(
        "naive", "Training: naive attention",
        "autograd keeps the score-sized softmax output for the backward",
        lambda: V.ModuleVariant(V.NaiveAttention()), ("attn/naive.py",), exactly("SoftmaxBackward0"),
        claims=(
            Claim("keeps-scores-and-inputs", "cpu",
                "Autograd keeps a score-sized tensor for the backward, the softmax's output (the "
                "second matmul needs it too: one storage, counted once), beside q scaled, k, v and "
                "the [seq_q, seq_k] mask.",
                keeps(SCORE_SIZED, INPUT_SIZED, "seq_q × seq_k")),
            Claim("step-peak-three-score-matrices", "cpu",
                "Forward and backward together peak at three score matrices or more: the saved "
                "softmax output, and the gradients of the scores the backward computes.",
                peak_in_score_matrices(3, at_least=True, key="peak_memory_step_bytes"),
                at_scale=True),
            BenchmarkClaim("keeps-4x-flash", "cpu",
                f"From {CHAPTER_SEQ} tokens on (the chapter's length), train_naive keeps at least "
                "4× the bytes train_sdpa_flash keeps for the backward.",
                keeps_times(4, "train_sdpa_flash", CHAPTER_SEQ), figure="training"),
            BenchmarkClaim("profiled-over-timed", "cpu",
                "At every training step, the profiled forward plus backward takes longer than "
                "the whole step timed without the profiler, though the step also holds the loss.",
                profiled_over_timed, figure="timing"),
            keeps_score_sized("gpu-keeps-scores", "cuda", "the softmax's output"),
            BenchmarkClaim("gpu-keeps-4x-flash", "cuda",
                f"From {CHAPTER_SEQ} tokens on, train_naive keeps at least 4× the bytes "
                "train_sdpa_flash keeps for the backward.",
                keeps_times(4, "train_sdpa_flash", CHAPTER_SEQ), figure="training"),
        ),
        diff_with=("train_inplace",), sweeps=("training",),
    ),
    train(
        "inplace", "Training: in-place masking",
        "masking in place is allowed under autograd, but the backward copies the gradient",
        lambda: V.ModuleVariant(V.InPlaceAttention()), ("attn/inplace.py",), exactly("aten::clone"),
        claims=(
            Claim("allowed-no-clone", "cpu",
                "Masking in place is allowed under autograd: the forward has no aten::clone, and "
                "the backward runs MaskedFillBackward0 without complaint.",
                both(absent("aten::clone"), in_backward(present("MaskedFillBackward0")))),
            Claim("backward-clones-the-gradient", "cpu",
                "The copy is back in the backward: MaskedFillBackward0 masks the gradient with an "
                "out-of-place masked_fill, whose aten::clone copies a score-sized tensor.",
                in_backward(both(
                    op_under("MaskedFillBackward0", "aten::clone"),
                    score_sized_input("aten::clone"),
                ))),
            Claim("keeps-what-naive-keeps", "cpu",
                "Autograd keeps the same score-sized softmax output as naive's: masking in place "
                "saves a copy in the forward, not what is kept for the backward.",
                keeps(SCORE_SIZED)),
            keeps_score_sized("gpu-keeps-what-naive-keeps", "cuda", "the softmax's output"),
        ),
    ),
    train(
        "sdpa_math", "Training: SDPA math backend",
        "the math backend is ops: its backward keeps score-sized weights too",
        lambda: V.SdpaVariant("math"), ("attn/sdpa.py",), exactly("SafeSoftmaxBackward0"),
        claims=(
            Claim("keeps-weights", "cpu",
                "The math backend is ordinary ops under autograd: it keeps its score-sized "
                "attention weights for the backward, which runs SafeSoftmaxBackward0.",
                both(keeps(SCORE_SIZED), in_backward(present("SafeSoftmaxBackward0")))),
            keeps_score_sized("gpu-keeps-weights", "cuda", "the attention weights"),
        ),
    ),
    train(
        "sdpa_flash", "Training: SDPA flash backend",
        "flash keeps one number per row and recomputes the scores in the backward",
        lambda: V.SdpaVariant("flash"), ("attn/sdpa.py",), exactly(FUSED_CPU_BACKWARD),
        claims=(
            keeps_row_statistic("keeps-row-statistic", "cpu", "q, k, v, the output"),
            Claim("one-fused-backward", "cpu",
                f"The backward is one fused op too, {FUSED_CPU_BACKWARD}, with no softmax and no "
                "aten::bmm: it recomputes the scores tile by tile.",
                in_backward(both(
                    present(FUSED_CPU_BACKWARD), absent(*SOFTMAX_OPS, "aten::bmm")
                ))),
            Claim("step-peak-under-one-score-matrix", "cpu",
                "Forward and backward together stay under one score matrix.",
                peak_in_score_matrices(0, key="peak_memory_step_bytes"), at_scale=True),
            Claim("backward-twice-forward", "cpu",
                "The backward takes more than twice the forward's time: it recomputes the scores "
                "and computes the gradients of q, k and v.",
                backward_over_forward(2), at_scale=True),
            keeps_row_statistic("gpu-keeps-row-statistic", "cuda", "q, k, v, the output"),
            Claim("gpu-flash-backward-kernel", "cuda",
                "The backward runs FlashAttention's own backward kernels (pytorch_flash::flash_bwd).",
                in_backward(kernel_matching(FLASH_BACKWARD_KERNEL))),
        ),
        sweeps=("training",),
    ),
    train(
        "custom_cpu", "Training: our C++ op",
        "our op keeps only q, k, v; its backward recomputes the scores with PyTorch ops",
        lambda: V.CustomCpuVariant(), ("attn/custom_cpu.py", "attn/custom_ops.py"), exactly("aten::softmax"),
        claims=(
            Claim("keeps-q-k-v", "cpu",
                "Our op keeps only q, k and v for the backward (ctx.save_for_backward in "
                "attn/custom_ops.py): nothing score-sized, not even a row statistic.",
                keeps(INPUT_SIZED, lacks=(SCORE_SIZED, ROW_STATISTIC, "seq_q × seq_k", "other"))),
            Claim("backward-recomputes-with-ops", "cpu",
                "Its backward recomputes attention with PyTorch ops: aten::bmm and aten::softmax "
                "under attn_bwd, on score-sized tensors.",
                in_backward(both(
                    present("aten::bmm", "aten::softmax"), score_sized_input("aten::softmax")
                ))),
            Claim("step-peak-four-score-matrices", "cpu",
                "Keeping little is not using little: forward and backward together peak at four "
                "score matrices or more, all of them the backward's (the scores, the "
                "probabilities, their gradients).",
                peak_in_score_matrices(4, at_least=True, key="peak_memory_step_bytes"),
                at_scale=True),
            Claim("backward-five-times-forward", "cpu",
                "The backward takes more than five times the forward's time: the forward is one "
                "tiled C++ op, the backward a dozen PyTorch ops over whole score matrices.",
                backward_over_forward(5), at_scale=True),
        ),
        sweeps=("training",),
    ),
    train(
        "flex", "Training: FlexAttention",
        "Flex's backward is generated too, on a GPU; on CPU it has none",
        lambda: V.GeneratedVariant(V.FlexAttention()), ("attn/flex.py",), INDUCTOR_TEMPLATE,
        backward_problem=lambda device: V.backward_problem(device),
        claims=(
            Claim("gpu-generated-backward", "cuda",
                "The backward is generated too: a Triton template kernel (triton_tem_) under "
                "attn_bwd.",
                in_backward(kernel_matching(INDUCTOR_TEMPLATE))),
            keeps_row_statistic("gpu-keeps-row-statistic", "cuda", "q, k, v, the output"),
        ),
    ),
    ring(
        "contiguous", "Ring attention: contiguous shards",
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
        "zigzag", "Ring attention: zigzag shards",
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


@dataclasses.dataclass(frozen=True)
class PublicTrace:
    """A GPU trace recorded by others, kept as test data in tests/fixtures/realtraces/<folder>
    (SOURCE.txt and LICENSE beside it), that a chapter shows with what diagnose finds in it."""

    folder: str
    chapter: str
    select: str  # the kernel its screenshot selects in the one attention call it shows (a regex)
    claims: tuple[Claim, ...]
    zoom: str | None = (
        None  # a CPU op in that call: the shot shows only the device work it launched
    )


# fmt: off
PUBLIC: tuple[PublicTrace, ...] = (
    PublicTrace(
        "tracelens-h100-timesformer-eager-softmax", "naive.md",
        SOFTMAX_KERNEL,
        claims=(
            Claim("eager", "cuda",
                "diagnose finds eager attention in every TimesformerSelfAttention: a product, a "
                "softmax and a product, and no SDPA op.",
                diagnosed("eager", where="TimesformerSelfAttention")),
            Claim("softmax-longest", "cuda",
                "In the attention call with the most device time, the longest kernel is the "
                "softmax, not a matrix product: it reads and writes the whole score matrix.",
                longest_kernel(SOFTMAX_KERNEL)),
            Claim("most-of-the-step", "cuda",
                "Eager attention takes most of the step's kernel time.",
                attention_share(0.5, 1.0)),
            Claim("two-kinds", "cuda",
                "diagnose tells two kinds of call apart by their shapes, one over a long sequence "
                "and one over a short one, and one kind alone takes over half the trace's device "
                "time.",
                kinds_apart("TimesformerSelfAttention", 0.5)),
        ),
    ),
    PublicTrace(
        "switchtransformers-a100-eager-mqa-fp32", "naive.md",
        MEMCPY_DTOD,
        zoom="aten::masked_fill",
        claims=(
            Claim("eager", "cuda",
                "diagnose finds eager attention in every MultiQueryAttention: a product, a "
                "softmax and a product, and no SDPA op.",
                diagnosed("eager", where="MultiQueryAttention")),
            Claim("masked-fill-copies", "cuda",
                "Every out-of-place masked_fill copies the whole [8, 8, 1024, 1024] score matrix "
                "with a Memcpy DtoD before it fills the copy: this chapter's hidden copy, on an "
                "A100.",
                each_op_launches("aten::masked_fill", MEMCPY_DTOD)),
            Claim("found-on-every-call", "cuda",
                "diagnose reports the out-of-place masked_fill once for every attention call.",
                reported_on_every_call("out_of_place_masked_fill")),
        ),
    ),
    PublicTrace(
        "tracelens-h100-bert-small-sdpa-flash", "sdpa.md",
        FLASH_KERNEL,
        claims=(
            Claim("flash-one-kernel", "cuda",
                "diagnose finds SDPA's flash backend in every BertSdpaSelfAttention, one kernel "
                "per call.",
                diagnosed("sdpa_flash", where="BertSdpaSelfAttention", kernels_per_call=1)),
            Claim("op-chain", "cuda",
                "On the CPU side each call is aten::scaled_dot_product_attention → "
                "aten::_scaled_dot_product_flash_attention → aten::_flash_attention_forward, which "
                "launches the kernel.",
                op_chain("aten::scaled_dot_product_attention",
                         "aten::_scaled_dot_product_flash_attention",
                         "aten::_flash_attention_forward")),
        ),
    ),
    PublicTrace(
        "tracelens-mi300x-compiled-sdpa", "compiled-and-flex.md",
        AOTRITON_KERNEL,
        claims=(
            Claim("compiled-sdpa", "cuda",
                "Inside the compiled region Inductor calls SDPA's flash op, one kernel per call "
                "(AOTriton's attn_fwd on this GPU).",
                diagnosed("sdpa_flash", where="top level", compiled=True,
                          kernels_per_call=1)),
            Claim("generated-or-library", "cuda",
                "Every other kernel is a Triton kernel Inductor generated (triton_) or the GEMM of "
                "an aten::mm.",
                kernels_launched_under(INDUCTOR_TRITON, exactly("aten::mm"), SDPA_BACKEND_OP)),
        ),
    ),
    PublicTrace(
        "tracelens-mi300x-sglang-decode-graph", "decoding.md",
        PAGED_ROCM_KERNEL,
        claims=(
            Claim("paged-graph-replay", "cuda",
                "diagnose finds paged attention replayed from a CUDA graph, with no CPU op around "
                "it: two kernels per call, the attention over the cache's partitions and a reduce "
                "that merges them.",
                diagnosed("paged", where="graph replay", kernels_per_call=2)),
            Claim("under-half", "cuda",
                "Attention takes under half of the decode step's kernel time.",
                attention_share(0.0, 0.5)),
        ),
    ),
)
# fmt: on


def public(folder: str) -> PublicTrace | None:
    return next((p for p in PUBLIC if p.folder == folder), None)


@functools.cache
def _by_name() -> dict[str, Spec]:
    found: dict[str, Spec] = {}
    for s in SPECS:
        keys = [c.key for c in s.claims]
        if s.name in found or len(keys) != len(set(keys)):
            raise ValueError(f"spec {s.name!r}: its name or one of its claim keys is not unique")
        found[s.name] = s
    return found


def names() -> list[str]:
    """Every variant's name, in chapter order."""
    return list(_by_name())


def spec(name: str) -> Spec | None:
    """The spec of a variant; None for a variant that has none (one a reader wrote)."""
    return _by_name().get(name)


def in_sweep(sweep: str) -> list[str]:
    """The variants a sweep ("scaling", "benchmark", "decoding") includes, in chapter order."""
    return [s.name for s in SPECS if sweep in s.sweeps]


def diff_pairs() -> list[tuple[str, str]]:
    """(before, after) of every diff the chapters show."""
    return [(s.name, other) for s in SPECS for other in s.diff_with]


def claim(variant: str, key: str) -> Claim | None:
    found = spec(variant)
    return next((c for c in found.claims if c.key == key), None) if found else None
