"""Time our custom kernels against SDPA and the in-place baseline, side by side in one run.

    python -m attn.profiling.benchmark --out profiles            # this machine's device, default grid
    python -m attn.profiling.benchmark --device cpu --seqs 2048 4096 --head-dims 64 --causal-only

Writes `<out>/<hardware>/benchmark.json`, rows {variant, batch, heads, seq, head_dim, is_causal,
dtype, time_us (the median), low_us and high_us (its interquartile range), repeats, tflops, and:
- peaks: this machine's measured peaks, probed at the start of the run (attn.profiling.peaks);
- peak, peak_tflops: the peak of the row's dtype (fp32 FMA units, or bf16 units where the machine
  has them), and peak_share, the row's TFLOP/s as a share of it;
- mm_tflops, mm_peak_share: a square torch.mm in the dtype, timed in the same run, one more
  contender (the machine's own GEMM, not its limit), and its share of the same peak;
- on a CPU, cpu_capability (the vector ISA torch ran with), and on custom_cpu's rows `path`, how
  it multiplied its tiles ("amx", "avx512_bf16" or "fp32");
- on the rows of the custom kernels that train and of sdpa_flash, `backward` and `training_step`:
  the backward alone (autograd.grad on a kept graph) and forward plus backward, timed interleaved
  with each other's in the same run, each {time_us, low_us, high_us, repeats, calls} with
  ratio_to_flash, ratio_low, ratio_high and `verdict` ("faster", "slower" than sdpa_flash's, or
  "cannot tell" where the interval holds 1); the backward also with over_forward (÷ the row's own
  forward, with over_forward_low and over_forward_high) and peak_memory_bytes (its allocations
  beyond what was held before it, the profiler's count)}
`benchmark.svg`, and `peaks.svg` (each variant's and torch.mm's share of the peaks, drawn from
the rows by attn.traces.figures.peaks_figure, as `recheck` redraws it), and prints each custom variant's
time as a ratio of sdpa_flash's, with its interval, measured in the same run with interleaved
calls. A share above 1 is refused: nothing is written, since it means a probe or a FLOP count is
wrong. Rows from before the peaks carry
matmul_tflops and ceiling_share instead (that torch.mm called this machine's ceiling); they are
kept as they are. Speeds belong here, not in tests.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import DTYPES, ProfileConfig, check_fits
from attn.profiling.environment import device_name, hardware_slug, is_gpu
from attn.profiling.flags import ProfilingError, positive, seconds, variant_name, wide_console
from attn.profiling.memory import peak_memory
from attn.profiling.peaks import measure_peaks, peak_of
from attn.profiling.timing import measure, time_interleaved
from attn.traces.claims.roofline import attention_flops
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput, check_output
from attn.traces.common.intervals import below, ratio
from attn.traces.common.terminal import say
from attn.traces.figures import peaks_figure
from attn.traces.figures.plot import figure, plain_log_ticks, save

BASELINE = specs.BENCHMARK_BASELINE
GRID = {  # per device: what the benchmark times by default
    "cpu": dict(seqs=(512, 1024, 2048), batch=1, heads=8, dtypes=("float32", "bfloat16")),
    "cuda": dict(seqs=(1024, 2048, 4096, 8192, 16384), batch=4, heads=16, dtypes=("bfloat16",)),
}
# Variants that hold the [b, h, s, s] scores are skipped past this size of them.
SCORES_LIMIT_BYTES = 16 * 2**30


def significant(x: float, digits: int = 4) -> float:
    """x kept to a few significant digits: a small rate stays small instead of rounding to 0."""
    return float(f"{x:.{digits}g}")


MATMUL_N = {"cpu": 1024, "cuda": 8192}  # torch.mm's square: large enough to run at speed


def matmul_tflops(device: str, dtype: torch.dtype, budget_s: float = 2.0) -> float:
    """TFLOP/s of a square torch.mm in the dtype (oneDNN or MKL on a CPU, cuBLAS on a GPU): the
    machine's own GEMM, timed as one more contender."""
    n = MATMUL_N[torch.device(device).type]
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=dtype)
    timed = measure({"mm": lambda: torch.mm(a, b, out=out)}, budget_s=budget_s)["mm"]
    return 2 * n**3 / timed.median_us / 1e6


def share(tflops: float, peak: tuple[str, float] | None) -> float | None:
    """A rate as a share of a measured peak (None without one), kept to 3 significant digits."""
    return significant(tflops / peak[1], 3) if peak else None


def check_shares(rows: list[dict]) -> None:
    """Raise ProfilingError for a row whose rate is above its measured peak: nothing runs faster
    than its machine, so the peak's probe or the row's FLOP count is wrong."""
    for r in rows:
        for key, rate in (("peak_share", "tflops"), ("mm_peak_share", "mm_tflops")):
            if (r.get(key) or 0) > 1:
                raise ProfilingError(
                    f"{r['variant']}, {r.get('dtype')}, seq {r['seq']}, head_dim {r['head_dim']}: "
                    f"{r[rate]} TFLOP/s is {r[key]} times the measured {r.get('peak')} peak "
                    f"({r.get('peak_tflops')} TFLOP/s). No rate is above its machine's peak: the "
                    "peak's probe (attn.profiling.peaks) or the FLOP count (attention_flops) is "
                    "wrong. Nothing was written."
                )


def contender_rates(device: str, peaks: dict, dtype: str, console: Console) -> dict:
    """The fields every row of a dtype shares: the dtype's peak and torch.mm's rate against it."""
    peak = peak_of(peaks, dtype)
    if is_gpu(device) and dtype == "bfloat16" and peaks.get("bf16_tflops"):
        mm = peaks["bf16_tflops"]  # the GPU's peak is this very GEMM: timed once
    else:
        mm = matmul_tflops(device, DTYPES[dtype])
    console.print(
        f"{dtype}: peak {peak[1] if peak else '?'} TFLOP/s ({peak[0] if peak else 'none'}); "
        f"torch.mm {mm:.3g} TFLOP/s" + (f", {mm / peak[1]:.0%} of it" if peak else "")
    )
    return {
        "peak": peak[0] if peak else None, "peak_tflops": peak[1] if peak else None,
        "mm_tflops": significant(mm), "mm_peak_share": share(mm, peak), "peaks": peaks,
    }  # fmt: skip


def tile_products(variant, dtype: str, head_dim: int, seq: int) -> dict:
    """On the rows of a kernel that says how it multiplies its tiles (custom_cpu), that path."""
    says = getattr(variant, "tile_products", None)
    return {"path": says(DTYPES[dtype], head_dim, seq)} if says else {}


def config_of(device: str, seq: int, head_dim: int, dtype: str) -> ProfileConfig:
    """The inputs of one configuration: the device's grid's batch and heads."""
    grid = GRID[torch.device(device).type]
    return ProfileConfig(
        device=device, batch=grid["batch"], heads=grid["heads"], seq_q=seq, seq_k=seq,
        head_dim=head_dim, dtype=dtype,
    )  # fmt: skip


def run(
    device: str, seqs, head_dims, causals, dtypes, names, budget_s: float, console: Console
) -> list[dict]:
    # On a CPU, which vector ISA torch's kernels (and custom_cpu's softmax) ran with.
    isa = {} if is_gpu(device) else {"cpu_capability": torch.backends.cpu.get_cpu_capability()}
    peaks = measure_peaks(device)  # once, before any timing, in the run the shares are of
    console.print(f"measured peaks: {peaks}")
    rows = []
    for dtype in dtypes:
        shared = contender_rates(device, peaks, dtype, console)
        peak = (shared["peak"], shared["peak_tflops"]) if shared["peak"] else None
        for head_dim in head_dims:
            for is_causal in causals:
                for seq in seqs:
                    config = config_of(device, seq, head_dim, dtype)
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
                        contenders, q, k, v, is_causal=is_causal, budget_s=budget_s
                    )
                    training = time_training(
                        contenders, q, k, v, is_causal=is_causal, budget_s=budget_s,
                        console=console,
                    )  # fmt: skip
                    flops = attention_flops(config.batch, config.heads, seq, head_dim, is_causal)
                    for name, t in times.items():
                        tflops = flops / t.median_us / 1e6
                        row = t.row()
                        rows.append({
                            "variant": name, "batch": config.batch, "heads": config.heads,
                            "seq": seq, "head_dim": head_dim, "is_causal": is_causal,
                            "dtype": dtype, "time_us": row.pop("median_us"), **row,
                            "tflops": significant(tflops), "peak_share": share(tflops, peak),
                            **shared, **isa,
                            **tile_products(contenders[name], dtype, head_dim, seq),
                            **training.get(name, {}),
                        })  # fmt: skip
                    del q, k, v
    return rows


# ---- the backward ------------------------------------------------------------------------------
TRAINING_KEYS = ("backward", "training_step")  # the fields of a row that trains


def trains(name: str) -> bool:
    """Whether the benchmark times a variant's backward: the baseline and the custom kernels."""
    return name == BASELINE or bool(specs.spec(name) and specs.spec(name).ratio)


def training_calls(variants: dict, q, k, v, *, is_causal: bool) -> tuple[dict, dict]:
    """Per variant, a forward plus backward and a backward alone (on a graph built once and kept,
    retain_graph), on leaves of q, k, v, with the same gradient of the output for all."""
    grad_out = torch.randn_like(q)
    steps, backwards = {}, {}
    for name, variant in variants.items():
        leaves = tuple(t.detach().clone().requires_grad_() for t in (q, k, v))
        with torch.enable_grad():
            out = variant.forward(*leaves, is_causal=is_causal)

        def step(variant=variant, leaves=leaves):
            with torch.enable_grad():  # measure() times under no_grad
                torch.autograd.grad(variant.forward(*leaves, is_causal=is_causal), leaves, grad_out)

        def backward(out=out, leaves=leaves):
            torch.autograd.grad(out, leaves, grad_out, retain_graph=True)

        steps[name], backwards[name] = step, backward
    return steps, backwards


def time_training(
    variants: dict, q, k, v, *, is_causal: bool, budget_s: float, console: Console
) -> dict[str, dict]:
    """{variant: {"backward": fields, "training_step": fields}} for the variants that train, all
    timed interleaved in one measure(); a variant whose backward raises (a kernel that refuses
    inputs that require grad) is said and left out."""
    trained = {name: variant for name, variant in variants.items() if trains(name)}
    if BASELINE not in trained or len(trained) < 2:
        return {}
    steps, backwards = training_calls(trained, q, k, v, is_causal=is_causal)
    calls = {**{f"{n} step": f for n, f in steps.items()},
             **{f"{n} backward": f for n, f in backwards.items()}}  # fmt: skip
    times = measure(
        calls, budget_s=budget_s,
        failed=lambda label, e: console.print(f"  {label} left out: {type(e).__name__}: {e}"),
    )  # fmt: skip
    found = {}
    for name in trained:
        if f"{name} step" not in times or f"{name} backward" not in times:
            continue
        peak = peak_memory(backwards[name], q.device)
        fields = {key: _fields(times[f"{name} {label}"]) for key, label in
                  (("backward", "backward"), ("training_step", "step"))}  # fmt: skip
        fields["backward"]["peak_memory_bytes"] = peak
        found[name] = fields
    return found


def _fields(t) -> dict:
    row = t.row()
    return {"time_us": row.pop("median_us"), **row}


def _verdict(low: float, high: float) -> str:
    """Against the baseline: "faster" where the whole interval is under 1, "slower" above it."""
    return {True: "faster", False: "slower", None: "cannot tell"}[below(low, high)]


def training_ratios(rows: list[dict]) -> list[dict]:
    """The rows, each one that trains with its backward and step over sdpa_flash's (same
    configuration, same run) and its backward over its own forward."""
    key = lambda r: (r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
    flash = {key(r): r for r in rows if r["variant"] == BASELINE and "backward" in r}
    found = []
    for r in rows:
        if "backward" not in r or key(r) not in flash:
            found.append(r)
            continue
        r = {**r}
        for field in TRAINING_KEYS:
            value, low, high = ratio(_timed(r[field]), _timed(flash[key(r)][field]))
            r[field] = {**r[field], "ratio_to_flash": round(value, 3), "ratio_low": round(low, 3),
                        "ratio_high": round(high, 3), "verdict": _verdict(low, high)}  # fmt: skip
        value, low, high = ratio(_timed(r["backward"]), _timed(r))
        r["backward"] = {**r["backward"], "over_forward": round(value, 3),
                         "over_forward_low": round(low, 3), "over_forward_high": round(high, 3)}  # fmt: skip
        found.append(r)
    return found


def _timed(row: dict) -> dict:
    """A benchmark row's time in the fields intervals reads (its median is `time_us`)."""
    return {"median_us": row["time_us"], "low_us": row.get("low_us", row["time_us"]),
            "high_us": row.get("high_us", row["time_us"]), "repeats": row.get("repeats", 1)}  # fmt: skip


def ratios(rows: list[dict]) -> list[dict]:
    """The row of each variant whose spec asks for a ratio, with its time over the baseline's
    (sdpa_flash's) for the same configuration: the ratio of the medians, `ratio_to_flash`, and the
    interval the two interquartile ranges allow, `ratio_low` to `ratio_high`."""
    key = lambda r: (r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
    flash = {key(r): r for r in rows if r["variant"] == BASELINE}
    found = []
    for r in rows:
        if not (specs.spec(r["variant"]) and specs.spec(r["variant"]).ratio) or key(r) not in flash:
            continue
        value, low, high = ratio(_timed(r), _timed(flash[key(r)]))
        found.append({**r, "ratio_to_flash": round(value, 3), "ratio_low": round(low, 3),
                      "ratio_high": round(high, 3)})  # fmt: skip
    return found


def with_ratios(rows: list[dict]) -> list[dict]:
    """All rows, the custom kernels' with their ratio to the baseline, so readers need no code."""
    key = lambda r: (r["variant"], r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
    found = {key(r): r for r in ratios(rows)}
    return training_ratios([found.get(key(r), r) for r in rows])


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


def merged(path: Path, rows: list[dict]) -> list[dict]:
    """The rows of an earlier benchmark.json whose configuration this run left out, then this
    run's: a run of a few rows replaced the whole committed file. A configuration's rows (and so
    each ratio) come from one run."""
    if not path.is_file():
        return rows
    try:
        before = json.loads(path.read_text())
        config = lambda r: (r["seq"], r["head_dim"], r["is_causal"], r.get("dtype"))  # noqa: E731
        ran = {config(r) for r in rows}
        kept = [r for r in before if config(r) not in ran]
    except (ValueError, TypeError, KeyError) as e:
        raise ProfilingError(f"{path} is not a benchmark's rows ({e}): move it away first") from e
    return kept + rows


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write benchmark.json and benchmark.svg into `<out>/<hardware>/`, each replaced atomically,
    keeping what an earlier run measured and this one did not."""
    check_shares(rows)  # before anything is written: an earlier file stays as it was
    threads = "" if is_gpu(device) else f" ({torch.get_num_threads()} CPU threads)"
    title = f"Forward time on {device_name(device)}{threads}"
    rows = with_ratios(merged(Path(out_root) / hardware_slug(device) / "benchmark.json", rows))
    folder = sweeps.write(out_root, device, "benchmark", rows, plot, title)
    peaks_figure.write(folder, rows)  # drawn from the rows alone: recheck redraws it the same
    return folder


def print_training(rows: list[dict]) -> None:
    """The backward's rows: time, ÷ sdpa_flash's, ÷ the forward, peak, each with its interval."""
    trained = [r for r in rows if "over_forward" in r.get("backward", {})]
    if not trained:
        return
    table = Table("variant", "dtype", "seq", "head_dim", "causal", "backward ms (IQR)",
                  f"÷ {BASELINE}", "÷ forward", "peak MiB", "step ÷ flash")  # fmt: skip
    for r in trained:
        b, s = r["backward"], r["training_step"]
        table.add_row(
            r["variant"], r["dtype"], str(r["seq"]), str(r["head_dim"]), str(r["is_causal"]),
            f"{b['time_us'] / 1000:.2f} ({b['low_us'] / 1000:.2f}–{b['high_us'] / 1000:.2f})",
            f"{b['ratio_to_flash']:.2f} ({b['ratio_low']:.2f}–{b['ratio_high']:.2f})",
            f"{b['over_forward']:.2f} ({b['over_forward_low']:.2f}–{b['over_forward_high']:.2f})",
            f"{b['peak_memory_bytes'] / 2**20:.1f}",
            f"{s['ratio_to_flash']:.2f} ({s['ratio_low']:.2f}–{s['ratio_high']:.2f})",
        )  # fmt: skip
    wide_console(stderr=False).print(table)


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
    parser.add_argument(
        "--budget", type=seconds, default=None,
        help="seconds of timing per shape (default: 1 on a CPU, 3 on a GPU)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    kind = torch.device(args.device).type
    console = wide_console()
    budget = args.budget or (1.0 if kind == "cpu" else 3.0)
    causals = (True,) if args.causal_only else (True, False)
    names = args.variants or specs.in_sweep("benchmark")
    seqs, dtypes = args.seqs or GRID[kind]["seqs"], args.dtypes or GRID[kind]["dtypes"]
    benchmark_json = Path(args.out) / hardware_slug(args.device) / "benchmark.json"
    try:  # an earlier file that cannot be kept, a shape that cannot fit: said before the timing
        artifacts.check_figure(benchmark_json.parent, "benchmark")
        check_output(benchmark_json.parent / peaks_figure.FILE)
        merged(benchmark_json, [])
        for dtype, head_dim, seq in itertools.product(dtypes, args.head_dims, seqs):
            check_fits(config_of(args.device, seq, head_dim, dtype), "--seqs or --head-dims")
    except (ProfilingError, RefusedOutput) as e:
        say(f"error: {e}", err=True)
        return 1
    grid = (seqs, args.head_dims, causals, dtypes, names, budget, console)
    rows = sweeps.stamped(lambda: run(args.device, *grid))
    if not rows:  # the previous benchmark.json stays as it was
        print(f"error: none of {', '.join(names)} runs on {args.device} here", file=sys.stderr)
        return 1
    try:
        folder = write(args.out, args.device, rows)
    except ProfilingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    # TFLOP/s are in benchmark.json.
    table = Table(
        "variant", "dtype", "seq", "head_dim", "causal", "ms (IQR)", f"÷ {BASELINE}", "× peak"
    )
    for r in ratios(rows):
        shape = (r["dtype"], str(r["seq"]), str(r["head_dim"]), str(r["is_causal"]))
        ms = f"{r['time_us'] / 1000:.2f} ({r['low_us'] / 1000:.2f}–{r['high_us'] / 1000:.2f})"
        spread = f"{r['ratio_to_flash']:.2f} ({r['ratio_low']:.2f}–{r['ratio_high']:.2f})"
        of_peak = "?" if r.get("peak_share") is None else f"{r['peak_share']:.3f}"
        table.add_row(r["variant"], *shape, ms, spread, of_peak)
    wide_console(stderr=False).print(table)
    print_training(with_ratios(rows))
    written = "benchmark.json, benchmark.svg and peaks.svg"
    print(f"benchmark: {len(rows)} rows written to {folder}/: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
