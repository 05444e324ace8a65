"""The naive chapter's variant (docs/naive.md): eager attention, masked_fill copying the scores."""

from __future__ import annotations

from attn.specs.record import Spec, V
from attn.traces.claims.benchmark_checks import BenchmarkClaim, row_takes_longer
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.shape_checks import (
    copies_of_scores_and_scalar,
    frees_a_score_matrix,
    peak_in_score_matrices,
)
from attn.traces.claims.trace_checks import (
    END,
    costs_more,
    kernel_count,
    longest_gaps,
    memcpys,
    only_under,
    op_under,
    top_level_ops,
)
from attn.traces.read.patterns import MEMCPY_DTOD, exactly

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
            BenchmarkClaim("profiler-costs-time", "cpu",
                "Under torch.profiler, even with every switch off, the forward takes more time "
                "than the same forward alone, timed interleaved with it.",
                row_takes_longer("profiler", "profiler", "alone"), figure="overhead"),
            BenchmarkClaim("first-touch-costs-the-copy-time", "cpu",
                "Cloning the scores into fresh memory takes more time than copying them into a "
                "buffer already touched: the difference is first touch, the pages the clone's "
                "new memory faults in as it is written.",
                row_takes_longer("first_touch", "clone", "copy_"), figure="overhead"),
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
)
# fmt: on
