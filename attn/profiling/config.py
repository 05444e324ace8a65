"""What to profile: device, shape, dtype and masking of one run, and the inputs it makes."""

from __future__ import annotations

import dataclasses

import torch

from attn import specs
from attn.profiling.environment import is_gpu
from attn.profiling.flags import DTYPE_NAMES, ProfilingError
from attn.traces.read.reading import available_memory

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
# A decode step: 32 query heads over 8 KV heads (Llama-style grouped-query attention), head_dim 64.
DECODE_HEADS, DECODE_KV_HEADS, DECODE_HEAD_DIM = 32, 8, 64


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """One profiling run's inputs. Defaults per device come from `default_config`.

    `kv_heads` gives k and v fewer heads than q (grouped-query attention); None: as many as q.
    """

    device: str = "cpu"
    batch: int = 2
    heads: int = 8
    seq_q: int = 1024
    seq_k: int = 1024
    head_dim: int = 64
    dtype: str = "float32"
    is_causal: bool = True
    seed: int = 0
    kv_heads: int | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def shape(self) -> dict[str, int]:
        shape = {
            "batch": self.batch,
            "heads": self.heads,
            "seq_q": self.seq_q,
            "seq_k": self.seq_k,
            "head_dim": self.head_dim,
        }
        return shape if self.kv_heads is None else {**shape, "kv_heads": self.kv_heads}

    def make_inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Seeded q [batch, heads, seq_q, d] and k, v [batch, kv_heads, seq_k, d] on the device."""
        gen = torch.Generator().manual_seed(self.seed)

        def rand(heads: int, seq: int) -> torch.Tensor:
            t = torch.randn(self.batch, heads, seq, self.head_dim, generator=gen)
            return t.to(self.device, self.torch_dtype)

        kv_heads = self.heads if self.kv_heads is None else self.kv_heads
        return rand(self.heads, self.seq_q), rand(kv_heads, self.seq_k), rand(kv_heads, self.seq_k)


def available_bytes(device: str) -> int | None:
    """Memory free for new tensors on the device (None where it cannot be read)."""
    if is_gpu(device):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    return available_memory()


def check_fits(
    config: ProfileConfig, flags: str = "--batch, --heads, --seq, --seq-k or --head-dim"
) -> None:
    """ProfilingError, before anything is allocated, when q, k, v and the output alone (the least
    any variant holds; a score matrix comes on top) do not fit in the memory free on the device:
    the kernel's OOM killer ended such a run with no message."""
    kv_heads = config.kv_heads or config.heads
    elements = (
        config.batch * config.head_dim * 2 * (config.heads * config.seq_q + kv_heads * config.seq_k)
    )
    need = elements * torch.empty((), dtype=config.torch_dtype).element_size()
    free = available_bytes(config.device)
    if free is not None and need > free:
        shape = " x ".join(str(v) for v in config.shape().values())
        raise ProfilingError(
            f"the shape {shape} ({config.dtype}) needs {need / 2**30:,.1f} GiB for its inputs and "
            f"output alone, and {config.device} has {free / 2**30:,.1f} GiB free: give a smaller "
            f"{flags}"
        )


def check_all_fit(names: list[str], config: ProfileConfig) -> None:
    """check_fits for each named variant's config (a decode step has its own shape), before any
    of them runs."""
    for name in names:
        check_fits(config_for(name, config))


def default_device() -> str:
    """Where the entry points run by default: the GPU when torch sees one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_config(device: str) -> ProfileConfig:
    """The article's shape on a GPU (8 x 16 x 1024 x 64, bf16); a 2-core-friendly one on CPU (fp32)."""
    if is_gpu(device):
        return ProfileConfig(device=device, batch=8, heads=16, dtype="bfloat16")
    return ProfileConfig(device=device)


def decode_config(device: str) -> ProfileConfig:
    """One decode step: one new token per sequence against a KV cache of 4k keys (batch 4, fp32)
    on CPU, 16k keys (batch 8, bf16) on a GPU."""
    gpu = is_gpu(device)
    return ProfileConfig(
        device=device,
        batch=8 if gpu else 4,
        heads=DECODE_HEADS,
        seq_q=1,
        seq_k=16384 if gpu else 4096,
        head_dim=DECODE_HEAD_DIM,
        dtype="bfloat16" if gpu else "float32",
        is_causal=False,
        kv_heads=DECODE_KV_HEADS,
    )


def config_for(variant: str, config: ProfileConfig) -> ProfileConfig:
    """The config to profile `variant` with: a decode step (in config's dtype) for a variant whose
    spec takes decode inputs, else `config` itself."""
    spec = specs.spec(variant)
    if spec is None or spec.inputs != "decode":
        return config
    return dataclasses.replace(decode_config(config.device), dtype=config.dtype)
