"""The benchmark's and the decoding sweep's rows as the Markdown tables the site shows under their
figures, and the table pieces the docs hook's other tables share: a row, a head, a time with its
spread, a ratio with its range.

Every name read from a row shows as text (attn.traces.common.markdown); a row of the wrong shape raises
KeyError, TypeError or ValueError, which the docs hook reports naming the file.
"""

from __future__ import annotations

from attn.traces.claims.benchmark_checks import counts, ratio_verdict
from attn.traces.common import intervals
from attn.traces.common import markdown as md
from attn.traces.common.busy import how_busy
from attn.traces.common.units import bytes_text, time_text

# --- pieces of a table ----------------------------------------------------------------------------


def table_row(cells: list) -> str:
    """A table row; None, a number not measured, shows as a dash."""
    return "| " + " | ".join("–" if c is None else str(c) for c in cells) + " |"


def table_head(cells: list[str], text_columns: int = 1) -> list[str]:
    """A table's head and its rule: the first columns left-aligned text, the rest numbers."""
    rule = "|" + "---|" * text_columns + "--:|" * (len(cells) - text_columns)
    return [table_row(cells), rule]


def timed_cell(t: dict | None) -> str | None:
    """A timed row in a table cell: the median, its interquartile range small beneath it."""
    if t is None:
        return None
    return f"{time_text(t['median_us'])}<br><small>{time_text(t['low_us'])}–{time_text(t['high_us'])}</small>"


def profiled_cell(t: dict | None) -> str | None:
    """A profiled time (intervals.profiled) in a table cell: its mean, the range of its steps small
    beneath it, or 'no spread in this set' where the summary kept no ranges."""
    if t is None or t.get("spread"):
        return timed_cell(t)
    return f"{time_text(t['median_us'])}<br><small>{intervals.NO_SPREAD}</small>"


def ratio_cell(
    value: float, low: float, high: float, verdict: bool | None = True, words: dict | None = None
) -> str:
    """A ratio in a table cell: its value, its range small beneath, and what the range says: in
    `words` (a verdict -> a word) where given, else 'cannot tell' where the verdict is None."""
    said = words[verdict] if words else "cannot tell" if verdict is None else ""
    return f"{value:.2f}×<br><small>{low:.2f}–{high:.2f}×{', ' if said else ''}{said}</small>"


# --- benchmark.json -------------------------------------------------------------------------------


def benchmark_table(rows: list[dict], baseline: str) -> str:
    """On a CPU, the vector ISA the run used; the machine's measured peaks; then each custom
    kernel's time as a multiple of the baseline's, and its FLOP/s as a share of its dtype's peak,
    measured in the same run."""
    mine = [r for r in rows if "ratio_to_flash" in r]
    isas = sorted({md.text(r["cpu_capability"]) for r in rows if r.get("cpu_capability")})
    shares = any("peak_share" in r for r in mine)
    lines = [*isa_lines(isas, mine), *peak_lines(rows), *sizes_lines(mine)]
    share = ["share of peak"] if shares else []
    lines += verdict_lines(mine, baseline)
    lines += table_head(["variant", "dtype, seq × head_dim", "time", f"÷ {baseline}", *share])
    lines += [benchmark_row(r, shares) for r in mine]
    return "\n".join([*lines, *backward_lines(rows, baseline)])


FASTER = {True: "faster", False: "slower", None: "cannot tell"}  # a ratio's verdict, in words


def verdict_lines(mine: list[dict], baseline: str) -> list[str]:
    """Each kernel against the baseline, shape by shape: how many shapes were faster, slower or
    could not tell (a ratio whose range holds 1×); none for rows without ranges."""
    timed = [r for r in mine if "ratio_low" in r]
    if not timed:
        return []
    lines = []
    for name in dict.fromkeys(r["variant"] for r in timed):
        rows = [r for r in timed if r["variant"] == name]
        grid = [(ratio_verdict(r), shape_text(r)) for r in rows]
        lines.append(
            f"- {md.code(name)} against {md.code(baseline)}: {md.text(counts(grid, FASTER))}."
        )
    return [*lines, ""]


def shape_text(r: dict) -> str:
    """One row's shape, as the table's second column says it, on one line."""
    masking = "causal" if r["is_causal"] else "full"
    return f"{r.get('dtype', '?')} {int(r['seq'])} × {int(r['head_dim'])}, {masking}"


def isa_lines(isas: list[str], mine: list[dict]) -> list[str]:
    """A CPU run's vector ISA (GPU runs, and CPU runs made before it was recorded, have none)."""
    if not isas:
        return []
    ours = ", ".join(md.code(n) for n in dict.fromkeys(r["variant"] for r in mine))
    return [
        f"Vector ISA of this run: {', '.join(isas)} (`torch.backends.cpu.get_cpu_capability()`)."
        f" Torch's CPU kernels ran that ISA's code, and so did {ours or 'our kernel'}: it"
        " carries a copy of its vector code per ISA and runs the one torch runs.",
        "",
    ]


def peak_lines(rows: list[dict]) -> list[str]:
    """The peaks the run measured, torch.mm's share of them, and custom_cpu's bf16 path; a set
    benchmarked before peaks were measured says why it shows no share."""
    peaks = next((r["peaks"] for r in rows if isinstance(r.get("peaks"), dict)), None)
    if peaks is None:
        if not any(r.get("matmul_tflops") for r in rows):
            return []
        return [
            "This set was benchmarked before the peaks were measured: the large `torch.mm` it "
            "timed is no limit of the machine (one of our kernels ran faster than it), so its "
            "rates are shown as no share. Profile again for shares of measured peaks.",
            "",
        ]
    measured = [
        f"fp32 FMA {peaks['fp32_fma_tflops']:.3g} TFLOP/s ({md.text(peaks.get('fp32_isa') or '?')})"
        if peaks.get("fp32_fma_tflops") else None,
        f"bf16 {peaks['bf16_tflops']:.3g} TFLOP/s ({md.text(peaks.get('bf16_path'))})"
        if peaks.get("bf16_tflops") else None,
        f"memory {peaks['triad_gbs']:.3g} GB/s (a triad)" if peaks.get("triad_gbs") else None,
    ]  # fmt: skip
    mm = {r.get("dtype"): r for r in rows if r.get("mm_peak_share") is not None}
    gemm = ", ".join(f"{r['mm_peak_share']:.0%} of the {md.text(d)} peak" for d, r in mm.items())
    paths: dict[str, dict[str, str]] = {}  # variant -> dtype -> how it multiplied its tiles
    for r in (r for r in rows if r.get("path")):
        paths.setdefault(md.code(r["variant"]), {})[md.text(r.get("dtype"))] = md.text(r["path"])
    return [
        f"Peaks measured in this run: {', '.join(m for m in measured if m)}. A large "
        f"`torch.mm`, timed beside the kernels, reaches {gemm or 'no share of them'}. The last "
        "column is each kernel's FLOP/s as a share of its dtype's peak; a causal row counts the "
        "triangle of the products it computes, half the square."
        + "".join(
            f" {v} multiplied its tiles with: "
            + ", ".join(f"{p} in {d}" for d, p in by_dtype.items())
            + "."
            for v, by_dtype in paths.items()
        ),
        "",
    ]


def sizes_lines(mine: list[dict]) -> list[str]:
    """The batch × heads of the rows, said once above them, and how to read a time's spread."""
    sizes = sorted(
        {f"{md.text(r.get('batch', '?'))} × {md.text(r.get('heads', '?'))}" for r in mine}
    )
    spread = (
        f" Times: the median and its {intervals.INTERVAL}; the ratio of the medians, with the "
        "lowest and highest ratio the two ranges allow, and what that range says: faster (all of "
        "it under 1×), slower (all of it over 1×), or cannot tell (it holds 1×)."
    )
    timed = any("ratio_low" in r for r in mine)
    return [
        f"Batch × heads: {', '.join(sizes)}. TFLOP/s of every row: in the data below."
        + (spread if timed else ""),
        "",
    ]


def benchmark_row(r: dict, shares: bool) -> str:
    """One kernel's row, its shape in one column: the table fits a page's column at 1280 px."""
    shape = shape_cell(r)
    if "low_us" in r:
        time = timed_cell({**r, "median_us": r["time_us"]})
    else:
        time = time_text(r["time_us"])
    if "ratio_low" in r:
        bounds = r["ratio_to_flash"], r["ratio_low"], r["ratio_high"]
        ratio = ratio_cell(*bounds, ratio_verdict(r), FASTER)
    else:
        ratio = f"{r['ratio_to_flash']:.2f}"
    share = r.get("peak_share")
    cells = [None if share is None else f"{share:.2f}"] if shares else []
    return table_row([md.code(r["variant"]), shape, time, ratio, *cells])


VERDICTS = {"faster": True, "slower": False, "cannot tell": None}  # a stored verdict, as a bool


def backward_lines(rows: list[dict], baseline: str) -> list[str]:
    """The backward of each kernel that trains against the baseline's, timed in the same run:
    the verdicts the benchmark stored, counted per kernel, then a row per shape with the backward's
    time, its ratio to the baseline's backward and to its own forward. A set benchmarked before
    the backward was timed says so."""
    mine = [r for r in rows if r["variant"] != baseline and "verdict" in (r.get("backward") or {})]
    if not mine:
        return ["", "**The backward.** Not measured in this set: its benchmark predates the rows."]
    lines = [
        "",
        f"**The backward** (autograd's, on a graph kept from one forward), against {md.code(baseline)}'s:",
        "",
    ]
    for name in dict.fromkeys(r["variant"] for r in mine):
        grid = [
            (VERDICTS[r["backward"]["verdict"]], shape_text(r))
            for r in mine
            if r["variant"] == name
        ]
        lines.append(f"- {md.code(name)}: {md.text(counts(grid, FASTER))}.")
    lines += [
        "",
        *table_head(
            ["variant", "dtype, seq × head_dim", "backward", f"÷ {baseline}'s", "÷ its forward"]
        ),
    ]
    for r in mine:
        b = r["backward"]
        to_flash = ratio_cell(
            b["ratio_to_flash"], b["ratio_low"], b["ratio_high"], VERDICTS[b["verdict"]], FASTER
        )
        own = ratio_cell(
            b["over_forward"], b["over_forward_low"], b["over_forward_high"], True, None
        )
        time = timed_cell({**b, "median_us": b["time_us"]})
        lines.append(table_row([md.code(r["variant"]), shape_cell(r), time, to_flash, own]))
    return lines


def shape_cell(r: dict) -> str:
    """A row's shape in one table cell: its dtype, then seq × head_dim and the masking small."""
    masking = "causal" if r["is_causal"] else "full"
    return (
        f"{md.text(r.get('dtype', '?'))}<br><small>{int(r['seq'])} × {int(r['head_dim'])}, "
        f"{masking}</small>"
    )


# --- scaling.json ---------------------------------------------------------------------------------


def scaling_table(rows: list[dict], reference: str) -> str:
    """Each variant's time at each length swept (median and interquartile range) and its speedup
    over `reference` at that length: the ratio of the medians, the range the two allow, and what it
    says (faster, slower, cannot tell); above it, those verdicts counted per variant. A set whose
    rows have no ranges: times alone."""
    ref = {r["seq"]: r for r in rows if r["variant"] == reference}
    timed = all("low_us" in r for r in rows) and ref
    lines = []
    if timed:
        lines += [
            f"Time: the median and its {intervals.INTERVAL}. Speedup: {md.code(reference)}'s "
            "median ÷ the variant's at the same length, with the lowest and highest ratio the two "
            "ranges allow: faster or slower where that range leaves out 1×, else cannot tell.",
            "",
        ]
        for name in dict.fromkeys(r["variant"] for r in rows if r["variant"] != reference):
            grid = [
                (_speedup(r, ref[r["seq"]])[-1], f"seq {r['seq']}")
                for r in rows
                if r["variant"] == name and r["seq"] in ref
            ]
            lines.append(f"- {md.code(name)}: {md.text(counts(grid, FASTER, of='lengths'))}.")
        lines.append("")
    speedups = [f"speedup over {reference}"] if timed else []
    lines += table_head(["variant", "seq", "time", *speedups, "peak memory"], 2)
    for r in rows:
        peak = r.get("peak_memory_bytes")
        cells = [md.code(r["variant"]), int(r["seq"])]
        memory = [bytes_text(peak) if peak else None]
        if not timed:
            lines.append(table_row([*cells, time_text(r["time_us"]), *memory]))
            continue
        mine = {**r, "median_us": r["time_us"]}
        if r["variant"] == reference or r["seq"] not in ref:
            speedup = "1×" if r["variant"] == reference else None
        else:
            value, low, high, verdict = _speedup(r, ref[r["seq"]])
            speedup = ratio_cell(value, low, high, verdict, FASTER)
        lines.append(table_row([*cells, timed_cell(mine), speedup, *memory]))
    return "\n".join(lines)


def _speedup(r: dict, ref: dict) -> tuple[float, float, float, bool | None]:
    """ref's median ÷ r's, the range their intervals allow, and whether r is faster (None: the
    range holds 1×)."""
    as_timed = lambda x: {**x, "median_us": x["time_us"], "repeats": x.get("repeats", 1)}  # noqa: E731
    value, low, high = intervals.ratio(as_timed(ref), as_timed(r))
    return value, low, high, intervals.above(low, high)


# --- decoding.json --------------------------------------------------------------------------------


def decoding_table(rows: list[dict]) -> str:
    """The run's ceilings, then each way's bandwidth (a share of the copy ceiling) at the shortest and
    longest cache, batch 1, and the share of its shortest step that a one-key cache already costs."""
    ceilings = {r["name"]: r for r in rows if r.get("kind") in ("ceiling", "probe")}
    lines = []
    if "copy" in ceilings and "compute" in ceilings:  # the dtype's peak, attn.profiling.peaks
        copy, peak = ceilings["copy"]["gb_per_s"], ceilings["compute"]
        lines.append(
            f"Measured in this run: copy ceiling {copy:.1f} GB/s, compute peak "
            f"{peak['gflop_per_s']:.0f} GFLOP/s ({md.text(peak.get('peak') or '?')}), so the roofs "
            f"meet at {peak['gflop_per_s'] / copy:.1f} FLOPs per byte."
        )
    elif "copy" in ceilings and "matmul" in ceilings:  # a set from before the peaks
        copy, matmul = ceilings["copy"]["gb_per_s"], ceilings["matmul"]["gflop_per_s"]
        lines.append(
            f"Measured in this run: copy ceiling {copy:.1f} GB/s, and a large `torch.mm` at "
            f"{matmul:.0f} GFLOP/s, drawn as the compute roof, which meets the copy's at "
            f"{matmul / copy:.1f} FLOPs per byte. This set predates the measured peaks: a "
            "GEMM's rate is not the machine's compute peak, which can be higher."
        )
    steps = [r for r in rows if r.get("kind") == "step" and r.get("batch") == 1]
    if steps:
        lines += ["", *bandwidth_table(steps)]
    every = [r for r in rows if r.get("kind") == "step"]
    if every:
        lines += ["", *monotonic_lines(every)]
    return "\n".join(lines)


def bandwidth_table(steps: list[dict]) -> list[str]:
    """Each way's row at batch 1: its shortest and longest cache, and a one-key cache's share."""
    head = ["way (batch 1)", "cache", "× copy ceiling", "cache", "× copy ceiling",
            "one key costs, at the shortest"]  # fmt: skip
    lines = table_head(head)
    for impl in dict.fromkeys(r["impl"] for r in steps):
        mine = sorted((r for r in steps if r["impl"] == impl), key=lambda r: r["cache_len"])
        lo, hi = mine[0], mine[-1]
        lines.append(
            table_row(
                [
                    md.text(impl),
                    int(lo["cache_len"]),
                    f"{lo['bandwidth_ratio']:.2f}",
                    int(hi["cache_len"]),
                    f"{hi['bandwidth_ratio']:.2f}",
                    f"{lo['overhead_share']:.0%}",
                ]
            )  # fmt: skip
        )
    return lines


def monotonic_lines(steps: list[dict]) -> list[str]:
    """Whether each way's step time grows with the cache; where a longer cache took less time, the
    pair, and whether the drop is within the two interquartile ranges (a tie) or beyond them; a drop
    every way makes between the same two caches is the moment they were timed at (all ways are timed
    in the same rounds), not the cache."""
    found = drops(steps)
    if not found:
        return ["Every way's step time grows with the cache (medians), at every batch."]
    ways = {r["impl"] for r in steps}
    beyond_at = [_pair(a, b) for a, b, beyond in found if beyond]
    everyone = {p for p in beyond_at if beyond_at.count(p) == len(ways)}
    lines = ["Where a longer cache took less time than a shorter one:", ""]
    for a, b, beyond in found:
        lines.append(
            f"- {md.text(a['impl'])}, batch {a['batch']}: cache {a['cache_len']} "
            f"{time_text(a['time_us'])} → cache {b['cache_len']} {time_text(b['time_us'])}, "
            f"{_why(beyond, _pair(a, b) in everyone)}."
        )
    return lines


def drops(steps: list[dict]) -> list[tuple[dict, dict, bool]]:
    """(shorter, longer, beyond both ranges) for each way, batch and next longer cache that took less
    time than the shorter one."""
    found = []
    for key in dict.fromkeys((r["impl"], r["batch"]) for r in steps):
        mine = sorted(
            (r for r in steps if (r["impl"], r["batch"]) == key), key=lambda r: r["cache_len"]
        )
        for a, b in zip(mine, mine[1:], strict=False):
            if b["time_us"] < a["time_us"]:
                beyond = b.get("high_us", b["time_us"]) < a.get("low_us", a["time_us"])
                found.append((a, b, beyond))
    return found


def _pair(a: dict, b: dict) -> tuple:
    return a["batch"], a["cache_len"], b["cache_len"]


def _why(beyond: bool, every_way: bool) -> str:
    """What a drop means: a tie, the moment the shorter cache was timed at, or the way's own."""
    if not beyond:
        return "within the interquartile ranges: a tie, not a drop"
    if every_way:
        return (
            "beyond both interquartile ranges, as for every way at these two caches: the "
            "shorter cache was timed at a slow moment of the machine (its load, above)"
        )
    return (
        "beyond both interquartile ranges, for this way alone: its shorter step was slowed "
        "by something other than its cache (fixed costs, last column)"
    )


# --- overhead.json --------------------------------------------------------------------------------

OVERHEAD_KINDS = {  # kind -> (the row it is divided by, the first column's head, each row's words)
    "profiler": ("alone", "how the forward ran", {
        "alone": "the forward alone",
        "profiler": "inside `profile()`, every switch off",
        "record_shapes": "with `record_shapes=True`",
        "profile_memory": "with `profile_memory=True`",
        "with_stack": "with `with_stack=True`",
        "start_stop": "`profile()` around no forward: its start and stop",
    }),
    "first_touch": ("copy_", "the copy", {
        "clone": "`scores.clone()`: into fresh memory",
        "copy_": "`buffer.copy_(scores)`: into memory already touched",
    }),
}  # fmt: skip


def overhead_table(rows: list[dict], kind: str, triad_gbs: float | None = None) -> str:
    """The rows of one kind of overhead.json: where and what they timed, each row's median and
    interquartile range, and its ratio to the kind's baseline row (timed in the same rounds); for
    the copies, the bytes they move per second (read and written), beside the memory bandwidth the
    set's benchmark measured (its triad), where given, and the page faults each call cost."""
    base, head, words = OVERHEAD_KINDS[kind]
    mine = [r for r in rows if r["kind"] == kind]
    baseline = next(r for r in mine if r["name"] == base)
    copies = kind == "first_touch"
    first = mine[0]
    shape = f"batch {first['batch']} × {first['heads']} heads, seq {first['seq']}"
    what = (
        f"One score matrix of {md.code(first['variant'])} ({shape}, {md.text(first['dtype'])}, "
        f"{bytes_text(first['bytes'])}) copied, each way timed interleaved with the other."
        if copies
        else f"{md.code(first['variant'])}'s forward ({shape}, head_dim {first['head_dim']}, "
        f"{md.text(first['dtype'])}), each way timed interleaved with the others."
    )
    made = (
        f"Measured {md.text(first.get('date', '?'))} on {md.text(first['cpu_model'])}, "
        f"{first.get('threads', '?')} threads, torch {md.text(first.get('torch_version', '?'))}."
    )
    lines = [f"{what} {made}"]
    if copies and triad_gbs:
        lines.append(
            f"For scale, this set's benchmark measured {triad_gbs:.1f} GB/s of memory bandwidth "
            "(a triad: two arrays read, one written)."
        )
    if busy := how_busy([r.get("load") for r in mine]):
        lines.append(
            f"**Busy machine:** {busy} while these were timed: a verdict on them cannot tell."
        )
    extra = ["GB/s moved", "page faults per call"] if copies else []
    table = table_head([head, "time per call", *extra, f"÷ {md.code(base)}"])
    for r in mine:
        faults = r.get("page_faults")  # None: not counted (a dash)
        gbs = f"{2 * r['bytes'] / r['time_us'] / 1e3:.1f}" if copies else None
        moved = [gbs, None if faults is None else f"{faults:,.0f}"] if copies else []
        ratio = None
        if r is not baseline:
            ratio = ratio_cell(*intervals.ratio(_timed(r), _timed(baseline)), verdict=True)
        name = words.get(r["name"]) or md.code(r["name"])
        table.append(table_row([name, timed_cell(_timed(r)), *moved, ratio]))
    return "\n\n".join(lines) + "\n\n" + "\n".join(table) + "\n"


def _timed(r: dict) -> dict:
    """A row's time as intervals and timed_cell read one."""
    return {"median_us": r["time_us"], "low_us": r["low_us"], "high_us": r["high_us"],
            "repeats": r.get("repeats", 1)}  # fmt: skip
