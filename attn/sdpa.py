"""F.scaled_dot_product_attention pinned to one backend with sdpa_kernel."""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn.variant import Variant


class SdpaVariant(Variant):
    """SDPA restricted to a single backend, so the trace shows that backend or nothing."""

    def __init__(self, name: str, title: str, backend: SDPBackend, short: str, lesson: str) -> None:
        self.name, self.title, self.backend, self.short, self.lesson = (
            name,
            title,
            backend,
            short,
            lesson,
        )

    # --8<-- [start:forward]
    def _attention(self, q, k, v, *, is_causal):
        with sdpa_kernel(self.backend):  # only this backend may run; no silent fallback
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    # --8<-- [end:forward]

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return _probe(self.backend, self.short, str(device), dtype)


@functools.cache
def _probe(backend: SDPBackend, short: str, device: str, dtype: torch.dtype) -> str | None:
    """Ask torch with a tiny call whether the backend runs here; on failure say why."""
    q = torch.zeros(1, 1, 16, 64, device=device, dtype=dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, q, q, is_causal=True)
            return None
        except RuntimeError:
            pass
    # On CUDA torch warns why each backend was rejected; on CPU it only says "no viable backend".
    details = [str(w.message).strip() for w in caught if short in str(w.message).lower()]
    dtype_name = str(dtype).removeprefix("torch.")
    reason = f"the {short} backend has no {torch.device(device).type.upper()} kernel for {dtype_name} in torch {torch.__version__}"
    return reason + (f" ({'; '.join(details)})" if details else "")


def sdpa_variants() -> list[Variant]:
    return [
        SdpaVariant(
            "sdpa_math",
            "SDPA: math backend",
            SDPBackend.MATH,
            "math",
            "the reference path: mask rebuilt per call, safe softmax, many small ops",
        ),
        SdpaVariant(
            "sdpa_efficient",
            "SDPA: memory-efficient backend",
            SDPBackend.EFFICIENT_ATTENTION,
            "efficient",
            "one fused CUTLASS kernel (from xformers); GPU only",
        ),
        SdpaVariant(
            "sdpa_flash",
            "SDPA: flash backend",
            SDPBackend.FLASH_ATTENTION,
            "flash",
            "one fused op; the score matrix never reaches memory",
        ),
        SdpaVariant(
            "sdpa_cudnn",
            "SDPA: cuDNN backend",
            SDPBackend.CUDNN_ATTENTION,
            "cudnn",
            "a generated cuDNN kernel; cost moves to the CPU side; GPU only",
        ),
    ]
