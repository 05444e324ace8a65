"""The chapters' variants: the standalone attention modules wrapped in the Variant contract."""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import sdpa_kernel

from attn.compiled import AdditiveMaskAttention, CompiledAttention
from attn.custom_cpu import custom_cpu_variant
from attn.custom_cuda import custom_cuda_variant
from attn.custom_triton import custom_triton_variant
from attn.decode_variant import decode_variants
from attn.flex import FlexAttention, sliding_window
from attn.inplace import InPlaceAttention
from attn.naive import NaiveAttention
from attn.sdpa import BACKENDS, SdpaAttention
from attn.variant import Variant


class ModuleVariant(Variant):
    """A variant whose computation is one of the standalone nn.Modules."""

    def __init__(self, name: str, title: str, module: nn.Module, lesson: str) -> None:
        self.name, self.title, self.module, self.lesson = name, title, module, lesson

    def _attention(self, q, k, v, *, is_causal):
        return self.module(q, k, v, is_causal=is_causal)


class SdpaVariant(ModuleVariant):
    """SdpaAttention pinned to one backend; unavailable where torch has no kernel for it."""

    def __init__(self, backend: str, title: str, lesson: str) -> None:
        super().__init__(f"sdpa_{backend}", title, SdpaAttention(backend), lesson)
        self.backend = backend

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return _sdpa_probe(self.backend, str(device), dtype)

    def _attention(self, q, k, v, *, is_causal):
        """The module's call; torch's "No available kernel" becomes a ValueError naming the inputs."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return super()._attention(q, k, v, is_causal=is_causal)
            except RuntimeError as e:
                if "No available kernel" not in str(e):
                    raise
        why = [str(w.message).strip() for w in caught if self.backend in str(w.message).lower()]
        strided = [n for n, t in (("q", q), ("k", k), ("v", v)) if t.stride(-1) != 1]
        if strided:
            why.insert(0, f"the last dimension of {', '.join(strided)} is strided (stride != 1)")
        shapes = ", ".join(f"{n} {tuple(t.shape)}" for n, t in (("q", q), ("k", k), ("v", v)))
        raise ValueError(
            f"{self.name} has no kernel for these inputs ({shapes}, {str(q.dtype).removeprefix('torch.')}, "
            f"is_causal={is_causal}): {'; '.join(why) or 'torch gave no reason'}"
        )


class GeneratedVariant(ModuleVariant):
    """A module whose code torch.compile generates (CompiledAttention, FlexAttention).

    The module knows where that works (a C++ compiler, triton, AVX2) and the dtypes it computes in.
    """

    def __init__(self, name: str, title: str, module: nn.Module, lesson: str) -> None:
        super().__init__(name, title, module, lesson)
        self.dtypes = module.dtypes

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return self._dtype_problem(dtype) or self.module.why_unavailable(device, dtype)


@functools.cache
def _sdpa_probe(backend: str, device: str, dtype: torch.dtype) -> str | None:
    """Ask torch with a tiny call whether the backend runs here; on failure say why."""
    q = torch.zeros(1, 1, 16, 64, device=device, dtype=dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(BACKENDS[backend]):
                F.scaled_dot_product_attention(q, q, q, is_causal=True)
            return None
        except RuntimeError:
            pass
    # On CUDA torch warns why each backend was rejected; on CPU it only says "no viable backend".
    details = [str(w.message).strip() for w in caught if backend in str(w.message).lower()]
    dtype_name = str(dtype).removeprefix("torch.")
    kind = torch.device(device).type.upper()
    reason = (
        f"the {backend} backend has no {kind} kernel for {dtype_name} in torch {torch.__version__}"
    )
    return reason + (f" ({'; '.join(details)})" if details else "")


def all_variants() -> list[Variant]:
    """Every variant, in chapter order."""
    return [
        ModuleVariant(
            "naive",
            "Naive attention",
            NaiveAttention(),
            "out-of-place masked_fill copies the whole score matrix",
        ),
        ModuleVariant(
            "inplace",
            "In-place masking",
            InPlaceAttention(),
            "masked_fill_, in place, removes that copy",
        ),
        SdpaVariant(
            "math",
            "SDPA: math backend",
            "the reference path: mask rebuilt per call, safe softmax, many small ops",
        ),
        SdpaVariant(
            "efficient",
            "SDPA: memory-efficient backend",
            "one fused CUTLASS kernel (from xformers); GPU only",
        ),
        SdpaVariant(
            "flash", "SDPA: flash backend", "one fused op; the score matrix never reaches memory"
        ),
        SdpaVariant(
            "cudnn",
            "SDPA: cuDNN backend",
            "a generated cuDNN kernel; cost moves to the CPU side; GPU only",
        ),
        custom_cpu_variant(),
        custom_cuda_variant(),
        custom_triton_variant(),
        GeneratedVariant(
            "compiled_naive",
            "torch.compile: naive attention",
            CompiledAttention(NaiveAttention()),
            "masked_fill stays two matmuls around one generated softmax kernel",
        ),
        GeneratedVariant(
            "compiled_additive",
            "torch.compile: additive mask",
            CompiledAttention(AdditiveMaskAttention()),
            "an additive mask is recognised: Inductor calls SDPA's fused kernel",
        ),
        GeneratedVariant(
            "flex_causal",
            "FlexAttention: causal",
            FlexAttention(),
            "a mask written as a Python function, compiled into one kernel",
        ),
        GeneratedVariant(
            "flex_sliding_window",
            "FlexAttention: sliding window of 256 keys",
            FlexAttention(sliding_window(256)),
            "tiles outside the window are skipped, not computed and masked",
        ),
        *decode_variants(),
    ]
