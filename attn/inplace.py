"""In-place attention: naive attention with the mask written into the scores instead of a copy.

Torch only: copy this file into any project (`from inplace import InPlaceAttention`).
"""

import math

import torch
from torch import nn


class InPlaceAttention(nn.Module):
    """The naive module's five steps; `masked_fill_` overwrites the scores instead of copying them.

    Run it under torch.no_grad() or inference_mode(): with autograd on, an in-place op is allowed
    only when backward does not need the value it overwrites, and autograd raises otherwise.
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
        if is_causal:  # 3. mask the future in place: no copy of the scores
            mask = self.causal_mask(q.shape[-2], k.shape[-2], q.device)
            scores.masked_fill_(mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # 4. normalise each row
        return weights @ v  # 5. reweight the values

    # --8<-- [end:forward]
