"""How time and peak memory grow with sequence length, for every variant available here.

python -m attn.profiling.scaling --out profiles [--device cuda]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import Progress

from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import device_name
from attn.profiling.flags import positive
from attn.profiling.memory import peak_forward_memory
from attn.profiling.plot import figure, plain_log_ticks, save
from attn.profiling.timing import time_forward

SEQS = {"cpu": (256, 512, 1024, 2048), "cuda": (512, 1024, 2048, 4096, 8192, 16384)}


def sweep(device: str, seqs: tuple[int, ...], console: Console | None = None) -> list[dict]:
    """Rows {variant, seq, time_us, peak_memory_bytes} for each available variant and length."""
    base = default_config(device)
    # One sequence at a time in a single batch: the growth with seq is what the plot is about.
    base = ProfileConfig(
        device=device, batch=1, heads=base.heads, head_dim=base.head_dim, dtype=base.dtype
    )
    variants = sweeps.available(specs.in_sweep("scaling"), device, base.torch_dtype)
    rows = []
    with Progress(console=console or Console(stderr=True), transient=True) as progress:
        task = progress.add_task("scaling", total=len(variants) * len(seqs))
        for name, variant in variants.items():
            for seq in seqs:
                progress.update(task, description=f"scaling {name} seq={seq}")
                q, k, v = ProfileConfig(
                    **{**base.__dict__, "seq_q": seq, "seq_k": seq}
                ).make_inputs()
                rows.append(
                    {
                        "variant": name,
                        "seq": seq,
                        "time_us": round(
                            time_forward(variant, q, k, v, is_causal=True, repeats=3), 1
                        ),
                        "peak_memory_bytes": peak_forward_memory(variant, q, k, v, is_causal=True),
                    }
                )
                del q, k, v
                progress.advance(task)
    return rows


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Time and peak memory against sequence length, log-log, one line per variant; two panels
    stacked at the page's width (7.2 in), so the text reads at about 11 px there."""
    fig, (ax_t, ax_m) = figure(6.0, nrows=2, sharex=True)
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        seqs = [r["seq"] for r in mine]
        ax_t.plot(seqs, [r["time_us"] / 1000 for r in mine], marker="o", label=name)
        ax_m.plot(
            seqs, [max(r["peak_memory_bytes"], 1) / 2**20 for r in mine], marker="o", label=name
        )
    for ax, ylabel in ((ax_t, "ms per forward"), (ax_m, "peak MiB allocated by a forward")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax_m.set_xlabel("sequence length")
    ax_t.legend(frameon=False, ncol=2)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write scaling.json and scaling.svg into `<out>/<hardware>/`, each replaced atomically."""
    title = f"Scaling with sequence length on {device_name(device)} (causal, batch 1)"
    return sweeps.write(out_root, device, "scaling", rows, plot, title)


def main(argv: list[str] | None = None) -> int:
    parser = sweeps.parser("attn.profiling.scaling", __doc__)
    parser.add_argument(
        "--seqs", type=positive, nargs="+", help="sequence lengths (default: per device)"
    )
    args = parser.parse_args(argv)
    seqs = tuple(args.seqs or SEQS[torch.device(args.device).type])
    rows = sweep(args.device, seqs)
    folder = write(args.out, args.device, rows)
    print(f"scaling: {len(rows)} rows written to {folder}/scaling.json and scaling.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
