"""Naive attention: the textbook's five steps, each a separate out-of-place op.

Torch only: copy this file into any project (`from naive import NaiveAttention`).
"""

import math

import torch
from torch import nn


class NaiveAttention(nn.Module):
    """softmax(Q Kᵀ / sqrt(d), masked) V over [batch, heads, seq, head_dim] tensors.

    The causal mask is built once per (seq_q, seq_k, device) and reused, as the article's module does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.mask = torch.empty(0, 0, dtype=torch.bool)

    def causal_mask(self, seq_q: int, seq_k: int, device: torch.device) -> torch.Tensor:
        """True where query i must not see key j (j > i, SDPA's top-left convention)."""
        if self.mask.shape != (seq_q, seq_k) or self.mask.device != device:
            self.mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).triu(1)
        return self.mask

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        scale = 1.0 / math.sqrt(q.shape[-1])
        # Scaling q (not the scores) is cheaper and keeps float16 scores from overflowing.
        scores = (q * scale) @ k.transpose(-2, -1)  # 1-2. scaled scores [b, h, seq_q, seq_k]
        if is_causal:  # 3. mask the future: out of place, so a masked copy of the scores
            mask = self.causal_mask(q.shape[-2], k.shape[-2], q.device)
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # 4. normalise each row
        return weights @ v  # 5. reweight the values

    # --8<-- [end:forward]


class ScoresScaledAttention(NaiveAttention):
    """Naive attention that scales the scores, as the article's module does, instead of q."""

    # --8<-- [start:forward_scale_scores]
    def forward(self, q, k, v, is_causal=True):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = q @ k.transpose(-2, -1)  # 1. scores [b, h, seq_q, seq_k]
        scores = scores * scale  # 2. one more pass over the scores
        if is_causal:  # 3. mask the future, out of place as above
            mask = self.causal_mask(q.shape[-2], k.shape[-2], q.device)
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # 4. normalise each row
        return weights @ v  # 5. reweight the values

    # --8<-- [end:forward_scale_scores]
