"""Write one variant's artifact folder atomically: all files appear together, or none change."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from attn.profiling.capture import capture
from attn.profiling.claims import Evidence, evaluate
from attn.profiling.config import ProfileConfig
from attn.profiling.environment import device_name, environment, hardware_slug
from attn.profiling.memory import peak_forward_memory
from attn.profiling.scrub import scrub_trace
from attn.profiling.table import markdown_table, profiler_table
from attn.profiling.timeline import draw_timeline
from attn.profiling.trace import forwards, per_forward
from attn.variant import Variant


class ProfilingError(RuntimeError):
    """Profiling one variant failed; its previous artifacts are left as they were."""


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


@contextlib.contextmanager
def atomic_folder(dest: Path) -> Iterator[Path]:
    """Yield a scratch folder beside `dest`; on success it replaces `dest`, on failure it vanishes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        yield scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    scratch.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def replace_file(path: Path, write: Callable[[Path], None]) -> Path:
    """Call `write` on a scratch file beside `path`, then rename it over `path`: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_rows(folder: Path, stem: str, rows: list[dict], draw: Callable[[Path], None]) -> Path:
    """Write `<stem>.json` (the rows) and `<stem>.svg` (drawn by `draw`) into folder, atomically."""
    replace_file(folder / f"{stem}.json", lambda p: p.write_text(json.dumps(rows, indent=1) + "\n"))
    replace_file(folder / f"{stem}.svg", draw)
    return folder


def write_environment(out_root: Path, device: str) -> Path:
    """Write `<out>/<hardware>/environment.json` (atomically) and return its path."""
    path = Path(out_root) / hardware_slug(device) / "environment.json"
    return replace_file(path, lambda tmp: write_json(tmp, environment(device)))


def why_not_here(variant: Variant, config: ProfileConfig) -> str | None:
    """Why the variant cannot run this config (device, dtype, head_dim), or None."""
    reason = variant.why_unavailable(config.device, config.torch_dtype)
    if reason is None and variant.head_dims and config.head_dim not in variant.head_dims:
        dims = " or ".join(str(d) for d in variant.head_dims)
        reason = f"the kernel takes head_dim {dims}, not {config.head_dim}"
    return reason


def profile_variant(variant: Variant, config: ProfileConfig, out_root: Path) -> Path:
    """Profile `variant` under `config` and write `<out>/<hardware>/<variant>/`; returns that folder.

    A variant unavailable here gets a summary.json with its reason, which is not an error.
    """
    hardware = hardware_slug(config.device)
    dest = Path(out_root) / hardware / variant.name
    base = {
        "variant": variant.name,
        "title": variant.title,
        "lesson": variant.lesson,
        "hardware": hardware,
        "device_name": device_name(config.device),
        "device_type": torch.device(config.device).type,
        "torch_version": torch.__version__,
    }
    try:
        with atomic_folder(dest) as folder:
            reason = why_not_here(variant, config)
            if reason is not None:
                write_json(folder / "summary.json", {**base, "available": False, "reason": reason})
            else:
                _write_profile(variant, config, folder, base)
    except Exception as exc:
        raise ProfilingError(
            f"profiling {variant.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return dest


def _write_profile(variant: Variant, config: ProfileConfig, folder: Path, base: dict) -> None:
    on_gpu = base["device_type"] == "cuda"
    prof, raw_trace = capture(variant, config)
    trace = scrub_trace(raw_trace)
    measured = per_forward(trace)
    q, k, v = config.make_inputs()
    summary = {
        **base,
        "available": True,
        "dtype": config.dtype,
        "shape": config.shape(),
        "is_causal": config.is_causal,
        **measured,
        "peak_memory_bytes": peak_forward_memory(variant, q, k, v, is_causal=config.is_causal),
    }
    summary["claims"] = evaluate(
        variant.name, base["device_type"], Evidence(summary, forwards(trace))
    )
    (folder / "table.txt").write_text(profiler_table(prof, on_gpu) + "\n")
    (folder / "table.md").write_text(markdown_table(prof, on_gpu))
    with gzip.open(folder / "trace.json.gz", "wt", compresslevel=9) as f:
        json.dump(trace, f)
    title = f"{variant.name} on {base['device_name']}: one attn_fwd"
    draw_timeline(trace, title, folder / "timeline.svg")
    write_json(folder / "summary.json", summary)
