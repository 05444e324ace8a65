"""Decoding with grouped-query attention (GQA): new tokens against a KV cache, written two ways.

Torch only: copy this file into any project (`from decode import EnableGqaAttention`).

Shapes: q is [batch, q_heads, new, head_dim], k and v are the cache, [batch, kv_heads, cache,
head_dim], with q_heads a multiple of kv_heads. Query head h reads KV head h // (q_heads // kv_heads),
the layout of Llama-style GQA and of SDPA's `enable_gqa`.

Causal alignment: SDPA's `is_causal=True` aligns the mask top-left (query i sees keys j <= i), so
one new token would see only the first key of the cache. Here the new tokens are the *last* `new`
positions of the sequence (bottom-right alignment): query i sees keys j <= i + cache - new. For a
single new token that is the whole cache, the same as `is_causal=False`.
"""

import torch
import torch.nn.functional as F
from torch import nn


def causal_arguments(seq_q: int, seq_k: int, device: torch.device, is_causal: bool) -> dict:
    """SDPA's masking keywords for new tokens that are the last seq_q of seq_k positions."""
    if not is_causal or seq_q == 1:
        # One new token is the newest position: it sees the whole cache, itself included.
        return {"is_causal": False}
    if seq_q == seq_k:
        return {"is_causal": True}  # top-left and bottom-right alignment coincide
    if seq_q > seq_k:
        raise ValueError(
            f"is_causal with {seq_q} new tokens but only {seq_k} cached keys: the cache must hold "
            "the new tokens too (seq_k >= seq_q)"
        )
    # An explicit mask: True where query i may look, keys j <= i + (seq_k - seq_q).
    visible = torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).tril(seq_k - seq_q)
    return {"attn_mask": visible}


class RepeatKVAttention(nn.Module):
    """GQA by copying: each KV head repeated for its query heads, then ordinary SDPA."""

    # --8<-- [start:repeat]
    def forward(self, q, k, v, is_causal=True):
        groups = q.shape[1] // k.shape[1]  # query heads per KV head
        # [b, kv_heads, L, d] -> [b, q_heads, L, d]: a new tensor, `groups` times the cache
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        masking = causal_arguments(q.shape[-2], k.shape[-2], q.device, is_causal)
        return F.scaled_dot_product_attention(q, k, v, **masking)

    # --8<-- [end:repeat]


class EnableGqaAttention(nn.Module):
    """GQA inside SDPA: `enable_gqa=True` reads each KV head for its query heads, no copy asked."""

    # --8<-- [start:enable_gqa]
    def forward(self, q, k, v, is_causal=True):
        masking = causal_arguments(q.shape[-2], k.shape[-2], q.device, is_causal)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **masking)

    # --8<-- [end:enable_gqa]


GQA = {"repeat": RepeatKVAttention, "enable_gqa": EnableGqaAttention}
