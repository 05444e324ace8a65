"""How time and peak memory grow with sequence length, for every variant available here.

python -m attn.profiling.scaling --out profiles [--device cuda]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.console import Console

from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import device_name
from attn.profiling.flags import wide_console
from attn.profiling.memory import peak_forward_memory
from attn.profiling.timing import time_interleaved
from attn.traces.figures.plot import figure, plain_log_ticks, save

SEQS = {"cpu": (256, 512, 1024, 2048), "cuda": (512, 1024, 2048, 4096, 8192, 16384)}


def sweep(
    device: str, seqs: tuple[int, ...], console: Console | None = None, budget_s: float = 2.0
) -> list[dict]:
    """Rows {variant, seq, time_us (the median), low_us, high_us (its interquartile range),
    repeats, peak_memory_bytes} for each available variant and length; at each length the variants
    are timed interleaved."""
    base = default_config(device)
    # One sequence at a time in a single batch: the growth with seq is what the plot is about.
    base = ProfileConfig(
        device=device, batch=1, heads=base.heads, head_dim=base.head_dim, dtype=base.dtype
    )
    variants = sweeps.available(specs.in_sweep("scaling"), device, base.torch_dtype)
    rows = []
    console = console or wide_console()
    for seq in seqs:
        start = time.perf_counter()
        q, k, v = ProfileConfig(**{**base.__dict__, "seq_q": seq, "seq_k": seq}).make_inputs()
        times = time_interleaved(variants, q, k, v, is_causal=True, budget_s=budget_s)
        for name, variant in variants.items():
            t = times[name].row()
            rows.append({
                "variant": name, "seq": seq, "time_us": t.pop("median_us"), **t,
                "peak_memory_bytes": peak_forward_memory(variant, q, k, v, is_causal=True),
            })  # fmt: skip
        del q, k, v
        console.print(
            f"scaling: seq {seq}, {len(variants)} variants ({time.perf_counter() - start:.1f} s)"
        )
    return rows


def plot(rows: list[dict], title: str, path: Path) -> None:
    """Time and peak memory against sequence length, log-log, one line per variant; two panels
    stacked at the page's width (7.2 in), so the text reads at about 11 px there."""
    fig, (ax_t, ax_m) = figure(6.0, nrows=2, sharex=True)
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        seqs = [r["seq"] for r in mine]
        ms = [r["time_us"] / 1000 for r in mine]
        spread = [[(r["time_us"] - r.get("low_us", r["time_us"])) / 1000 for r in mine],
                  [(r.get("high_us", r["time_us"]) - r["time_us"]) / 1000 for r in mine]]  # fmt: skip
        ax_t.errorbar(seqs, ms, yerr=spread, marker="o", label=name, capsize=2)
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
    title = (
        f"Scaling with sequence length on {device_name(device)} (causal, batch 1; "
        "time: median, bars: interquartile range)"
    )
    return sweeps.write(out_root, device, "scaling", rows, plot, title)


def main(argv: list[str] | None = None) -> int:
    return sweeps.seq_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
