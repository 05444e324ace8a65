"""Naive attention: the five steps written out, each a separate out-of-place op."""

from __future__ import annotations

import math

import torch
from torch import nn

from attn.variant import Variant


class NaiveAttention(nn.Module):
    """Attention as the textbook writes it. The causal mask is built once and reused."""

    def __init__(self) -> None:
        super().__init__()
        self._mask: torch.Tensor | None = None

    def causal_mask(self, seq_q: int, seq_k: int, device: torch.device) -> torch.Tensor:
        """True where query i must not see key j (j > i); rebuilt only when the shape changes."""
        mask = self._mask
        if mask is None or mask.shape != (seq_q, seq_k) or mask.device != device:
            mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=device).triu(1)
            self._mask = mask
        return mask

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = q @ k.transpose(-2, -1)  # 1. scores: [batch, heads, seq_q, seq_k]
        scores = scores * scale  # 2. scale
        if is_causal:  # 3. mask the future
            mask = self.causal_mask(q.shape[-2], k.shape[-2], q.device)
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # 4. normalise each row
        return weights @ v  # 5. reweight the values

    # --8<-- [end:forward]


class ModuleVariant(Variant):
    """A variant whose computation is an nn.Module that runs on any device torch supports."""

    def __init__(self, name: str, title: str, module: nn.Module, lesson: str) -> None:
        self.name, self.title, self.module, self.lesson = name, title, module, lesson

    def _attention(self, q, k, v, *, is_causal):
        return self.module(q, k, v, is_causal=is_causal)


def naive_variant() -> Variant:
    lesson = "out-of-place masked_fill copies the whole score matrix"
    return ModuleVariant("naive", "Naive attention", NaiveAttention(), lesson)
