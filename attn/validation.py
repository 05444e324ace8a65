"""Input checks shared by every attention variant."""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensors(q, k, v) -> None:
    """Raise ValueError unless each of q, k, v is a non-empty 4-dim tensor."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have 4 dims [batch, heads, seq, head_dim], got shape {tuple(t.shape)}"
            )
        if 0 in t.shape:
            raise ValueError(f"{name} has an empty dimension: shape {tuple(t.shape)}")


def check_qkv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    head_dims: tuple[int, ...] | None = None,
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES,
    grouped: bool = False,
) -> None:
    """Raise ValueError naming the offending values unless q, k, v form a valid attention call.

    Layout is [batch, heads, seq, head_dim]; k and v share a sequence length that may differ from
    q's. With `grouped` (grouped-query attention) k and v may have fewer heads than q: q's head
    count must be a multiple of theirs.
    """
    check_tensors(q, k, v)
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(f"batch sizes differ: {shapes}")
    if grouped and k.shape[1] != v.shape[1]:
        raise ValueError(f"k and v head counts differ: {shapes}")
    if grouped and q.shape[1] % k.shape[1]:
        raise ValueError(
            f"head counts do not fit grouped-query attention: q's {q.shape[1]} heads are not a "
            f"multiple of k's and v's {k.shape[1]}: {shapes}"
        )
    if not grouped and not (q.shape[1] == k.shape[1] == v.shape[1]):
        raise ValueError(f"head counts differ: {shapes}")
    if not (q.shape[3] == k.shape[3] == v.shape[3]):
        raise ValueError(f"head_dim differs: {shapes}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v sequence lengths differ: {shapes}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"dtypes differ: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if q.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"dtype {q.dtype} is not supported here; use one of {names}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"devices differ: q on {q.device}, k on {k.device}, v on {v.device}")
    if head_dims is not None and q.shape[3] not in head_dims:
        raise ValueError(f"head_dim {q.shape[3]} is not supported here; use one of {head_dims}")
