"""What bounds a decode step: bytes of K and V read per step against this machine's own ceilings.

python -m attn.profiling.decoding --out profiles [--device cpu] [--lengths ...] [--batches ...]

One new token per sequence (seq_q = 1) attends to a KV cache of length L with grouped-query
attention (32 query heads, 8 KV heads, head_dim 64). Each way of computing it is timed side by side
with the others, and in the same run the machine's ceilings are measured: a large tensor copy
(memory bandwidth) and the compute peak of the dtype (attn.profiling.peaks: FMA chains, AMX or
AVX512-BF16 on a CPU, a cuBLAS GEMM on a GPU). Achieved bandwidth is the bytes of K and V a step
must read, divided by its time; it is reported as a fraction of the copy ceiling, never as an
absolute claim. A cache of length 1 gives each way's fixed cost (dispatch on CPU, launches on a
GPU): where that is most of a step, overhead, not memory, bounds it.

Writes `<out>/<hardware>/decoding.json` (rows) and `decoding.svg`, each replaced atomically. Sets
written before the peaks were measured have a `matmul` row instead of `compute` (a large torch.mm,
timed: one contender, not the machine's limit); they are read as they are.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

import attn
from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import (
    DECODE_HEAD_DIM,
    DECODE_HEADS,
    DECODE_KV_HEADS,
    DTYPES,
    ProfileConfig,
)
from attn.profiling.environment import device_name, is_gpu
from attn.profiling.flags import positive
from attn.profiling.peaks import measure_peaks, peak_of
from attn.profiling.timing import measure
from attn.sdpa import BACKENDS

STEM = "decoding"
LENGTHS = {
    "cpu": (16, 64, 256, 1024, 4096, 16384, 32768),
    "cuda": (64, 256, 1024, 4096, 16384, 65536),
}
BATCHES = {"cpu": (1, 4), "cuda": (1, 8)}
PROBE_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}  # well past the last-level cache
CELL_SECONDS = 0.25  # time spent on each way at each (batch, L), unless the median is known sooner
SLOW_SECONDS = 0.3  # a way whose step took longer than this is not run at longer caches


# --- the ways to compute a decode step -------------------------------------------------------------

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def groups_as_rows(variant: attn.Variant) -> Step:
    """A one-token step through a kernel that needs equal heads: each KV head's query heads become
    the rows of one query block, [b, kv_heads, groups, d], so each KV head is one problem."""

    def step(q, k, v):
        # --8<-- [start:groups_as_rows]
        b, q_heads, _, d = q.shape  # one new token: q is [b, q_heads, 1, d]
        kv_heads = k.shape[1]
        rows = q.reshape(b, kv_heads, q_heads // kv_heads, d)  # a view: heads of a group as rows
        out = variant.forward(rows, k, v, is_causal=False)  # rows are not positions: no mask
        return out.reshape(b, q_heads, 1, d)
        # --8<-- [end:groups_as_rows]

    return step


def expanded(variant: attn.Variant) -> Step:
    """K and V expanded to the query heads with stride 0 (no copy): batch and KV heads are merged
    into one batch dimension, so that the heads of a group share one K and one V."""

    def step(q, k, v):
        # --8<-- [start:expanded]
        b, q_heads, s, d = q.shape
        kv_heads, L = k.shape[1], k.shape[2]
        g = q_heads // kv_heads
        # [b * kv_heads, g, L, d] with stride 0 over g: every head of a group points at one K.
        k = k.reshape(b * kv_heads, 1, L, d).expand(b * kv_heads, g, L, d)
        v = v.reshape(b * kv_heads, 1, L, d).expand(b * kv_heads, g, L, d)
        out = variant.forward(q.reshape(b * kv_heads, g, s, d), k, v, is_causal=False)
        return out.reshape(b, q_heads, s, d)
        # --8<-- [end:expanded]

    return step


def pinned_gqa(backend: str) -> Step:
    def step(q, k, v):
        with sdpa_kernel(BACKENDS[backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return step


def whole_step(variant: attn.Variant) -> Step:
    return lambda q, k, v: variant.forward(q, k, v, is_causal=False)


def implementations(device: str, dtype: torch.dtype) -> dict[str, Step]:
    """Every way that runs here on a tiny GQA step, by label; each checked against the last of the
    decoding variants (SDPA with enable_gqa)."""
    found = {name: whole_step(attn.get_variant(name)) for name in specs.in_sweep("decoding")}
    reference = list(found.values())[-1]
    backends = ["math"] if not is_gpu(device) else ["flash", "efficient", "cudnn", "math"]
    for name in backends:
        found[f"SDPA enable_gqa, {name} only"] = pinned_gqa(name)
    for name in specs.in_sweep("benchmark"):
        spec, variant = specs.spec(name), attn.get_variant(name)
        if spec.ratio and variant.why_unavailable(device, dtype) is None:
            found[f"{name}, groups as rows"] = groups_as_rows(variant)
            found[f"{name}, K/V expanded (stride 0)"] = expanded(variant)
    q, k, v = make_step(device, dtype, batch=1, cache_len=16, heads=4, kv_heads=2, head_dim=64)
    usable = {}
    # torch warns why each rejected backend cannot run; the ways that fail are simply left out.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = reference(q, k, v).float()
        for label, step in found.items():
            try:
                out = step(q, k, v)
            except (RuntimeError, ValueError):
                continue  # this backend or kernel does not take the shape here
            if torch.allclose(out.float(), expected, atol=2e-2, rtol=2e-2):
                usable[label] = step
    return usable


def make_step(
    device: str,
    dtype: torch.dtype,
    *,
    batch: int,
    cache_len: int,
    heads: int = DECODE_HEADS,
    kv_heads: int = DECODE_KV_HEADS,
    head_dim: int = DECODE_HEAD_DIM,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q [batch, heads, 1, d] and the cache k, v [batch, kv_heads, cache_len, d], seeded."""
    dtype_name = str(dtype).removeprefix("torch.")
    return ProfileConfig(
        device=device, batch=batch, heads=heads, seq_q=1, seq_k=cache_len, head_dim=head_dim,
        dtype=dtype_name, is_causal=False, kv_heads=kv_heads,
    ).make_inputs()  # fmt: skip


# --- timing ------------------------------------------------------------------------------------------


def timed(calls: dict[str, Callable[[], object]], device: str, budget_s: float) -> dict[str, dict]:
    """Each call timed interleaved (timing.measure): {label: {time_s, low_s, high_s, n}}, the
    median and its interquartile range, over n timed blocks."""
    return {
        label: {
            "time_s": t.median_us / 1e6,
            "low_s": t.low_us / 1e6,
            "high_s": t.high_us / 1e6,
            "n": t.repeats,
        }  # fmt: skip
        for label, t in measure(calls, budget_s=budget_s * len(calls)).items()
    }


def bandwidth_probe(device: str, nbytes: int, dtype: torch.dtype = torch.float32) -> dict:
    """A copy of a tensor of `nbytes`: bytes read plus bytes written, per second."""
    src = torch.ones(max(nbytes // _size(dtype), 1), device=device, dtype=dtype)
    dst = torch.empty_like(src)
    copy = timed({"copy": lambda: dst.copy_(src)}, device, 0.3)["copy"]
    moved = 2 * src.nbytes
    rate = moved / copy["time_s"] / 1e9
    return {"kind": "ceiling", "name": "copy", "bytes": moved, **_times(copy), "gb_per_s": rate}


def read_probe(device: str, nbytes: int, name: str = "read") -> dict:
    """A sum over a float32 tensor of `nbytes`: bytes read per second (a probe, not a ceiling).

    Beside the copy it tells whether reading alone is faster; run at a cache-sized tensor, how much
    faster a step is whose K and V stay in the CPU's caches from one step to the next.
    """
    src = torch.ones(max(nbytes // 4, 1), device=device)
    read = timed({name: lambda: src.sum()}, device, 0.3)[name]
    rate = src.nbytes / read["time_s"] / 1e9
    return {"kind": "probe", "name": name, "bytes": src.nbytes, **_times(read), "gb_per_s": rate}


def compute_ceiling(peaks: dict, dtype: torch.dtype) -> dict:
    """The compute roof: the measured peak of the dtype (attn.profiling.peaks), in GFLOP/s."""
    dtype_name = str(dtype).removeprefix("torch.")
    peak = peak_of(peaks, dtype_name)
    if peak is None:
        raise ValueError(f"no compute peak was measured for {dtype_name}: {peaks}")
    return {"kind": "ceiling", "name": "compute", "peak": peak[0], "gflop_per_s": peak[1] * 1e3,
            "peaks": peaks}  # fmt: skip


def _size(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def _times(result: dict) -> dict:
    """time_us: the median; low_us to high_us: its interquartile range."""
    return {"time_us": result["time_s"] * 1e6, "low_us": result["low_s"] * 1e6,
            "high_us": result["high_s"] * 1e6, "repeats": result["n"]}  # fmt: skip


# --- the sweep ---------------------------------------------------------------------------------------


def sweep(
    device: str,
    lengths: tuple[int, ...],
    batches: tuple[int, ...],
    *,
    dtype: torch.dtype | None = None,
    heads: int = DECODE_HEADS,
    kv_heads: int = DECODE_KV_HEADS,
    head_dim: int = DECODE_HEAD_DIM,
    probe_bytes: int | None = None,
    peaks: dict | None = None,
    budget_s: float = CELL_SECONDS,
    threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Ceilings, then every way at each (batch, L) and at L = 1; the copy measured again at the end.

    Rows: ceilings {kind: ceiling, name: copy, ...} (the better of the two measurements) and
    {kind: ceiling, name: compute, peak, gflop_per_s, peaks} (`peaks` as given, else measured
    first: attn.profiling.peaks),
    probes {kind: probe, name: read|read_small, ratio_to_copy, ...} (a sum over the copy's size and
    over a cache-sized tensor: reading alone, from memory and from cache) and
    steps {kind: step, impl, batch, cache_len, time_us, kv_bytes, flops, intensity, gb_per_s,
    gflop_per_s, bandwidth_ratio, compute_ratio, overhead_us, overhead_share}.
    """
    kind = "cuda" if is_gpu(device) else "cpu"
    dtype = dtype or (torch.bfloat16 if kind == "cuda" else torch.float32)
    probe_bytes = probe_bytes or PROBE_BYTES[kind]
    say = progress or (lambda _: None)
    if heads % kv_heads:
        raise ValueError(f"heads {heads} is not a multiple of kv_heads {kv_heads}")

    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        peaks = peaks or measure_peaks(device)  # on the threads the steps run on
        return _sweep(device, lengths, batches, dtype, heads, kv_heads, head_dim, probe_bytes,
                      compute_ceiling(peaks, dtype), budget_s, say)  # fmt: skip
    finally:
        torch.set_num_threads(before)


def _sweep(
    device, lengths, batches, dtype, heads, kv_heads, head_dim, probe_bytes, compute, budget_s, say
) -> list[dict]:
    say("ceilings")
    small = max(probe_bytes // 64, 2**16)  # fits in a CPU's last-level cache
    first = _measure_ceilings(device, probe_bytes, small)
    ways = implementations(device, dtype)
    rows: list[dict] = []
    for batch in batches:
        rows += _batch_steps(device, ways, batch, lengths, dtype, heads, kv_heads, head_dim,
                             budget_s, say)  # fmt: skip
    say("ceilings again")
    again = _measure_ceilings(device, probe_bytes, small)
    copy, probes = _best_ceilings(first, again)
    for r in (copy, compute, *probes, *rows):
        r["threads"] = torch.get_num_threads()
    for r in rows:
        r["bandwidth_ratio"] = r["gb_per_s"] / copy["gb_per_s"]
        r["compute_ratio"] = r["gflop_per_s"] / compute["gflop_per_s"]
    return [copy, compute, *probes, *rows]


def _measure_ceilings(device: str, probe_bytes: int, small: int) -> tuple[dict, list[dict]]:
    """One measurement of the copy ceiling and of the two read probes, in that order."""
    copy = bandwidth_probe(device, probe_bytes)
    reads = [read_probe(device, probe_bytes), read_probe(device, small, "read_small")]
    return copy, reads


def _best_ceilings(*measured: tuple[dict, list[dict]]) -> tuple[dict, list[dict]]:
    """The best copy and read probes of several measurements, with the copy's samples and each
    probe's ratio to the copy."""
    copies = [copy for copy, _ in measured]
    reads = [r for _, probes in measured for r in probes]
    probes = [
        max((r for r in reads if r["name"] == name), key=lambda r: r["gb_per_s"])
        for name in ("read", "read_small")
    ]
    copy = max(copies, key=lambda r: r["gb_per_s"])
    copy["samples_gb_per_s"] = [r["gb_per_s"] for r in copies]
    for r in probes:
        r["ratio_to_copy"] = r["gb_per_s"] / copy["gb_per_s"]
    return copy, probes


def _batch_steps(
    device, ways, batch, lengths, dtype, heads, kv_heads, head_dim, budget_s, say
) -> list[dict]:
    """Step rows of one batch size: every way at each cache length, its L = 1 time as overhead; a
    way slower than SLOW_SECONDS is not run at longer caches."""
    es = _size(dtype)
    rows: list[dict] = []
    floor = {}
    slow: set[str] = set()
    for cache_len in (1, *lengths):
        say(f"batch {batch}, cache {cache_len}")
        q, k, v = make_step(device, dtype, batch=batch, cache_len=cache_len, heads=heads,
                            kv_heads=kv_heads, head_dim=head_dim)  # fmt: skip
        run = {label: ways[label] for label in ways if label not in slow}
        results = timed(
            {label: (lambda s=step, qkv=(q, k, v): s(*qkv)) for label, step in run.items()},
            device,
            budget_s,
        )
        kv_bytes = 2 * batch * kv_heads * cache_len * head_dim * es
        flops = 4 * batch * heads * cache_len * head_dim  # q.k and p.v, 2 per multiply-add
        for label, t in results.items():
            if cache_len == 1:
                floor[label] = t["time_s"]
                continue
            if t["time_s"] > SLOW_SECONDS:
                slow.add(label)
            rows.append({
                "kind": "step", "impl": label, "batch": batch, "cache_len": cache_len,
                "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
                "dtype": str(dtype).removeprefix("torch."), **_times(t),
                "kv_bytes": kv_bytes, "flops": flops, "intensity": flops / kv_bytes,
                "gb_per_s": kv_bytes / t["time_s"] / 1e9,
                "gflop_per_s": flops / t["time_s"] / 1e9,
                "overhead_us": floor[label] * 1e6,
                "overhead_share": min(floor[label] / t["time_s"], 1.0),
            })  # fmt: skip
        del q, k, v
    return rows


def ceilings(rows: list[dict]) -> tuple[dict, dict]:
    """The copy ceiling row and the compute one: the measured peak, or in a set written before the
    peaks, its `matmul` row (a torch.mm timed in that run)."""
    by_name = {r["name"]: r for r in rows if r["kind"] == "ceiling"}
    return by_name["copy"], by_name.get("compute") or by_name["matmul"]


def compute_label(row: dict) -> str:
    """What the compute roof is, in words: the measured peak, or an old set's torch.mm."""
    if row["name"] == "matmul":
        return "torch.mm (timed, not a peak)"
    return f"{str(row.get('peak', 'compute')).replace('_', ' ').replace('fma', 'FMA')} peak"


# --- the picture ------------------------------------------------------------------------------------

COLORS = ["#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]
MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*"]


def draw(rows: list[dict], title: str, path: Path) -> None:
    """Left: a roofline (intensity against FLOP/s) with the measured ceilings; right: achieved
    bandwidth as a fraction of the copy ceiling against cache length, the overhead-bound steps
    marked. 7.2 in wide, no font under 8.5 pt."""
    from attn.traces.figures.plot import figure, save

    copy, compute = ceilings(rows)
    steps = [r for r in rows if r["kind"] == "step"]
    impls = list(dict.fromkeys(r["impl"] for r in steps))
    style = {
        name: (COLORS[i % len(COLORS)], MARKERS[i % len(MARKERS)]) for i, name in enumerate(impls)
    }
    big = max((r["batch"] for r in steps), default=1)
    small = min((r["batch"] for r in steps), default=1)

    fig, (ax_r, ax_b) = figure(4.1, font_pt=9, ncols=2, gridspec_kw={"wspace": 0.32})
    x_lo, x_hi = _draw_roofs(ax_r, steps, copy["gb_per_s"], compute)
    _draw_roofline_steps(ax_r, steps, impls, style, big)
    _label_roofline(ax_r, x_lo, x_hi, big)
    _draw_bandwidth_steps(ax_b, steps, impls, style, big, small)
    _draw_bandwidth_ceilings(ax_b, rows, sorted({r["cache_len"] for r in steps}))
    _label_bandwidth(ax_b, big, small)
    _plain_ticks(ax_r, ax_b)
    _legend(fig, ax_b, title)
    save(fig, path)


def _draw_roofs(ax, steps: list[dict], bw: float, compute: dict) -> tuple[float, float]:
    """The memory roof bw * x and the compute roof, both measured here, their ridge and values;
    returns the x range (intensity) the panel shows."""
    peak = compute["gflop_per_s"]
    xs = [r["intensity"] for r in steps] or [1.0]
    x_lo, x_hi = min(xs) / 8, max(max(xs) * 8, 2 * peak / bw)
    grid = [x_lo * (x_hi / x_lo) ** (i / 100) for i in range(101)]
    ax.plot(grid, [min(bw * x, peak) for x in grid], color="black", lw=1.2)
    ridge = peak / bw  # FLOP per byte where the two roofs meet
    ax.axvline(ridge, color="#777777", lw=0.8, ls=":")
    ax.text(ridge, peak / 30, f" ridge\n {ridge:.3g}", fontsize=8.5, va="top")
    roofs = (
        f"roofs measured in this run:\ncopy {bw:.3g} GB/s\n"
        f"{compute_label(compute)} {peak:.3g} GFLOP/s"
    )
    ax.text(0.03, 0.97, roofs, transform=ax.transAxes, ha="left", va="top", fontsize=8.5)
    return x_lo, x_hi


def _draw_roofline_steps(ax, steps: list[dict], impls: list[str], style: dict, big: int) -> None:
    """Each way's steps at the largest batch on the roofline, the longest cache filled."""
    for i, name in enumerate(impls):
        color, marker = style[name]
        mine = [r for r in steps if r["impl"] == name and r["batch"] == big]
        # Spread the ways sideways a little: they share one intensity.
        shift = 1.0 + 0.09 * (i - (len(impls) - 1) / 2)
        longest = max((r["cache_len"] for r in mine), default=0)
        for r in mine:
            filled = r["cache_len"] == longest
            ax.scatter(r["intensity"] * shift, r["gflop_per_s"], s=22, marker=marker,
                       color=color if filled else "none", edgecolors=color, linewidths=0.9,
                       zorder=3)  # fmt: skip


def _label_roofline(ax, x_lo: float, x_hi: float, big: int) -> None:
    """The roofline panel's log scales, axis labels, title and grid."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of K and V)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"Roofline, batch {big}: filled = longest cache run", loc="left", fontsize=9.5)
    ax.grid(True, which="major", lw=0.3, alpha=0.5)


def _draw_bandwidth_steps(
    ax, steps: list[dict], impls: list[str], style: dict, big: int, small: int
) -> None:
    """Each way's achieved bandwidth / copy ceiling against cache length, one line per batch
    size, the overhead-bound steps ringed."""
    for name in impls:
        color, marker = style[name]
        for batch, ls in ((big, "-"), (small, ":")) if big != small else ((big, "-"),):
            mine = sorted(
                (r for r in steps if r["impl"] == name and r["batch"] == batch),
                key=lambda r: r["cache_len"],
            )
            if not mine:
                continue
            xs, ratios = [r["cache_len"] for r in mine], [r["bandwidth_ratio"] for r in mine]
            ax.plot(xs, ratios, ls=ls, marker=marker, ms=4, color=color, lw=1.1,
                    label=name if batch == big else None)  # fmt: skip
            ringed = [r for r in mine if r["overhead_share"] >= 0.5]  # one key: half the step
            ax.scatter([r["cache_len"] for r in ringed], [r["bandwidth_ratio"] for r in ringed],
                       s=70, marker="o", facecolors="none", edgecolors="#999999", lw=0.8,
                       zorder=1)  # fmt: skip


def _draw_bandwidth_ceilings(ax, rows: list[dict], lengths: list[int]) -> None:
    """The copy ceiling at 1, and each read probe's ratio to it: what a step could reach."""
    ax.axhline(1.0, color="black", lw=1.0)
    ax.annotate("copy ceiling", (lengths[-1] if lengths else 1, 1.0), xytext=(0, -11),
                ha="right", textcoords="offset points", fontsize=8.5)  # fmt: skip
    for r in (r for r in rows if r["kind"] == "probe"):
        # Reading alone, from memory and from a cache-sized tensor: what a step could reach.
        ax.axhline(r["ratio_to_copy"], color="#555555", lw=0.9, ls="--")
        ax.annotate(f"sum of {r['bytes'] / 2**20:g} MiB", (lengths[0] if lengths else 1,
                    r["ratio_to_copy"]), xytext=(0, 2), textcoords="offset points",
                    fontsize=8.5, color="#555555")  # fmt: skip


def _label_bandwidth(ax, big: int, small: int) -> None:
    """The bandwidth panel's log scales, axis labels, title and grid."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("cache length L (keys)")
    ax.set_ylabel("bytes of K, V per second ÷ copy ceiling")
    dotted = f"; dotted: batch {small}" if big != small else ""
    ax.set_title(f"Bandwidth, solid: batch {big}{dotted}", loc="left", fontsize=9.5)
    ax.grid(True, which="major", lw=0.3, alpha=0.5)


def _plain_ticks(ax_r, ax_b) -> None:
    """Plain tick labels, cache lengths as 1k, 32k: mathtext exponents (10^-2) would print below
    the 8.5 pt minimum."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    for axis in (ax_r.xaxis, ax_r.yaxis, ax_b.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax_b.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _keys(x)))


def _legend(fig, ax_b, title: str) -> None:
    """The ways and the ring below both panels, the title above, and room made for both."""
    from matplotlib.lines import Line2D

    handles, labels = ax_b.get_legend_handles_labels()
    ring = Line2D([], [], marker="o", ls="", mfc="none", mec="#999999", ms=8)
    labels.append("overhead ≥ half the step (ringed)")
    fig.legend(handles + [ring], labels, loc="lower center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, 0.0), fontsize=8.5)  # fmt: skip
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    rows_of_legend = math.ceil(len(labels) / 2)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.86, bottom=0.2 + 0.045 * rows_of_legend)


def _keys(n: float) -> str:
    """64, 1k, 32k: cache lengths as tick labels."""
    return f"{n / 1024:g}k" if n >= 1024 else f"{n:g}"


def write(out_root: Path, device: str, rows: list[dict]) -> Path:
    """Write decoding.json and decoding.svg into `<out>/<hardware>/`, each replaced atomically."""
    step = next((r for r in rows if r["kind"] == "step"), None)
    shape = (
        f"{step['heads']} query / {step['kv_heads']} KV heads, d {step['head_dim']}, {step['dtype']}"
        if step
        else ""
    )
    if step and not is_gpu(device):
        shape += f", {step['threads']} thread{'s' if step['threads'] > 1 else ''}"
    title = f"One decode step on {device_name(device)} ({shape})"
    return sweeps.write(out_root, device, STEM, rows, draw, title)


def summary_lines(rows: list[dict]) -> list[str]:
    """Plain lines: the ceilings, then each way's bandwidth ratio per length, overhead flagged."""
    copy, compute = ceilings(rows)
    lines = [
        f"copy ceiling {copy['gb_per_s']:.2f} GB/s (samples {', '.join(f'{x:.2f}' for x in copy['samples_gb_per_s'])}); "
        f"{compute_label(compute)} {compute['gflop_per_s']:.1f} GFLOP/s"
    ]
    for r in (r for r in rows if r["kind"] == "probe"):
        lines.append(
            f"{r['name']} probe ({r['bytes'] / 2**20:g} MiB): {r['gb_per_s']:.2f} GB/s "
            f"= {r['ratio_to_copy']:.2f} x copy"
        )
    for r in (r for r in rows if r["kind"] == "step"):
        flag = "  overhead-bound" if r["overhead_share"] >= 0.5 else ""
        lines.append(
            f"{r['impl']:<40} b={r['batch']} L={r['cache_len']:>6}: {r['time_us']:>10.1f} µs, "
            f"{r['gb_per_s']:6.2f} GB/s = {r['bandwidth_ratio']:.2f} x copy; "
            f"L=1 costs {r['overhead_share']:.0%}{flag}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = sweeps.parser("attn.profiling.decoding", __doc__)
    parser.add_argument(
        "--lengths", type=positive, nargs="+", help="cache lengths (default: per device)"
    )
    parser.add_argument(
        "--batches", type=positive, nargs="+", help="batch sizes (default: per device)"
    )
    parser.add_argument(
        "--dtype", choices=sorted(DTYPES), help="default: float32 CPU, bfloat16 GPU"
    )
    parser.add_argument(
        "--threads", type=positive, help="CPU threads for every measurement (default: torch's)"
    )
    args = parser.parse_args(argv)
    kind = "cuda" if is_gpu(args.device) else "cpu"
    rows = sweeps.stamped(
        lambda: sweep(
            args.device,
            tuple(args.lengths or LENGTHS[kind]),
            tuple(args.batches or BATCHES[kind]),
            dtype=DTYPES[args.dtype] if args.dtype else None,
            threads=args.threads,
            progress=lambda text: print(f"decoding: {text}", file=sys.stderr, flush=True),
        )
    )
    folder = write(args.out, args.device, rows)
    print("\n".join(summary_lines(rows)))
    print(f"decoding: {len(rows)} rows written to {folder}/{STEM}.json and {STEM}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
