"""Time our custom kernels against SDPA and the in-place baseline, side by side in one run.

    python -m attn.profiling.benchmark --out profiles            # this machine's device, default grid
    python -m attn.profiling.benchmark --device cpu --seqs 2048 4096 --head-dims 64 --causal-only

Writes `<out>/<hardware>/benchmark.json` (rows {variant, batch, heads, seq, head_dim, is_causal,
dtype, time_us, tflops}, and on a CPU the vector ISA torch ran with, `cpu_capability`) and
`benchmark.svg`, and prints each custom variant's time as a ratio of sdpa_flash's, measured in the
same run with interleaved calls. Speeds belong here, not in tests.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import DTYPES, ProfileConfig
from attn.profiling.environment import device_name, is_gpu
from attn.profiling.flags import positive, variant_name
from attn.profiling.plot import figure, plain_log_ticks, save
from attn.profiling.timing import time_interleaved

BASELINE = specs.BENCHMARK_BASELINE
GRID = {  # per device: what the benchmark times by default
    "cpu": dict(seqs=(512, 1024, 2048, 4096), batch=1, heads=8, dtypes=("float32", "bfloat16")),
    "cuda": dict(seqs=(1024, 2048, 4096, 8192, 16384), batch=4, heads=16, dtypes=("bfloat16",)),
}
# Variants that hold the [b, h, s, s] scores are skipped past this size of them.
SCORES_LIMIT_BYTES = 16 * 2**30


def significant(x: float, digits: int = 4) -> float:
    """x kept to a few significant digits: a small rate stays small instead of rounding to 0."""
    return float(f"{x:.{digits}g}")


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, is_causal: bool) -> float:
    """Two matmuls of 2*s*s*d each per head; a causal mask skips about half."""
    flops = 4 * batch * heads * seq * seq * head_dim
    return flops / 2 if is_causal else flops


def run(
    device: str, seqs, head_dims, causals, dtypes, names, repeats: int, console: Console
) -> list[dict]:
    grid = GRID[torch.device(device).type]
    # On a CPU, which vector ISA torch's kernels (and custom_cpu's softmax) ran with.
    isa = {} if is_gpu(device) else {"cpu_capability": torch.backends.cpu.get_cpu_capability()}
    rows = []
    for dtype in dtypes:
        for head_dim in head_dims:
            for is_causal in causals:
                for seq in seqs:
                    config = ProfileConfig(
                        device=device, batch=grid["batch"], heads=grid["heads"], seq_q=seq,
                        seq_k=seq, head_dim=head_dim, dtype=dtype,
                    )  # fmt: skip
                    scores = config.batch * config.heads * seq * seq * 4
                    contenders = {
                        name: variant
                        for name, variant in sweeps.available(
                            names, device, config.torch_dtype, head_dim
                        ).items()
                        if not (scores > SCORES_LIMIT_BYTES and specs.spec(name).holds_scores)
                    }
                    q, k, v = config.make_inputs()
                    console.print(
                        f"{dtype}, seq {seq}, head_dim {head_dim}, causal={is_causal}: "
                        + ", ".join(contenders)
                    )
                    times = time_interleaved(
                        contenders, q, k, v, is_causal=is_causal, repeats=repeats
                    )
                    flops = attention_flops(config.batch, config.heads, seq, head_dim, is_causal)
                    for name, us in times.items():
                        rows.append({
                            "variant": name, "batch": config.batch, "heads": config.heads,
                            "seq": seq, "head_dim": head_dim, "is_causal": is_causal,
                            "dtype": dtype, "time_us": round(us, 1),
                            "tflops": significant(flops / us / 1e6), **isa,
                        })  # fmt: skip
                    del q, k, v
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """The row of each variant whose spec asks for a ratio, with its time over the baseline's
    (sdpa_flash's) for the same configuration."""
    key = lambda r: (r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
    flash = {key(r): r["time_us"] for r in rows if r["variant"] == BASELINE}
    return [
        {**r, "ratio_to_flash": round(r["time_us"] / flash[key(r)], 3)}
        for r in rows
        if (specs.spec(r["variant"]) and specs.spec(r["variant"]).ratio) and key(r) in flash
    ]


def with_ratios(rows: list[dict]) -> list[dict]:
    """All rows, the custom kernels' with `ratio_to_flash`, so readers need no code to get it."""
    key = lambda r: (r["variant"], r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
    ratio = {key(r): r["ratio_to_flash"] for r in ratios(rows)}
    return [{**r, "ratio_to_flash": ratio[key(r)]} if key(r) in ratio else r for r in rows]


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Time per forward against seq, a panel per (dtype, head_dim, causal), two panels a row, drawn
    at the page's width (7.2 in) so its text reads at about 11 px there."""
    panel = lambda r: (r.get("dtype", ""), r["head_dim"], r["is_causal"])  # noqa: E731
    panels = list(dict.fromkeys(panel(r) for r in rows))  # in the order they were run
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = figure(0.8 + 2.6 * nrows, nrows=nrows, ncols=ncols, squeeze=False, sharey=True)
    for ax, key in zip(axes.flat, panels, strict=False):
        mine = [r for r in rows if panel(r) == key]
        for name in dict.fromkeys(r["variant"] for r in mine):
            line = [r for r in mine if r["variant"] == name]
            width = 2.2 if specs.spec(name).ratio else 1.2  # the kernels the ratios are about
            seqs, ms = [r["seq"] for r in line], [r["time_us"] / 1000 for r in line]
            ax.plot(seqs, ms, marker="o", label=name, linewidth=width)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        dtype, head_dim, causal = key
        ax.set_title(f"{dtype}, head_dim {head_dim}, {'causal' if causal else 'full'}", fontsize=9)
        ax.set_xlabel("sequence length")
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("ms per forward")
    axes.flat[0].legend(frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write benchmark.json and benchmark.svg into `<out>/<hardware>/`, each replaced atomically."""
    threads = "" if is_gpu(device) else f" ({torch.get_num_threads()} CPU threads)"
    title = f"Forward time on {device_name(device)}{threads}"
    return sweeps.write(out_root, device, "benchmark", with_ratios(rows), plot, title)


def main(argv: list[str] | None = None) -> int:
    parser = sweeps.parser("attn.profiling.benchmark", __doc__)
    parser.add_argument("--seqs", type=positive, nargs="+")
    parser.add_argument("--head-dims", type=positive, nargs="+", default=[64, 128])
    parser.add_argument("--causal-only", action="store_true")
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, help="default: the device's grid")
    parser.add_argument(
        "--variants", nargs="+", type=variant_name, metavar="NAME",
        help="default: every variant of the benchmark sweep that runs here",
    )  # fmt: skip
    parser.add_argument("--repeats", type=positive, default=5)
    args = parser.parse_args(argv)
    kind = torch.device(args.device).type
    console = Console(stderr=True)
    causals = (True,) if args.causal_only else (True, False)
    names = args.variants or specs.in_sweep("benchmark")
    seqs, dtypes = args.seqs or GRID[kind]["seqs"], args.dtypes or GRID[kind]["dtypes"]
    rows = run(args.device, seqs, args.head_dims, causals, dtypes, names, args.repeats, console)
    if not rows:  # the previous benchmark.json stays as it was
        print(f"error: none of {', '.join(names)} runs on {args.device} here", file=sys.stderr)
        return 1
    folder = write(args.out, args.device, rows)
    # Narrow enough for 80 columns (a log, a pipe); TFLOP/s are in benchmark.json.
    table = Table("variant", "dtype", "seq", "head_dim", "causal", "ms", f"÷ {BASELINE}")
    for r in ratios(rows):
        shape = (r["dtype"], str(r["seq"]), str(r["head_dim"]), str(r["is_causal"]))
        numbers = (f"{r['time_us'] / 1000:.2f}", f"{r['ratio_to_flash']:.3f}")
        table.add_row(r["variant"], *shape, *numbers)
    Console().print(table)
    print(f"benchmark: {len(rows)} rows written to {folder}/benchmark.json and benchmark.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
