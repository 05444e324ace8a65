"""The training chapter's variants (docs/training.md): a training step through each attention."""

from __future__ import annotations

from attn.specs.record import Spec, V
from attn.traces.claims.benchmark_checks import BenchmarkClaim, keeps_times
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.shape_checks import (
    INPUT_SIZED,
    ROW_STATISTIC,
    SCORE_SIZED,
    backward_allocates_under_a_score_matrix,
    keeps,
    peak_in_score_matrices,
    score_sized_input,
)
from attn.traces.claims.step_checks import profiled_over_timed
from attn.traces.claims.trace_checks import (
    absent,
    backward_over_forward,
    in_backward,
    kernel_matching,
    op_under,
    present,
)
from attn.traces.read.patterns import (
    FLASH_BACKWARD_KERNEL,
    FUSED_CPU_BACKWARD,
    INDUCTOR_TEMPLATE,
    OUR_CPU_BACKWARD,
    OUR_TRITON_BACKWARD_KERNEL,
    SOFTMAX_OPS,
    exactly,
)


def train(name, title, lesson, make, sources, focus, *, backward_problem=None, **facts) -> Spec:
    """A training step through another variant's attention: the name after `train_` (the
    training example's `--impl`)."""
    impl = name.removeprefix("train_")
    return Spec(
        name, title, lesson, lambda: V.TrainingVariant(make(), backward_problem),
        "training.md", ("examples/training_attention.py", "--impl", impl), sources, focus,
        trains=True, **facts,
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
    train(
        "train_naive", "Training: naive attention",
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
        "train_inplace", "Training: in-place masking",
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
        "train_sdpa_math", "Training: SDPA math backend",
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
        "train_sdpa_flash", "Training: SDPA flash backend",
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
        "train_custom_cpu_recompute", "Training: our C++ op, a backward of PyTorch ops",
        "our op keeps only q, k, v; its backward recomputes the scores with PyTorch ops",
        lambda: V.CustomCpuVariant("recompute"), ("attn/custom_cpu.py", "attn/custom_ops.py"),
        exactly("aten::softmax"),
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
        "train_custom_cpu", "Training: our C++ op and its fused backward",
        "our fused backward keeps one number per row and recomputes the scores tile by tile",
        lambda: V.CustomCpuVariant(), ("attn/custom_cpu.py", "attn/custom_ops.py"),
        exactly(OUR_CPU_BACKWARD),
        claims=(
            Claim("keeps-output-and-lse", "cpu",
                "With the fused backward our op keeps q, k, v, the output and the logsumexp of "
                "each query row ([batch, heads, seq_q], float32): nothing score-sized.",
                keeps(INPUT_SIZED, ROW_STATISTIC, lacks=(SCORE_SIZED, "seq_q × seq_k", "other"))),
            Claim("backward-allocates-nothing-score-sized", "cpu",
                f"The backward is one op, {OUR_CPU_BACKWARD}, with no softmax and no aten::bmm, "
                "and no allocation under attn_bwd reaches one score matrix.",
                both(
                    in_backward(both(
                        present(OUR_CPU_BACKWARD), absent(*SOFTMAX_OPS, "aten::bmm")
                    )),
                    backward_allocates_under_a_score_matrix,
                )),
            Claim("step-peak-under-one-score-matrix", "cpu",
                "Forward and backward together stay under one score matrix, as flash's do.",
                peak_in_score_matrices(0, key="peak_memory_step_bytes"), at_scale=True),
            Claim("backward-at-most-three-times-forward", "cpu",
                "The backward takes at most three times the forward's time: it recomputes the "
                "scores and computes the gradients of q, k and v, tile by tile.",
                backward_over_forward(3, at_most=True), at_scale=True),
        ),
        sweeps=("training",),
    ),
    train(
        "train_custom_triton", "Training: our Triton kernel and its backward",
        "our Triton backward: a delta kernel, dK and dV over key blocks, dQ over query blocks",
        lambda: V.CustomTritonVariant(), ("attn/custom_triton.py",), None,
        claims=(
            keeps_row_statistic("gpu-keeps-row-statistic", "cuda", "q, k, v, the output"),
            Claim("gpu-our-backward-kernels", "cuda",
                "The backward runs our own Triton kernels under attn_bwd (_attn_bwd_preprocess, "
                "_attn_bwd_dkdv, _attn_bwd_dq), not a library's.",
                in_backward(kernel_matching(OUR_TRITON_BACKWARD_KERNEL))),
        ),
    ),
    train(
        "train_flex", "Training: FlexAttention",
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
)
# fmt: on
