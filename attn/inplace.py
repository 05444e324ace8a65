"""In-place attention: the naive module with the scale and the mask applied in place."""

from __future__ import annotations

import math

from attn.naive import ModuleVariant, NaiveAttention
from attn.variant import Variant


class InPlaceAttention(NaiveAttention):
    """Same five steps; `mul_` and `masked_fill_` overwrite the scores instead of copying them.

    The chapters run it under torch.no_grad(). With autograd on, an in-place op is allowed only
    when backward does not need the value it overwrites; autograd checks and raises otherwise.
    """

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = q @ k.transpose(-2, -1)  # 1. scores
        scores.mul_(scale)  # 2. scale, in place
        if is_causal:  # 3. mask the future, in place: no copy of the scores
            mask = self.causal_mask(q.shape[-2], k.shape[-2], q.device)
            scores.masked_fill_(mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # 4. normalise each row
        return weights @ v  # 5. reweight the values

    # --8<-- [end:forward]


def inplace_variant() -> Variant:
    lesson = "masked_fill_ (one character) removes that copy"
    return ModuleVariant("inplace", "In-place masking", InPlaceAttention(), lesson)
