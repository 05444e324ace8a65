"""What the sweeps (scaling, benchmark, decoding) share: their flags, who runs, where rows go."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console

import attn
from attn.profiling import layout
from attn.profiling.config import default_device
from attn.profiling.environment import hardware_slug
from attn.profiling.flags import device, out_folder
from attn.variant import Variant


def wide_console(stderr: bool = True) -> Console:
    """rich on stderr (or stdout); in a log or a pipe 160 columns wide, so no table is cut at 80."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)


def parser(module: str, doc: str) -> argparse.ArgumentParser:
    """`python -m <module>` with the flags every sweep takes: --out and --device."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    p.add_argument("--out", type=out_folder, default=Path("profiles"), help="artifact root")
    p.add_argument("--device", type=device, default=default_device(), help="cpu or cuda")
    return p


def available(
    names: list[str], device: str, dtype: torch.dtype, head_dim: int | None = None
) -> dict[str, Variant]:
    """The named variants that run here in this dtype (and head_dim), in the order given."""
    found = {}
    for name in names:
        variant = attn.get_variant(name)
        if variant.why_unavailable(device, dtype) is not None:
            continue
        if head_dim is not None and variant.head_dims and head_dim not in variant.head_dims:
            continue
        found[name] = variant
    return found


Draw = Callable[[list, str, Path], None]  # (rows, title, path): a figure of the rows


def write(out_root: Path, device: str, stem: str, rows: list[dict], draw: Draw, title: str) -> Path:
    """`<out>/<hardware>/<stem>.json` (the rows) and `<stem>.svg` (drawn), each replaced atomically."""
    folder = Path(out_root) / hardware_slug(device)
    return layout.write_figure(folder, stem, rows, lambda path: draw(rows, title, path))
