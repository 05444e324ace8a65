"""Our own FlashAttention-2-style CUDA kernel (csrc/cuda/flash_fwd.cu), called as torch.ops.attn."""

from __future__ import annotations

import math

import torch

from attn.custom_ops import attention, cuda_build_problem, load_cuda_ops
from attn.variant import Variant, older_than_ampere


class CustomCudaVariant(Variant):
    """FlashAttention-2 forward: tensor cores, online softmax, K/V tiles double-buffered."""

    name = "custom_cuda"
    head_dims = (64, 128)
    dtypes = (torch.bfloat16, torch.float16)

    # --8<-- [start:forward]
    def _attention(self, q, k, v, *, is_causal):
        scale = 1.0 / math.sqrt(q.shape[-1])
        # The CUDA library is built on first use (cached), next to the CPU one that defines the op.
        load_cuda_ops()
        # With grad: the fused backward where the CUDA library has one, else the recompute one.
        return attention(q, k, v, is_causal, scale)

    # --8<-- [end:forward]

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        # Cheap on purpose: asks torch, nvcc and the file system, never builds the extension. A build
        # that was tried and failed in this process is remembered, and reported from then on.
        if device.type != "cuda":
            return (
                f"it is a CUDA kernel: it runs on NVIDIA GPUs only, not on {device.type} "
                "(our C++ op does the same on the CPU)"
            )
        problem = self._dtype_problem(dtype) or older_than_ampere(
            device, "cp.async and bf16 mma.sync"
        )
        return problem or cuda_build_problem()
