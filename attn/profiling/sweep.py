"""What the sweeps (scaling, training, benchmark, decoding) share: their flags, who runs, where rows go."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch

import attn
from attn import specs
from attn.profiling.config import default_device
from attn.profiling.environment import hardware_slug
from attn.profiling.flags import device, out_folder, positive
from attn.profiling.machine_load import busy_line, load_before_a_run, load_now, load_over
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput
from attn.traces.common.terminal import say
from attn.traces.sets.set_claims import write_claims
from attn.variant import Variant


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


def stamped(measure: Callable[[], list[dict]]) -> list[dict]:
    """A sweep's rows, each stamped with the machine's load while the sweep ran (other work's share
    of the CPU, busy or not: attn.profiling.machine_load), as the timing pass stamps its own; said in one
    line first when the machine is busy. A row carries it: a benchmark merges rows of runs apart."""
    if busy := busy_line(load_before_a_run()):
        say(busy, err=True)
    before = load_now()
    rows = measure()
    load = load_over(before, load_now())
    return [{**row, "load": load} for row in rows]


Draw = Callable[[list, str, Path], None]  # (rows, title, path): a figure of the rows


def write(out_root: Path, device: str, stem: str, rows: list[dict], draw: Draw, title: str) -> Path:
    """`<out>/<hardware>/<stem>.json` (the rows) and `<stem>.svg` (drawn), each replaced atomically,
    then the set's claims.json."""
    folder = Path(out_root) / hardware_slug(device)
    artifacts.write_figure(folder, stem, rows, lambda path: draw(rows, title, path))
    write_claims(folder, specs)  # the claims on these rows, decided now and stored in the set
    return folder


def seq_main(module, argv: list[str] | None) -> int:
    """`python -m <module> [--seqs ...]` for a sweep over sequence lengths: the module gives its
    docstring, SEQS per device type, sweep(device, seqs) and write(out, device, rows)."""
    name = module.__spec__.name  # under `python -m`, __name__ is "__main__"
    stem = name.rsplit(".", 1)[-1]
    p = parser(name, module.__doc__)
    p.add_argument(
        "--seqs", type=positive, nargs="+", help="sequence lengths (default: per device)"
    )
    args = p.parse_args(argv)
    seqs = tuple(args.seqs or module.SEQS[torch.device(args.device).type])
    try:  # before the sweep: a folder at scaling.svg is said now, not after minutes
        artifacts.check_figure(Path(args.out) / hardware_slug(args.device), stem)
    except RefusedOutput as e:
        say(f"error: {e}", err=True)
        return 1
    rows = stamped(lambda: module.sweep(args.device, seqs))
    folder = module.write(args.out, args.device, rows)
    print(f"{stem}: {len(rows)} rows written to {folder}/{stem}.json and {stem}.svg")
    return 0
