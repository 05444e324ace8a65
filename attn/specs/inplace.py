"""The in-place chapter's variant (docs/inplace.md): masked_fill_ without the copy."""

from __future__ import annotations

from attn.specs.record import Spec, V
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.shape_checks import only_scalar_copies, peak_in_score_matrices
from attn.traces.claims.trace_checks import (
    END,
    absent,
    kernel_count,
    longest_gaps,
    memcpys,
    only_under,
)
from attn.traces.read.patterns import exactly

# fmt: off
SPECS: tuple[Spec, ...] = (
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
)
# fmt: on
