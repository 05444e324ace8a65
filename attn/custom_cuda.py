"""Our own FlashAttention-2-style CUDA kernel (csrc/cuda/flash_fwd.cu), called as torch.ops.attn."""

from __future__ import annotations

import math
import os

import torch

from attn.variant import Variant, older_than_ampere


def _nvcc() -> str | None:
    """Path of the nvcc torch.utils.cpp_extension would use, or None. Imports, never compiles."""
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return None
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc")  # where torch will look for it
    return nvcc if os.path.isfile(nvcc) else None


class CustomCudaVariant(Variant):
    """FlashAttention-2 forward: tensor cores, online softmax, K/V tiles double-buffered."""

    name = "custom_cuda"
    title = "Custom CUDA kernel"
    lesson = "our FlashAttention-2-style CUDA kernel: one launch"
    head_dims = (64, 128)
    dtypes = (torch.bfloat16, torch.float16)

    # --8<-- [start:forward]
    def _attention(self, q, k, v, *, is_causal):
        from attn.custom_ops import load_ops  # builds the extension on first use

        scale = 1.0 / math.sqrt(q.shape[-1])
        return load_ops().flash_attention_forward(q, k, v, is_causal, scale)

    # --8<-- [end:forward]

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        # Cheap on purpose: asks torch and the file system, never builds the extension.
        if device.type != "cuda":
            return (
                f"it is a CUDA kernel: it runs on NVIDIA GPUs only, not on {device.type} "
                "(the CPU op is custom_cpu)"
            )
        problem = self._dtype_problem(dtype) or older_than_ampere(
            device, "cp.async and bf16 mma.sync"
        )
        if problem:
            return problem
        if _nvcc() is None:
            return (
                "the kernel is compiled on first use, but no CUDA toolkit was found "
                "(set CUDA_HOME to a CUDA install that has bin/nvcc)"
            )
        return None


def custom_cuda_variant() -> Variant:
    """The custom CUDA kernel variant."""
    return CustomCudaVariant()
