"""How time and peak memory grow with sequence length, for every variant available here.

python -m attn.profiling.scaling --out profiles [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

import attn  # noqa: E402
from attn.profiling import layout  # noqa: E402
from attn.profiling.config import ProfileConfig, default_config, default_device  # noqa: E402
from attn.profiling.environment import device_name, hardware_slug  # noqa: E402
from attn.profiling.flags import device, out_folder, positive  # noqa: E402
from attn.profiling.memory import peak_forward_memory  # noqa: E402
from attn.profiling.timing import time_forward  # noqa: E402

# The chapters' attention variants at square shapes (decode steps have a sweep of their own).
SCALING_VARIANTS = (
    "naive", "inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn",
    "custom_cpu", "custom_cuda", "custom_triton",
)  # fmt: skip
SEQS = {"cpu": (256, 512, 1024, 2048), "cuda": (512, 1024, 2048, 4096, 8192, 16384)}


def sweep(device: str, seqs: tuple[int, ...], console: Console | None = None) -> list[dict]:
    """Rows {variant, seq, time_us, peak_memory_bytes} for each available variant and length."""
    base = default_config(device)
    # One sequence at a time in a single batch: the growth with seq is what the plot is about.
    base = ProfileConfig(
        device=device, batch=1, heads=base.heads, head_dim=base.head_dim, dtype=base.dtype
    )
    names = [
        name
        for name in SCALING_VARIANTS
        if attn.get_variant(name).why_unavailable(device, base.torch_dtype) is None
    ]
    rows = []
    with Progress(console=console or Console(stderr=True), transient=True) as progress:
        task = progress.add_task("scaling", total=len(names) * len(seqs))
        for name in names:
            variant = attn.get_variant(name)
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
    plt.rcParams.update(
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": 8.5}
    )
    fig, (ax_t, ax_m) = plt.subplots(2, 1, figsize=(7.2, 6.0), sharex=True)
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
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax_m.set_xlabel("sequence length")
    ax_t.legend(fontsize=8, frameon=False, ncol=2)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write scaling.json and scaling.svg into `<out>/<hardware>/`, each replaced atomically."""
    folder = Path(out_root) / hardware_slug(device)
    title = f"Scaling with sequence length on {device_name(device)} (causal, batch 1)"
    return layout.write_figure(folder, "scaling", rows, lambda p: plot(rows, title, p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn.profiling.scaling", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=out_folder, default=Path("profiles"))
    parser.add_argument("--device", type=device, default=default_device())
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
