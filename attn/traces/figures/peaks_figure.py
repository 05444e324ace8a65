"""peaks.svg: what share of this machine's measured peaks each benchmarked variant reaches, per
dtype, and torch.mm beside them as one more contender. Drawn from benchmark.json's rows alone
(attn.traces.figures.svg, no matplotlib), so `recheck` redraws it from a committed set; a set benchmarked
before the peaks were measured has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from attn.traces.common.atomic import replace_file
from attn.traces.common.markdown import visible
from attn.traces.figures.svg import WIDTH_IN, Panel, Text

FILE = "peaks.svg"
MM = "torch.mm"
ROW_IN = 0.2  # a bar's row
AXES_IN, LEGEND_IN = 0.8, 0.45  # the title and the x axis around the rows; the legend below
COLORS = {"ours": ("#f28e2b", "#b3560a"), "theirs": ("#a0cbe8", "#4e79a7")}  # (highest, lowest)
PEAK_NAMES = {"fp32_fma": "fp32 FMA"}


class Bar(NamedTuple):
    label: str
    low: float  # the lowest share over the benchmarked shapes
    high: float  # the highest
    ours: bool  # a kernel of this repository (its rows carry a ratio to the baseline)


class Group(NamedTuple):
    dtype: str
    peak: str  # what the share is of, in words
    bars: list[Bar]


def groups(rows: list[dict]) -> list[Group]:
    """Per dtype with a measured peak: each variant's lowest and highest share of it (ours first,
    a kernel's path beside its name), then torch.mm's."""
    found = []
    shared = [r for r in rows if r.get("peak_share") is not None and r.get("peak_tflops")]
    for dtype in dict.fromkeys(r.get("dtype") for r in shared):
        mine = [r for r in shared if r.get("dtype") == dtype]
        run = list(dict.fromkeys(r["variant"] for r in mine))
        ours = {r["variant"] for r in mine if "ratio_to_flash" in r}
        # Ours first, then the others, the last run first (sdpa_flash before sdpa_math, inplace).
        order = sorted(run, key=lambda n: (n not in ours, -run.index(n)))
        bars = []
        for name in order:
            shares = [r["peak_share"] for r in mine if r["variant"] == name]
            paths = "/".join(dict.fromkeys(r["path"] for r in mine if r["variant"] == name and r.get("path")))  # fmt: skip
            label = f"{name} ({paths})" if paths else name
            bars.append(Bar(visible(label), min(shares), max(shares), name in ours))
        mm = [r["mm_peak_share"] for r in mine if r.get("mm_peak_share") is not None]
        if mm:
            bars.append(Bar(MM, min(mm), max(mm), False))
        first = mine[0]
        peaks = first.get("peaks") or {}
        name = PEAK_NAMES.get(first.get("peak"), str(first.get("peak")).replace("_", " "))
        isa = f", {peaks['fp32_isa']}" if first.get("peak") == "fp32_fma" and peaks.get("fp32_isa") else ""  # fmt: skip
        peak = f"{visible(dtype)}: share of the {visible(name)} peak, {first['peak_tflops']:.3g} TFLOP/s{visible(isa)}"  # fmt: skip
        found.append(Group(visible(str(dtype)), peak, bars))
    return found


def _percent(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def panel(rows: list[dict]) -> Panel | None:
    """The picture of the rows' shares, or None where no row has a share of a measured peak."""
    found = groups(rows)
    if not found:
        return None
    units = sum(1 + len(g.bars) for g in found) + 0.5 * (len(found) - 1)
    height = AXES_IN + ROW_IN * units + LEGEND_IN
    p = Panel(
        WIDTH_IN, height, xlim=(0.0, 1.13), ylim=(units, 0.0), xgrid=True,
        title="Share of this machine's measured peaks, per dtype",
        xlabel="FLOP/s ÷ the peak of the row's dtype (a causal run counts the triangle)",
        xticks=[(x / 4, f"{x * 25}%") for x in range(5)],
        legend=[(COLORS["ours"][1], "our kernel: lowest share over the shapes"),
                (COLORS["ours"][0], "our kernel: highest share"),
                (COLORS["theirs"][1], "the others: lowest share"),
                (COLORS["theirs"][0], "the others: highest share")],
        legend_columns=2, legend_share=LEGEND_IN / height,
    )  # fmt: skip
    y = 0.0
    for g in found:
        p.texts.append(Text(0.005, y + 0.5, g.peak, ha="left"))
        y += 1
        for bar in g.bars:
            high, low = COLORS["ours" if bar.ours else "theirs"]
            # (x0, x1, y0, y1) with y0 below y1 as drawn: the y axis runs down the page
            p.bars.append((0.0, bar.high, y + 0.85, y + 0.15, high))
            p.bars.append((0.0, bar.low, y + 0.85, y + 0.15, low))
            p.yticks.append((y + 0.5, bar.label))
            shown = _percent(bar.high)
            if _percent(bar.low) != shown:
                shown = f"{_percent(bar.low)}–{shown}"
            p.texts.append(Text(bar.high + 0.01, y + 0.5, shown, ha="left"))
            y += 1
        y += 0.5
    return p


def svg_text(rows: list[dict]) -> str | None:
    """peaks.svg's text for the rows, or None where there is nothing to draw."""
    drawn = panel(rows)
    return None if drawn is None else drawn.svg()


def write(folder: Path, rows: list[dict]) -> bool:
    """Replace the set's peaks.svg (atomically) with the rows' picture, or remove it where the rows
    have no share of a measured peak, so that it never shows older rows; say whether it is there."""
    path, text = Path(folder) / FILE, svg_text(rows)
    if text is None:
        path.unlink(missing_ok=True)
        return False
    replace_file(path, lambda scratch: scratch.write_text(text, encoding="utf-8"))
    return True
