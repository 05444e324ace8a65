"""Attention implementations the chapters teach, in chapter order, behind one small contract."""

from __future__ import annotations

import functools

from attn.custom_cpu import custom_cpu_variant
from attn.custom_cuda import custom_cuda_variant
from attn.custom_triton import custom_triton_variant
from attn.inplace import InPlaceAttention, inplace_variant
from attn.naive import NaiveAttention, naive_variant
from attn.reference import reference_attention
from attn.sdpa import sdpa_variants
from attn.variant import Variant

__all__ = [
    "InPlaceAttention",
    "NaiveAttention",
    "Variant",
    "get_variant",
    "reference_attention",
    "variants",
]


@functools.cache
def _registry() -> dict[str, Variant]:
    found = [
        naive_variant(),
        inplace_variant(),
        *sdpa_variants(),
        custom_cpu_variant(),
        custom_cuda_variant(),
        custom_triton_variant(),
    ]
    return {v.name: v for v in found}


def variants() -> list[Variant]:
    """Every variant, in chapter order."""
    return list(_registry().values())


def get_variant(name: str) -> Variant:
    """The variant called `name`; KeyError listing the valid names for an unknown one."""
    try:
        return _registry()[name]
    except KeyError:
        valid = ", ".join(_registry())
        raise KeyError(f"unknown variant {name!r}; valid names: {valid}") from None
