"""F.scaled_dot_product_attention pinned to one backend, so a trace shows that backend or nothing.

Torch only: copy this file into any project (`from sdpa import SdpaAttention`).
"""

import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


class SdpaAttention(nn.Module):
    """SDPA restricted to one backend: `SdpaAttention("flash")`. No silent fallback to another."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"unknown SDPA backend {backend!r}; use one of {', '.join(BACKENDS)}")
        self.backend = backend

    # --8<-- [start:forward]
    def forward(self, q, k, v, is_causal=True):
        with sdpa_kernel(BACKENDS[self.backend]):  # only this backend may run
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    # --8<-- [end:forward]
