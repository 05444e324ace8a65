"""What to profile: device, shape, dtype and masking of one run."""

from __future__ import annotations

import dataclasses

import torch

from attn.profiling.environment import is_gpu

# The seconds of a run's first two calls, before profiling (a compiled variant compiles there):
# kept in the trace under this key, beside the profiler's own top-level keys.
FIRST_CALLS_KEY = "attn_first_calls_seconds"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """One profiling run's inputs. Defaults per device come from `default_config`."""

    device: str = "cpu"
    batch: int = 2
    heads: int = 8
    seq_q: int = 1024
    seq_k: int = 1024
    head_dim: int = 64
    dtype: str = "float32"
    is_causal: bool = True
    seed: int = 0

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def shape(self) -> dict[str, int]:
        return {
            "batch": self.batch,
            "heads": self.heads,
            "seq_q": self.seq_q,
            "seq_k": self.seq_k,
            "head_dim": self.head_dim,
        }

    def make_inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Seeded q, k, v on the device, [batch, heads, seq, head_dim]."""
        gen = torch.Generator().manual_seed(self.seed)

        def rand(seq: int) -> torch.Tensor:
            t = torch.randn(self.batch, self.heads, seq, self.head_dim, generator=gen)
            return t.to(self.device, self.torch_dtype)

        return rand(self.seq_q), rand(self.seq_k), rand(self.seq_k)


def default_device() -> str:
    """Where the entry points run by default: the GPU when torch sees one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_config(device: str) -> ProfileConfig:
    """The article's shape on a GPU (8 x 16 x 1024 x 64, bf16); a 2-core-friendly one on CPU (fp32)."""
    if is_gpu(device):
        return ProfileConfig(device=device, batch=8, heads=16, dtype="bfloat16")
    return ProfileConfig(device=device)
