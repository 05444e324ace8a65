"""The decoding chapter's variants (docs/decoding.md): GQA against a KV cache, copied or not."""

from __future__ import annotations

from attn.specs.record import SDPA_CPU_OP, Spec, V
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.shape_checks import peak_holds_the_copies, repeat_copies
from attn.traces.claims.trace_checks import absent, copy_kernels, memcpys, present
from attn.traces.read.patterns import FUSED_CPU, exactly

# fmt: off
SPECS: tuple[Spec, ...] = (
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
)
# fmt: on
