"""The public traces: GPU traces recorded by others, each shown by a chapter with what diagnose
finds in it."""

from __future__ import annotations

import dataclasses

from attn.traces.claims.claim import Claim
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
from attn.traces.read.patterns import (
    AOTRITON_KERNEL,
    FLASH_KERNEL,
    INDUCTOR_TRITON,
    MEMCPY_DTOD,
    PAGED_ROCM_KERNEL,
    SDPA_BACKEND_OP,
    SOFTMAX_KERNEL,
    exactly,
)


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
    """The public trace kept in that folder; None for a folder that has none."""
    return next((p for p in PUBLIC if p.folder == folder), None)
