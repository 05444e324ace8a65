"""The decoding chapter's variants: grouped-query attention over a KV cache, in the Variant contract.

Two differences from the other variants, both on purpose:

- k and v may have fewer heads than q (grouped-query attention): q's head count must be a multiple
  of theirs. `check_gqa` replaces the shared equal-heads check and names the shapes when they do
  not fit.
- `is_causal=True` aligns the mask bottom-right (the new tokens are the last of the sequence), so
  one new token sees the whole cache; SDPA's top-left alignment would show it only the first key.
  With as many queries as keys the two alignments agree; more queries than keys is refused.
"""

from __future__ import annotations

import torch
from torch import nn

from attn.decode import EnableGqaAttention, RepeatKVAttention
from attn.validation import FLOAT_DTYPES, check_tensors
from attn.variant import Variant


def check_gqa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES,
) -> None:
    """Raise ValueError naming the offending values unless q, k, v form a valid GQA call.

    Layout is [batch, heads, seq, head_dim]; k and v share their shape; q's heads are a multiple of
    theirs; the sequence lengths of q and k may differ.
    """
    check_tensors(q, k, v)
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(f"batch sizes differ: {shapes}")
    if k.shape[1] != v.shape[1]:
        raise ValueError(f"k and v head counts differ: {shapes}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(
            f"head counts do not fit grouped-query attention: q's {q.shape[1]} heads are not a "
            f"multiple of k's and v's {k.shape[1]}: {shapes}"
        )
    if not (q.shape[3] == k.shape[3] == v.shape[3]):
        raise ValueError(f"head_dim differs: {shapes}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v sequence lengths differ: {shapes}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"dtypes differ: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if q.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"dtype {q.dtype} is not supported here; use one of {names}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"devices differ: q on {q.device}, k on {k.device}, v on {v.device}")


class DecodeVariant(Variant):
    """A standalone GQA module from attn/decode.py; k and v may have fewer heads than q."""

    causal_alignment = "bottom_right"  # is_causal: the queries are the last positions

    def __init__(self, name: str, title: str, module: nn.Module, lesson: str) -> None:
        self.name, self.title, self.module, self.lesson = name, title, module, lesson

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True
    ) -> torch.Tensor:
        """q [b, q_heads, new, d] over the cache k, v [b, kv_heads, L, d]; output has q's shape."""
        check_gqa(q, k, v, dtypes=self.dtypes)
        if not isinstance(is_causal, bool):
            raise ValueError(f"is_causal must be True or False, got {is_causal!r}")
        if is_causal and q.shape[2] > k.shape[2]:
            raise ValueError(
                f"is_causal aligns the {q.shape[2]} queries with the last keys, but k has only "
                f"{k.shape[2]}: q {tuple(q.shape)}, k {tuple(k.shape)}"
            )
        reason = self.why_unavailable(q.device, q.dtype)
        if reason is not None:
            raise RuntimeError(f"{self.name}: {reason}")
        return self._attention(q, k, v, is_causal=is_causal)

    def _attention(self, q, k, v, *, is_causal):
        return self.module(q, k, v, is_causal=is_causal)


def decode_variants() -> list[Variant]:
    """decode_repeat_kv and decode_enable_gqa, in the chapter's order."""
    return [
        DecodeVariant(
            "decode_repeat_kv",
            "Decoding: GQA by repeat_interleave",
            RepeatKVAttention(),
            "repeat_interleave copies K and V to every query head, each step",
        ),
        DecodeVariant(
            "decode_enable_gqa",
            "Decoding: GQA with enable_gqa",
            EnableGqaAttention(),
            "enable_gqa reads each KV head in place: no copy of the cache",
        ),
    ]
