"""torch.compile of attention: the same maths, two ways to write the mask, different generated code.

`compiled_naive` compiles NaiveAttention, whose causal mask is a boolean tensor applied with
masked_fill. `compiled_additive` compiles AdditiveMaskAttention below, whose mask is a float tensor
(0 where a query sees a key, -inf where it does not) added to the scores. Inductor's pattern matcher
recognises the second as attention and calls SDPA's fused kernel; the first stays two matrix
products around one generated softmax kernel. How the mask (and the scale) is written decides.

Torch only: copy this file together with attn/naive.py and attn/inductor.py (keep those relative
paths).
"""

import math

import torch
from torch import nn

from attn.inductor import KERNEL_ROWS, inductor_problem, recompile_budget
from attn.naive import NaiveAttention


class AdditiveMaskAttention(nn.Module):
    """softmax(Q Kᵀ / sqrt(d) + M) V, with M = 0 where query i sees key j (j <= i) and -inf elsewhere.

    Meant to be compiled: eager, it builds the mask on every call.
    """

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        # Divide the product by sqrt(d): Inductor matches this form (multiplying by 1/sqrt(d), or
        # scaling q first as NaiveAttention does, is not matched in torch 2.13).
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if is_causal:
            seq_q, seq_k = scores.shape[-2:]
            # Built inside forward, so the mask is part of the compiled graph, not module state.
            future = torch.full((seq_q, seq_k), float("-inf"), dtype=q.dtype, device=q.device)
            scores = scores + future.triu(1)  # 0 on and below the diagonal, -inf above it
        return scores.softmax(dim=-1) @ v

    # --8<-- [end:forward]


MASKS = {"masked_fill": NaiveAttention, "additive": AdditiveMaskAttention}

# dynamic=False below: every shape gets a graph of its own. With dynamic shapes a changed head_dim
# makes the scale symbolic, and torch 2.13's attention pattern then fails to compile (SDPA's
# `scale` must be a float).


def compile_attention(module: nn.Module) -> nn.Module:
    """torch.compile for one attention module: one static graph per shape, its own recompile budget."""
    return torch.compile(
        module,
        fullgraph=True,
        dynamic=False,
        **recompile_budget(),  # its own budget, not shared with other compiled modules
        options=KERNEL_ROWS,
    )


class CompiledAttention(nn.Module):
    """An attention module under torch.compile: compiled on its first call, then kept."""

    dtypes = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention
        # torch.compile imports its compiler stack (seconds): wait for the first call.
        self.compiled = None

    def forward(self, q, k, v, is_causal=True):
        if self.compiled is None:
            self.compiled = compile_attention(self.attention)
        return self.compiled(q, k, v, is_causal=is_causal)

    def why_unavailable(self, device: torch.device | str, dtype=None) -> str | None:
        """Why the compiled module cannot run on this device here, or None."""
        return inductor_problem(device)
