"""torch.compile of attention: the same maths, two ways to write the mask, different generated code.

`compiled_naive` compiles NaiveAttention, whose causal mask is a boolean tensor applied with
masked_fill. `compiled_additive` compiles AdditiveMaskAttention below, whose mask is a float tensor
(0 where a query sees a key, -inf where it does not) added to the scores. Inductor's pattern matcher
recognises the second as attention and calls SDPA's fused kernel; the first stays two matrix
products around one generated softmax kernel. How the mask (and the scale) is written decides.

Torch only: copy this file together with attn/naive.py (keep that relative path).
"""

import math
import os
import shutil
import sys
from importlib.util import find_spec

import torch
from torch import nn

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

# A variant meets several dtypes, shapes and both values of is_causal; each compiles anew (a
# recompile). Past torch's default of 8 recompiles a function falls back to eager unnoticed, so each
# compiled module keeps a budget of its own, and fullgraph=True turns running past it (or a graph
# break) into an error instead. dynamic=False: every shape gets a graph of its own. With dynamic
# shapes a changed head_dim makes the scale symbolic, and torch 2.13's attention pattern then fails
# to compile (SDPA's `scale` must be a float).
RECOMPILE_LIMIT = 64
# On CPU the C++ kernels Inductor generates are invisible to the profiler (one opaque
# "## Call CompiledFxGraph ##" row) unless each records itself; these modules are here to be profiled.
KERNEL_ROWS = {"cpp.enable_kernel_profile": True}


def compile_attention(module: nn.Module) -> nn.Module:
    """torch.compile for one attention module: one static graph per shape, its own recompile budget."""
    return torch.compile(
        module,
        fullgraph=True,
        dynamic=False,
        isolate_recompiles=True,
        recompile_limit=RECOMPILE_LIMIT,
        options=KERNEL_ROWS,
    )


def inductor_problem(device: torch.device | str) -> str | None:
    """Why Inductor cannot generate code for this device here, or None."""
    device = torch.device(device)
    if device.type == "cpu":
        # Inductor writes C++ for the CPU and builds it with the compiler named by CXX.
        cxx = os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")
        if shutil.which(cxx) is None:
            return (
                f"torch.compile builds generated C++ for the CPU and there is no C++ compiler "
                f"here ({cxx!r} is not on PATH; install g++ or set CXX)"
            )
        return None
    if device.type == "cuda":
        if find_spec("triton") is None:
            return "torch.compile generates Triton kernels for GPUs and triton is not installed"
        if torch.cuda.is_available() and torch.cuda.get_device_capability(device) < (7, 0):
            name = torch.cuda.get_device_name(device)
            return f"Inductor's Triton kernels need an sm_70 or newer GPU; {name} is older"
        return None
    return f"the compiled variants are written for CPU and CUDA, not {device.type}"


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
