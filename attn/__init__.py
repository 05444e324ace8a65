"""Attention implementations the chapters teach, in chapter order, behind one small contract."""

from __future__ import annotations

import functools

from attn.inplace import InPlaceAttention
from attn.naive import NaiveAttention
from attn.reference import reference_attention
from attn.sdpa import SdpaAttention
from attn.variant import Variant

__all__ = [
    "InPlaceAttention",
    "NaiveAttention",
    "SdpaAttention",
    "Variant",
    "get_variant",
    "reference_attention",
    "variants",
]


@functools.cache
def _registry() -> dict[str, Variant]:
    # Imported on first use: `import attn` stays light (no torch.compile, triton or checks).
    from attn.registry import build
    from attn.specs import SPECS

    return {spec.name: build(spec) for spec in SPECS}


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
