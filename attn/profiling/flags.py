"""Command-line value types shared by every entry point: each bad value is one line naming it.

No torch at import: the trace commands share these flags and run where torch is not installed.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from attn import specs
from attn.traces.common.terminal import wide_console  # noqa: F401  (one console for all)

DTYPE_NAMES = (
    "float32",
    "bfloat16",
    "float16",
)  # what --dtype takes (attn.profiling.config.DTYPES)


class ProfilingError(RuntimeError):
    """Profiling one variant failed; its previous artifacts are left as they were."""


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def device(text: str) -> str:
    """An argparse type: cpu, cuda or cuda:N, usable by this torch."""
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device; use cpu or cuda") from None
    if dev.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text!r}: profiles are made on cpu or cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        why = "a CPU-only build" if torch.version.cuda is None else "no CUDA GPU visible"
        raise argparse.ArgumentTypeError(f"{text!r}: this torch cannot use CUDA ({why})")
    return text


def out_folder(text: str) -> Path:
    """An argparse type: a folder that exists or can be made, and can be written (tried here)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a folder such as profiles")
    path = Path(text)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except FileExistsError:
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder") from None
    except OSError as e:
        if isinstance(e, NotADirectoryError):
            raise argparse.ArgumentTypeError(
                f"{text}: a part of it is a file, not a folder"
            ) from None
        raise argparse.ArgumentTypeError(f"{text} cannot be written here ({e.strerror})") from None
    return path


def variant_name(text: str) -> str:
    """An argparse type: the name of a variant with a spec (attn.specs)."""
    if specs.spec(text) is None:
        raise argparse.ArgumentTypeError(
            f"unknown variant {text!r}; valid names: {', '.join(specs.names())}"
        )
    return text
