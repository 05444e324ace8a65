"""Time our custom kernels against SDPA and the in-place baseline, side by side in one run.

    python -m attn.profiling.benchmark --out profiles            # this machine's device, default grid
    python -m attn.profiling.benchmark --device cpu --seqs 2048 4096 --head-dims 64 --causal-only

Writes `<out>/<hardware>/benchmark.json` (rows {variant, seq, head_dim, is_causal, dtype, time_us,
tflops}) and `benchmark.svg`, and prints each custom variant's time as a ratio of sdpa_flash's,
measured in the same run with interleaved calls. Speeds belong here, not in tests.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import attn  # noqa: E402
from attn.profiling import layout  # noqa: E402
from attn.profiling.config import ProfileConfig, default_config, default_device  # noqa: E402
from attn.profiling.environment import device_name, hardware_slug  # noqa: E402
from attn.profiling.flags import device, out_folder, positive  # noqa: E402
from attn.profiling.timing import time_interleaved  # noqa: E402

BASELINE = "sdpa_flash"
GRID = {
    "cpu": {"seqs": (512, 1024, 2048, 4096), "batch": 1, "heads": 8},
    "cuda": {"seqs": (1024, 2048, 4096, 8192, 16384), "batch": 4, "heads": 16},
}
VARIANTS = {
    "cpu": ("custom_cpu", "sdpa_flash", "sdpa_math", "inplace"),
    "cuda": (
        "custom_cuda",
        "custom_triton",
        "sdpa_flash",
        "sdpa_cudnn",
        "sdpa_efficient",
        "sdpa_math",
        "inplace",
    ),
}
SCORES_LIMIT_BYTES = (
    16 * 2**30
)  # variants that materialise [b, h, s, s] scores are skipped beyond this
MATERIALISING = {"naive", "inplace", "sdpa_math"}


def significant(x: float, digits: int = 4) -> float:
    """x kept to a few significant digits: a small rate stays small instead of rounding to 0."""
    return float(f"{x:.{digits}g}")


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, is_causal: bool) -> float:
    """Two matmuls of 2*s*s*d each per head; a causal mask skips about half."""
    flops = 4 * batch * heads * seq * seq * head_dim
    return flops / 2 if is_causal else flops


def run(device: str, seqs, head_dims, causals, names, repeats: int, console: Console) -> list[dict]:
    grid = GRID[torch.device(device).type]
    base = default_config(device)
    rows = []
    for head_dim in head_dims:
        for is_causal in causals:
            for seq in seqs:
                config = ProfileConfig(
                    device=device,
                    batch=grid["batch"],
                    heads=grid["heads"],
                    seq_q=seq,
                    seq_k=seq,
                    head_dim=head_dim,
                    dtype=base.dtype,
                )
                scores_bytes = config.batch * config.heads * seq * seq * 4
                contenders = {}
                for name in names:
                    variant = attn.get_variant(name)
                    if variant.why_unavailable(device, config.torch_dtype) is not None:
                        continue
                    if variant.head_dims and head_dim not in variant.head_dims:
                        continue
                    if name in MATERIALISING and scores_bytes > SCORES_LIMIT_BYTES:
                        continue
                    contenders[name] = variant
                q, k, v = config.make_inputs()
                console.print(
                    f"seq {seq}, head_dim {head_dim}, causal={is_causal}: {', '.join(contenders)}"
                )
                times = time_interleaved(contenders, q, k, v, is_causal=is_causal, repeats=repeats)
                flops = attention_flops(config.batch, config.heads, seq, head_dim, is_causal)
                for name, us in times.items():
                    rows.append(
                        {
                            "variant": name,
                            "batch": config.batch,
                            "heads": config.heads,
                            "seq": seq,
                            "head_dim": head_dim,
                            "is_causal": is_causal,
                            "dtype": config.dtype,
                            "time_us": round(us, 1),
                            "tflops": significant(flops / us / 1e6),
                        }
                    )
                del q, k, v
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Each custom kernel's row with its time over sdpa_flash's for the same configuration."""
    key = lambda r: (r["seq"], r["head_dim"], r["is_causal"])  # noqa: E731
    flash = {key(r): r["time_us"] for r in rows if r["variant"] == BASELINE}
    return [
        {**r, "ratio_to_flash": round(r["time_us"] / flash[key(r)], 3)}
        for r in rows
        if r["variant"].startswith("custom_") and key(r) in flash
    ]


def with_ratios(rows: list[dict]) -> list[dict]:
    """All rows, the custom kernels' with `ratio_to_flash`, so readers need no code to get it."""
    key = lambda r: (r["variant"], r["seq"], r["head_dim"], r["is_causal"])  # noqa: E731
    ratio = {key(r): r["ratio_to_flash"] for r in ratios(rows)}
    return [{**r, "ratio_to_flash": ratio[key(r)]} if key(r) in ratio else r for r in rows]


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Time per forward against seq, a panel per (head_dim, causal), two panels a row, drawn at the
    page's width (7.2 in) so its text reads at about 11 px there."""
    panels = sorted({(r["head_dim"], r["is_causal"]) for r in rows})
    plt.rcParams.update(
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": 8.5}
    )
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(7.2, 0.8 + 2.6 * nrows), squeeze=False, sharey=True
    )
    for ax, (head_dim, is_causal) in zip(axes.flat, panels, strict=False):
        mine = [r for r in rows if (r["head_dim"], r["is_causal"]) == (head_dim, is_causal)]
        for name in dict.fromkeys(r["variant"] for r in mine):
            line = [r for r in mine if r["variant"] == name]
            ax.plot(
                [r["seq"] for r in line],
                [r["time_us"] / 1000 for r in line],
                marker="o",
                label=name,
                linewidth=2.2 if name.startswith("custom_") else 1.2,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"head_dim {head_dim}, {'causal' if is_causal else 'full'}", fontsize=9)
        ax.set_xlabel("sequence length")
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("ms per forward")
    axes.flat[0].legend(fontsize=8, frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write benchmark.json and benchmark.svg into `<out>/<hardware>/`, each replaced atomically."""
    folder = Path(out_root) / hardware_slug(device)
    config = default_config(device)
    title = f"Forward time on {device_name(device)} ({config.dtype}, {torch.get_num_threads()} CPU threads)"
    rows = with_ratios(rows)
    return layout.write_figure(folder, "benchmark", rows, lambda p: plot(rows, title, p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn.profiling.benchmark", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=out_folder, default=Path("profiles"))
    parser.add_argument("--device", type=device, default=default_device())
    parser.add_argument("--seqs", type=positive, nargs="+")
    parser.add_argument("--head-dims", type=positive, nargs="+", default=[64, 128])
    parser.add_argument("--causal-only", action="store_true")
    parser.add_argument("--variants", nargs="+", help="default: per device")
    parser.add_argument("--repeats", type=positive, default=5)
    args = parser.parse_args(argv)
    kind = torch.device(args.device).type
    console = Console(stderr=True)
    rows = run(
        args.device,
        args.seqs or GRID[kind]["seqs"],
        args.head_dims,
        (True,) if args.causal_only else (True, False),
        args.variants or VARIANTS[kind],
        args.repeats,
        console,
    )
    folder = write(args.out, args.device, rows)
    table = Table("variant", "seq", "head_dim", "causal", "ms", "TFLOP/s", f"time / {BASELINE}")
    for r in ratios(rows):
        table.add_row(
            r["variant"],
            str(r["seq"]),
            str(r["head_dim"]),
            str(r["is_causal"]),
            f"{r['time_us'] / 1000:.2f}",
            f"{r['tflops']:.3f}",
            f"{r['ratio_to_flash']:.3f}",
        )
    Console().print(table)
    print(f"benchmark: {len(rows)} rows written to {folder}/benchmark.json and benchmark.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
