"""The variant wrappers: attention modules in the Variant contract, and the registry of them all.

A wrapper knows how to run its module and where it can run; its name, title and lesson come from its
spec (attn/specs/, a module per chapter), which the registry binds to it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import sdpa_kernel

from attn.sdpa import BACKENDS, SdpaAttention
from attn.variant import Variant, device_problem

__all__ = [
    "DecodeVariant", "GeneratedVariant", "ModuleVariant", "RingVariant", "SdpaVariant",
    "TrainingVariant", "build",
]  # fmt: skip


class ModuleVariant(Variant):
    """A variant whose computation is one of the standalone nn.Modules."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def _attention(self, q, k, v, *, is_causal):
        return self.module(q, k, v, is_causal=is_causal)


class SdpaVariant(ModuleVariant):
    """SdpaAttention pinned to one backend; unavailable where torch has no kernel for it."""

    def __init__(self, backend: str) -> None:
        super().__init__(SdpaAttention(backend))
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

    def __init__(self, module: nn.Module) -> None:
        super().__init__(module)
        self.dtypes = module.dtypes

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return self._dtype_problem(dtype) or self.module.why_unavailable(device, dtype)


class DecodeVariant(ModuleVariant):
    """A module of attn/decode.py: k and v may have fewer heads than q (grouped-query attention),
    and `is_causal=True` aligns the mask bottom-right (the new tokens are the last positions), so one
    new token sees the whole cache, where SDPA's top-left alignment would show it the first key
    only; more queries than keys is refused."""

    grouped = True
    causal_alignment = "bottom_right"  # is_causal: the queries are the last positions

    def _attention(self, q, k, v, *, is_causal):
        if is_causal and q.shape[2] > k.shape[2]:
            raise ValueError(
                f"is_causal aligns the {q.shape[2]} queries with the last keys, but k has only "
                f"{k.shape[2]}: q {tuple(q.shape)}, k {tuple(k.shape)}"
            )
        return super()._attention(q, k, v, is_causal=is_causal)


class TrainingVariant(Variant):
    """Another variant's attention, profiled as a training step (forward, loss, backward).

    Its forward is the other variant's; it is unavailable where that one is, and where the
    attention has no backward (`backward_problem(device)`: a sentence, or None).
    """

    def __init__(
        self, inner: Variant, backward_problem: Callable[[torch.device], str | None] | None = None
    ) -> None:
        self.inner, self.backward_problem = inner, backward_problem or (lambda device: None)
        self.head_dims, self.dtypes, self.grouped = inner.head_dims, inner.dtypes, inner.grouped

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        return self.inner.why_unavailable(device, dtype) or self.backward_problem(device)

    def _attention(self, q, k, v, *, is_causal):
        return self.inner.forward(q, k, v, is_causal=is_causal)


class RingVariant(Variant):
    """attn/ring.py's RingAttention with one sharding: every rank of a process group calls it at
    once with its shard of q, k and v. examples/ring_attention.py starts the ranks; in a process
    that is not one of them it is unavailable."""

    def __init__(self, sharding: str) -> None:
        self.sharding = sharding
        self.module = None  # made by the first forward inside a process group

    def ranks_problem(self, device: torch.device | str, ranks: int) -> str | None:
        """Why `ranks` processes of it cannot run on this machine's device, or None."""
        device = torch.device(device)
        problem = device_problem(device)
        if problem is None and device.type == "cuda" and torch.cuda.device_count() < ranks:
            seen = torch.cuda.device_count()
            problem = f"NCCL needs a GPU per rank: {ranks} ranks, and torch sees {seen} GPU(s)"
        return problem

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return (
                "ring attention runs on every rank of a process group at once, and this process "
                "is none: examples/ring_attention.py starts the ranks (--world N, or torchrun)"
            )
        return self.ranks_problem(device, 1)

    def _attention(self, q, k, v, *, is_causal):
        from attn.ring import RingAttention

        if self.module is None:
            self.module = RingAttention(self.sharding)
        return self.module(q, k, v, is_causal=is_causal)


PROBED = (torch.float32, torch.bfloat16, torch.float16)  # the dtypes a refusal is said against


@functools.cache
def _refused(backend: str, device: str, dtype: torch.dtype) -> list[str] | None:
    """None when a tiny call of the backend runs here in `dtype`, else torch's warnings about it."""
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
    return [str(w.message).strip() for w in caught if backend in str(w.message).lower()]


def _sdpa_probe(backend: str, device: str, dtype: torch.dtype) -> str | None:
    """Ask torch with a tiny call whether the backend runs here in `dtype`; on failure say why,
    and whether float32, bfloat16 and float16 were all refused or which of them run."""
    details = _refused(backend, device, dtype)
    if details is None:
        return None
    name = lambda t: str(t).removeprefix("torch.")  # noqa: E731
    runs = [name(t) for t in PROBED if t != dtype and _refused(backend, device, t) is None]
    kind = torch.device(device).type.upper()
    if runs:
        what = f"{name(dtype)} ({' and '.join(runs)} run{'s' if len(runs) == 1 else ''})"
    else:
        tried = list(dict.fromkeys([name(dtype), *map(name, PROBED)]))
        what = f"{', '.join(tried[:-1])} or {tried[-1]} (all {len(tried)} refused)"
    reason = f"the {backend} backend has no {kind} kernel for {what} in torch {torch.__version__}"
    return reason + (f" ({'; '.join(details)})" if details else "")


def build(spec) -> Variant:
    """The variant a spec describes, carrying the spec's name, title, lesson and whether it is
    profiled as a training step."""
    variant = spec.make()
    variant.name, variant.title, variant.lesson = spec.name, spec.title, spec.lesson
    variant.trains = spec.trains
    return variant
