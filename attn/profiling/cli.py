"""Command line: profile variants into `<out>/<hardware>/`, with flags shared by the examples."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import attn
from attn.profiling.artifacts import ProfilingError, profile_variant, write_environment
from attn.profiling.config import DTYPES, ProfileConfig, default_config, default_device
from attn.profiling.environment import hardware_slug
from attn.profiling.overview import write_overview


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every entry point shares: where to write, on what device, which shape."""
    device = default_device()
    parser.add_argument(
        "--out", type=Path, default=Path("profiles"), help="artifact root (default: profiles)"
    )
    parser.add_argument("--device", default=device, help=f"cpu or cuda (default: {device})")
    shape = parser.add_argument_group(
        "shape (defaults: the article's on CUDA, a 2-core-friendly one on CPU)"
    )
    shape.add_argument("--batch", type=int)
    shape.add_argument("--heads", type=int)
    shape.add_argument("--seq", type=int, help="query (and key) sequence length")
    shape.add_argument("--seq-k", type=int, help="key/value sequence length (default: --seq)")
    shape.add_argument("--head-dim", type=int)
    shape.add_argument("--dtype", choices=sorted(DTYPES))
    shape.add_argument(
        "--no-causal", action="store_true", help="attend to every key (default: causal)"
    )


def config_from(args: argparse.Namespace) -> ProfileConfig:
    """The device's default config with the flags the user gave laid over it."""
    base = default_config(args.device)
    seq = args.seq or base.seq_q
    given = {
        "batch": args.batch,
        "heads": args.heads,
        "seq_q": seq,
        "seq_k": args.seq_k or seq,
        "head_dim": args.head_dim,
        "dtype": args.dtype,
        "is_causal": not args.no_causal,
    }
    for name, value in given.items():
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise SystemExit(f"error: --{name.replace('_', '-')} must be >= 1, got {value}")
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


def run(names: Sequence[str], config: ProfileConfig, out: Path, console: Console) -> list[Path]:
    """Profile each named variant with a progress bar; returns their artifact folders."""
    write_environment(out, config.device)
    folders = []
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("profiling", total=len(names))
        for name in names:
            progress.update(task, description=f"profiling {name}")
            folders.append(profile_variant(attn.get_variant(name), config, out))
            progress.advance(task)
    write_overview(out / hardware_slug(config.device))
    return folders


def report(folders: Sequence[Path], console: Console) -> None:
    """One row per variant: times and counts from its summary; then where the artifacts are."""
    table = Table("variant", "CPU us/fwd", "device us/fwd", "ATen ops/fwd", "kernels/fwd")
    fmt = lambda x: "-" if x is None else f"{x:,.1f}"  # noqa: E731
    unavailable = []
    for folder in folders:
        s = json.loads((folder / "summary.json").read_text())
        if not s["available"]:
            table.add_row(s["variant"], "[dim]not available[/dim]")
            unavailable.append(f"{s['variant']}: {s['reason']}")
            continue
        table.add_row(
            s["variant"],
            fmt(s["cpu_time_us"]),
            fmt(s["device_time_us"]),
            fmt(s["ops_per_forward"]),
            fmt(s["kernels_per_forward"]),
        )
    console.print(table)
    for line in unavailable:
        console.print(f"[dim]{line}[/dim]")
    if folders:
        console.print(f"artifacts in {folders[0].parent}/")


def example_main(
    name: str, argv: Sequence[str] | None = None, choose: dict[str, str] | None = None
) -> int:
    """What each script in examples/ runs: profile one variant, print the profiler's table and the folder.

    `choose` maps a flag value to a variant (e.g. --backend flash -> sdpa_flash); without it, `name` is profiled.
    """
    parser = argparse.ArgumentParser(description=f"Profile {name} attention under torch.profiler.")
    add_run_arguments(parser)
    if choose:
        parser.add_argument(f"--{name}", choices=list(choose), required=True)
    args = parser.parse_args(argv)
    variant = choose[getattr(args, name)] if choose else name
    console = Console()
    try:
        (folder,) = run([variant], config_from(args), args.out, console)
    except ProfilingError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1
    summary = json.loads((folder / "summary.json").read_text())
    if summary["available"]:
        print((folder / "table.txt").read_text())
        print(f"{variant}: artifacts written to {folder}/")
    else:
        print(f"{variant} is not available on {summary['device_name']}: {summary['reason']}")
        print(f"recorded in {folder}/summary.json")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attn.profiling", description=__doc__)
    add_run_arguments(parser)
    names = [v.name for v in attn.variants()]
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=names,
        default=names,
        metavar="NAME",
        help=f"variants to profile (default: all): {', '.join(names)}",
    )
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        folders = run(args.variants, config_from(args), args.out, console)
    except ProfilingError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1
    report(folders, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
