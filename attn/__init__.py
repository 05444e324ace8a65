"""Attention implementations the chapters teach, in chapter order, behind one small contract.

Everything here is imported on first use, so that `attn.traces` (which reads traces and needs no
torch) can be imported where torch is not installed.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def __getattr__(name: str):
    """The modules' classes, imported when first asked for (attn.specs knows where each lives)."""
    if name not in __all__:
        raise AttributeError(f"module 'attn' has no attribute {name!r}")
    from attn.specs import V

    return getattr(V, name)


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
