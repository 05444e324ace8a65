"""Our own C++ FlashAttention kernel for the CPU, called as one op: attn::flash_attention_forward.

Where an input requires grad it calls attn::flash_attention_forward_lse instead, whose backward is
the fused kernel attn::flash_attention_backward (attn.custom_ops.attention picks).
"""

from __future__ import annotations

import math

import torch

from attn.custom_ops import BACKWARDS, attention, build_problem, load_ops
from attn.validation import check_qkv
from attn.variant import Variant

MAX_HEAD_DIM = 256  # the largest head_dim the kernels accept (csrc/cpu/flash_attention_cpu.h)


class CustomCpuVariant(Variant):
    """csrc/cpu/flash_attention_cpu.cpp: Q and KV tiles, online softmax, BLAS for the tile products."""

    name = "custom_cpu"
    dtypes = (torch.float32, torch.bfloat16)

    def __init__(self, backward: str = "fused") -> None:
        """backward: "fused" (the C++ backward kernel) or "recompute" (attention with PyTorch ops,
        what a missing fused backward costs; see attn.custom_ops.attention)."""
        if backward not in BACKWARDS:
            raise ValueError(f"backward={backward!r}; use one of {', '.join(BACKWARDS)}")
        self.backward = backward

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True
    ) -> torch.Tensor:
        """Attention of q over k, v ([batch, heads, seq, head_dim], head_dim <= 256)."""
        check_qkv(q, k, v, dtypes=self.dtypes)
        if q.shape[-1] > MAX_HEAD_DIM:
            raise ValueError(
                f"head_dim {q.shape[-1]} is not supported here; the kernel takes up to "
                f"{MAX_HEAD_DIM}"
            )
        return super().forward(q, k, v, is_causal=is_causal)

    # --8<-- [start:forward]
    def _attention(self, q, k, v, *, is_causal):
        scale = 1.0 / math.sqrt(q.shape[-1])
        load_ops()  # built on first use (cached)
        return attention(q, k, v, is_causal, scale, backward=self.backward)

    # --8<-- [end:forward]

    def tile_products(self, dtype: torch.dtype, head_dim: int, seq_k: int) -> str:
        """How the kernel multiplies its tiles for such inputs: "amx" or "avx512_bf16" (bf16 on
        the CPU's bf16 instructions), else "fp32"."""
        if dtype != torch.bfloat16:
            return "fp32"
        return load_ops().cpu_bf16_path(head_dim, seq_k)

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if device.type != "cpu":
            return (
                f"our C++ op takes CPU tensors, not {device.type} ones "
                "(on a GPU, our CUDA and Triton kernels do the same)"
            )
        return self._dtype_problem(dtype) or build_problem()
