"""The at-a-glance chart of a hardware set: time per forward of every variant profiled there.

Where the set has a timing pass (timing.json), each bar is the variant's median from it, with its
interquartile range; else the profiler's mean, labelled as such."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

from attn.traces.common import artifacts
from attn.traces.common.atomic import replace_file


def summaries(folder: Path, names: Sequence[str] = ()) -> list[dict]:
    """The available variants' summaries in a hardware folder, in the order of `names` (chapter
    order; others last); training steps left out (their forward runs under autograd: no match for
    an inference forward)."""
    order = {name: i for i, name in enumerate(names)}
    found = artifacts.summaries_of(folder)
    timing = Path(folder) / artifacts.TIMING
    timed = {}
    if timing.is_file():  # the timing pass's rows, by variant
        timed = {r["variant"]: r for r in json.loads(timing.read_text()).get("rows", [])}
    rows = sorted(
        (s for s in found if s.get("available") and "backward" not in s),
        key=lambda s: order.get(s["variant"], 99),
    )
    return [{**s, "timed": timed[s["variant"]]} if s["variant"] in timed else s for s in rows]


def _ms(s: dict, on_device: bool) -> float:
    """The bar's length: the timed median, else the profiler's mean (device time where measured)."""
    if "timed" in s:
        return s["timed"]["median_us"] / 1000
    return s["device_time_us" if on_device else "cpu_time_us"] / 1000


def bar_labels(rows: list[dict]) -> list[str]:
    """Each row's time per forward as its bar says it: device time where measured, else CPU time."""
    on_device = any(s.get("device_time_us") is not None for s in rows)
    return [f"{_ms(s, on_device):.3g} ms" for s in rows]


def is_current(folder: Path, names: Sequence[str] = ()) -> bool:
    """Whether overview.svg shows the summaries there now (its text is text: each variant's name
    and time can be read back), so a run killed before redrawing it is caught."""
    rows, path = summaries(folder, names), Path(folder) / artifacts.OVERVIEW
    if not rows or not path.is_file():
        return not rows and not path.exists()
    text = path.read_text()
    on_device = any(s.get("device_time_us") is not None for s in rows)
    said = textwrap.fill(time_label(["timed" in s for s in rows], on_device), LINE_CHARS)
    return all(f">{line}<" in text for line in said.splitlines()) and all(
        s["variant"] in text and f">{label}<" in text
        for s, label in zip(rows, bar_labels(rows), strict=True)
    )


# Narrow enough to show whole on a phone (a 390 px screen has a 358 px column), at its own size
# everywhere: 8.5 pt text is 11 px at 3.6 in (346 px).
WIDTH_IN = 3.6
LINE_CHARS = 44  # at 8.5 pt, about what 3.6 in holds


def draw(
    rows: list[dict], title: str, path: Path, note: str = "", reference: str | None = None
) -> None:
    """Horizontal bars of time per forward: device time where measured, else CPU time, drawn at
    3.6 in so a phone shows it whole with every text at 11 px or more."""
    from attn.traces.figures.plot import (  # matplotlib only when drawing: recheck reads text
        figure,
        save,
    )

    on_device = any(s.get("device_time_us") is not None for s in rows)
    timed = ["timed" in s for s in rows][::-1]
    names = [s["variant"] for s in rows][::-1]
    values = [_ms(s, on_device) for s in rows][::-1]
    indent = "\u00a0\u00a0"  # a wrapped note's next lines: SVG text drops plain leading spaces
    note = "\n".join(wrapped(line, LINE_CHARS, indent) for line in note.splitlines())
    below = textwrap.fill(time_label(timed, on_device), LINE_CHARS) + (
        f"\n\n{note}" if note else ""
    )
    mixed = any(timed) and not all(timed)  # each bar's source told apart: a legend of two
    legend_in = 0.34 if mixed else 0.0
    top_in = 0.1 + 0.16 * (title.count("\n") + 1)
    bottom_in = 0.04 + 0.15 * (below.count("\n") + 1) + legend_in
    height = top_in + bottom_in + 0.45 + 0.27 * len(rows)
    fig, ax = figure(height, width_in=WIDTH_IN)
    colors = ["#d62728" if n == reference else "#4e79a7" for n in names]
    spread = None
    if any(timed):  # the interquartile range as a timed bar's whiskers; none on a profiled one
        by_name = {s["variant"]: s.get("timed") for s in rows}
        spread = [
            [(t["median_us"] - t["low_us"]) / 1000 if t else 0.0 for t in map(by_name.get, names)],
            [(t["high_us"] - t["median_us"]) / 1000 if t else 0.0 for t in map(by_name.get, names)],
        ]
    hatches = ["" if t or not mixed else "////" for t in timed]
    ax.barh(names, values, color=colors, hatch=hatches, edgecolor="white")
    if spread is not None:  # whiskers on the timed bars only: a profiled one has no spread to show
        at = [i for i, t in enumerate(timed) if t]
        pick = lambda xs: [xs[i] for i in at]  # noqa: E731
        ax.errorbar(pick(values), at, xerr=[pick(spread[0]), pick(spread[1])], fmt="none",
                    ecolor="black", capsize=2)  # fmt: skip
    ends = values if spread is None else [v + e for v, e in zip(values, spread[1], strict=True)]
    for y, (end, text) in enumerate(zip(ends, bar_labels(rows)[::-1], strict=True)):
        ax.annotate(text, (end, y), xytext=(3, 0), textcoords="offset points", va="center")
    ax.set_xlim(0, max(ends) * 1.35)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    # Title and axis label from the picture's left edge, not the bars': the names take a third.
    fig.text(0.02, 1 - 0.06 / height, title, va="top", fontsize=9.5)
    fig.text(0.02, 0.04 / height, below, va="bottom")
    if mixed:
        _legend(fig, (bottom_in - legend_in) / height, on_device)
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1 - top_in / height))
    save(fig, path)


TIMED = "timed: median and interquartile range"


def profiled_label(on_device: bool) -> str:
    return f"not timed: {'device' if on_device else 'CPU'} mean under the profiler"


def time_label(timed: list[bool], on_device: bool) -> str:
    """What the bars' times are: all timed, all profiled, or (a legend above says which) both."""
    if all(timed):
        return "ms per forward: median and interquartile range, timed interleaved"
    if not any(timed):
        return f"{'device' if on_device else 'CPU'} ms per forward under the profiler"
    untimed = "device" if on_device else "CPU"
    return f"ms per forward: solid bars timed interleaved, hatched ones {untimed} time profiled"


def _legend(fig, bottom: float, on_device: bool) -> None:
    """Which bars are timed and which only profiled: a solid and a hatched swatch, above the label."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor="#4e79a7", edgecolor="white"),
               Patch(facecolor="#4e79a7", edgecolor="white", hatch="////")]  # fmt: skip
    fig.legend(
        handles, [TIMED, profiled_label(on_device)], loc="lower left", frameon=False,
        bbox_to_anchor=(0.0, bottom), handlelength=1.4, borderaxespad=0.2,
    )  # fmt: skip


def wrapped(text: str, width: int, indent: str = "") -> str:
    """Text broken after its commas into lines of about `width` characters, so that no "seq 32"
    is split from its number."""
    lines = [""]
    for part in text.split(", "):
        joined = f"{lines[-1]}, {part}" if lines[-1] else part
        if len(joined) >= width and lines[-1].strip():
            lines[-1] += ","
            lines.append(indent + part)
        else:
            lines[-1] = joined
    return "\n".join(lines)


def shape_text(s: dict) -> str:
    shape = s["shape"]
    return (
        f"{s['dtype']}, batch {shape['batch']}, heads {shape['heads']}, "
        f"seq {shape['seq_q']}, head_dim {shape['head_dim']}"
    )


def write_overview(
    folder: Path, names: Sequence[str] = (), reference: str | None = None
) -> Path | None:
    """Redraw `<folder>/overview.svg` from the summaries there, in the order of `names`; None when
    nothing ran.

    The title names the device and the shape most rows share (the `reference` variant's where it
    ran, its bar in red), each on a line of its own; a row profiled at another shape is starred and
    its shape said below the bars.
    """
    rows = summaries(folder, names)
    path = Path(folder) / artifacts.OVERVIEW
    if not rows:
        path.unlink(missing_ok=True)
        return None
    common = main_shape(rows, reference)
    title = f"Time per forward on\n{rows[0]['device_name']}\n" + wrapped(common, LINE_CHARS - 6)
    others = {s["variant"]: shape_text(s) for s in rows if shape_text(s) != common}
    rows = [{**s, "variant": s["variant"] + ("*" if s["variant"] in others else "")} for s in rows]
    note = "\n".join(f"* {name}: {shape}" for name, shape in others.items())
    return replace_file(path, lambda p: draw(rows, title, p, note, reference))


def main_shape(rows: list[dict], reference: str | None = None) -> str:
    """The shape the reference variant (naive) ran at, else the one most rows share."""
    for s in rows:
        if s["variant"] == reference:
            return shape_text(s)
    shapes = [shape_text(s) for s in rows]
    return max(set(shapes), key=shapes.count)
