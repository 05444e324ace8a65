"""What every attention variant offers: a name, a title, a forward and a reason it cannot run."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from attn.validation import FLOAT_DTYPES, check_qkv


def default_dtype(device: torch.device) -> torch.dtype:
    """The dtype the chapters use on a device: bf16 on GPUs (as the article), fp32 on CPU."""
    return torch.float32 if device.type == "cpu" else torch.bfloat16


def device_problem(device: torch.device) -> str | None:
    """Why this torch cannot use the device at all, or None."""
    if device.type == "cuda" and not torch.cuda.is_available():
        if torch.version.cuda is None:
            return "this torch build has no CUDA support (a CPU-only build)"
        return "no CUDA GPU is visible to torch"
    return None


def older_than_ampere(device: torch.device, needs: str) -> str | None:
    """Why a kernel that needs sm_80 (Ampere) or newer cannot run on this GPU, or None."""
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) >= (8, 0):
        return None
    gpu = torch.cuda.get_device_name(device)
    return (
        f"the kernel needs an sm_80 (Ampere) or newer GPU for {needs}; {gpu} is sm_{major}{minor}"
    )


class Variant(ABC):
    """One attention implementation the chapters teach."""

    name: str
    title: str
    lesson: str = ""  # the one line the at-a-glance table says about it
    head_dims: tuple[int, ...] | None = None  # None: any head_dim
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES
    grouped: bool = False  # k and v may have fewer heads than q (grouped-query attention)
    trains: bool = False  # profiled as a training step (forward, loss, backward): its spec says

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True
    ) -> torch.Tensor:
        """Attention of q over k, v ([batch, heads, seq, head_dim]); output has q's shape and dtype."""
        check_qkv(q, k, v, head_dims=self.head_dims, dtypes=self.dtypes, grouped=self.grouped)
        if not isinstance(is_causal, bool):
            raise ValueError(f"is_causal must be True or False, got {is_causal!r}")
        reason = self.why_unavailable(q.device, q.dtype)
        if reason is not None:
            raise RuntimeError(f"{self.name}: {reason}")
        return self._attention(q, k, v, is_causal=is_causal)

    def why_unavailable(
        self, device: torch.device | str, dtype: torch.dtype | None = None
    ) -> str | None:
        """None when this variant can run on the device (and dtype), else a sentence saying why."""
        device = torch.device(device)
        return device_problem(device) or self._why_unavailable(
            device, dtype or default_dtype(device)
        )

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return None

    def _dtype_problem(self, dtype: torch.dtype) -> str | None:
        """A sentence naming the dtype when this variant does not compute in it, else None."""
        if dtype in self.dtypes:
            return None
        names = " or ".join(str(d).removeprefix("torch.") for d in self.dtypes)
        return f"the kernel computes in {names}, not {str(dtype).removeprefix('torch.')}"

    @abstractmethod
    def _attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool
    ) -> torch.Tensor: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
