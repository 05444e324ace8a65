"""The float64 reference every variant is tested against."""

from __future__ import annotations

import math

import torch


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True
) -> torch.Tensor:
    """Attention computed in float64 on the CPU, returned in float64."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        # SDPA's convention: query i sees keys j <= i (top-left aligned).
        seq_q, seq_k = scores.shape[-2:]
        hidden = torch.ones(seq_q, seq_k, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(dim=-1) @ v
