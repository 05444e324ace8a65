"""Draw one range of a trace as a timeline: CPU rows by nesting depth, then one row per GPU stream.

Drawn at the width the site shows it (7.2 in, about 690 px), so its text stays readable there. Idle
stretches where nothing runs on any row (a long wait between a launch and its kernel) are cut
short and marked, so they do not squeeze everything else into a sliver.
"""

from __future__ import annotations

import functools
import re
import zlib
from pathlib import Path

import numpy as np

from attn.traces.common.markdown import visible
from attn.traces.figures.svg import FONT_PT, WIDTH_IN, Panel, Text
from attn.traces.figures.ticks import tick_values
from attn.traces.read.patterns import CLONE, COPY
from attn.traces.read.range_counts import depths, runtime_kind
from attn.traces.read.trace import DEVICE_CATEGORIES, MEMCPY, RUNTIME_CATEGORIES, Event, Forward

ROW_HEIGHT_IN = 0.32
COPY_COLOR = "#d62728"  # clones, copies and Memcpys: what the naive-vs-in-place lesson is about
RANGE_COLOR = "#9e9e9e"
RUNTIME_COLORS = {
    "launch": ("#ff9f1c", "kernel launch"),
    "synchronize": ("#8e6c8a", "synchronize"),
    "allocate": ("#9c755f", "allocate / free"),
    "memcpy": ("#f1a3c0", "memcpy / memset call"),
    "other": ("#c7c7c7", "other runtime call"),
}
PALETTE = ["#4e79a7", "#59a14f", "#76b7b2", "#b07aa1", "#edc948", "#86bcb6", "#8cd17d", "#a0cbe8"]
MIN_WIDTH_FRACTION = (
    0.003  # like a trace viewer's one-pixel minimum, so a short event stays visible
)
PLOT_PX = 550  # the plot's width on the page, in pixels (the axes take about 80% of 690 px)
MAX_BARS, MAX_LABELS = 3000, 300  # with axes, ticks and legend: under 5,000 SVG elements in all
MAX_CPU_ROWS = 16  # a stack 20,000 calls deep drew 20,000 rows: the deepest levels share one
MIXED_COLOR = "#5f5f5f"  # a span of many short events of different kinds
GAP_FRACTION = 0.15  # idle stretches longer than this share of the range are cut short
GAP_DRAWN = 0.03  # ... to this share of the drawing


def is_copy(e: Event) -> bool:
    if e.cat == MEMCPY or e.name == CLONE:
        return True
    # A copy_ of a 0-dim tensor (a Python number wrapped by `q * scale`) is not the lesson's copy.
    return e.name == COPY and (e.args.get("Input Dims") or [[1]])[0] != []


def color(e: Event) -> str:
    return COPY_COLOR if is_copy(e) else _color(e.name, e.cat)


@functools.cache
def _color(name: str, cat: str) -> str:
    if cat in ("user_annotation", "gpu_user_annotation"):
        return RANGE_COLOR
    if cat in RUNTIME_CATEGORIES:
        return RUNTIME_COLORS[runtime_kind(name)][0]
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def short_name(name: str) -> str:
    """`void at::native::foo_kernel<...>(...)` -> `foo_kernel`; `aten::mul` -> `mul`."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return re.split(r"[<(]", name)[0].strip().split("::")[-1] or name[:20]


def label(e: Event, width: float, per_char: float) -> str | None:
    """The event's name, shortened or cut so it fits inside its bar, or None."""
    fits = int(width / per_char)
    for text in (e.name, short_name(e.name)):
        if len(text) <= fits:
            return text
    short = short_name(e.name)
    return short[: fits - 1] + "…" if fits >= 5 else None


def _number(x) -> tuple:
    """Sort key that orders stream 7 before stream 20 (ids may be ints or strings)."""
    text = str(x)
    digits = re.findall(r"\d+", text)
    return (0, int(digits[-1]), text) if digits else (1, 0, text)


def lanes(forward: Forward) -> list[tuple[str, list[Event]]]:
    """(row title, events) from top to bottom: CPU rows by nesting depth, then each GPU stream.
    Levels past MAX_CPU_ROWS share the last CPU row, whose title says how many it holds."""
    cpu = [forward.range, *forward.cpu_events]
    rows: dict[int, list[Event]] = {}
    deepest = 0
    for e, d in zip(cpu, depths(cpu), strict=True):
        rows.setdefault(min(d, MAX_CPU_ROWS - 1), []).append(e)
        deepest = max(deepest, d)
    titles = {0: "CPU"}
    if deepest >= MAX_CPU_ROWS:
        titles[MAX_CPU_ROWS - 1] = f"{deepest - MAX_CPU_ROWS + 2:,} levels folded"
    result = [(titles.get(d, ""), rows[d]) for d in sorted(rows)]
    streams: dict[tuple, list[Event]] = {}
    for e in forward.device_events:
        streams.setdefault((e.pid, e.tid), []).append(e)
    for pid, tid in sorted(streams, key=lambda k: (_number(k[0]), _number(k[1]))):
        result.append((f"GPU {_number(pid)[1]} stream {_number(tid)[1]}", streams[(pid, tid)]))
    return result


class TimeAxis:
    """Maps trace time to drawing position, with long idle stretches cut short."""

    def __init__(self, busy: list[tuple[float, float]]) -> None:
        busy = sorted(busy)
        self.t0 = busy[0][0]
        self.span = max(max(end for _, end in busy) - self.t0, 1e-3)
        self.gaps: list[tuple[float, float]] = []  # idle stretches that are cut short
        reach = busy[0][1]
        for start, end in busy[1:]:
            if start - reach > GAP_FRACTION * self.span:
                self.gaps.append((reach, start))
            reach = max(reach, end)
        # Pieces of time (t_a, t_b) and where they are drawn (x_a, x_b): gaps drawn narrow.
        self.pieces, t, x = [], self.t0, 0.0
        for start, end in self.gaps:
            self.pieces.append((t, start, x, x + start - t))
            x += start - t
            self.pieces.append((start, end, x, x + GAP_DRAWN * self.span))
            t, x = end, x + GAP_DRAWN * self.span
        self.pieces.append((t, self.t0 + self.span, x, x + self.t0 + self.span - t))
        self.width = self.pieces[-1][3]

    def x(self, t):
        """Position of time t (a number or an array of them) in the drawing."""
        knots_t = [self.pieces[0][0]] + [t_b for _, t_b, _, _ in self.pieces]
        knots_x = [self.pieces[0][2]] + [x_b for _, _, _, x_b in self.pieces]
        return np.interp(t, knots_t, knots_x)  # the pieces join: one line through their ends

    def segments(self) -> list[tuple[float, float]]:
        """The uncut stretches of time, in order."""
        return [(t_a, t_b) for i, (t_a, t_b, _, _) in enumerate(self.pieces) if i % 2 == 0]


Bar = tuple[float, float, str, "Event | None"]  # x0, x1, color, its event (None: a span of many)


def merge(bars: list[Bar], min_width: float, keep: str | None = None) -> list[Bar]:
    """A row's bars with each run of bars narrower than `min_width`, closer than that to each other,
    made one span: drawn in their color when they share one, else in MIXED_COLOR. Events called
    `keep` stay bars of their own."""
    out: list[Bar] = []
    for x0, x1, c, e in bars:
        if out and x1 - x0 < min_width and (e is None or e.name != keep):
            a0, a1, ac, ae = out[-1]
            if (ae is None or (a1 - a0 < min_width and ae.name != keep)) and x0 - a1 < min_width:
                out[-1] = (a0, max(a1, x1), ac if ac == c else MIXED_COLOR, None)
                continue
        out.append((x0, x1, c, e))
    return out


def draw_timeline(
    fwds: list[Forward],
    title: str,
    path: Path,
    *,
    forward_index: int | None = None,
    focus: str | None = None,
    shape: dict | None = None,
) -> None:
    """Write an SVG picture of one of the ranges (the middle one by default).

    At most MAX_BARS bars, whatever the range holds: events too short to see apart are merged into
    spans. The event called `focus` (the chapter's) is labelled even when its bar is narrow; the
    legend names what a copy copies from its input's shape against `shape` (the summary's)."""
    forward = fwds[len(fwds) // 2 if forward_index is None else forward_index]
    rows = lanes(forward)
    drawn = [e for _, evts in rows for e in evts]
    axis = TimeAxis([(e.ts, e.end) for e in drawn])

    panel = Panel(WIDTH_IN, 1.5 + ROW_HEIGHT_IN * len(rows), title=visible(title), xgrid=True)
    per_char = axis.width / (WIDTH_IN * 0.8 * 72 / (FONT_PT * 0.58))  # drawing µs per character

    bars = _bars(rows, axis, focus)
    labels = _draw_bars(panel, bars, axis, per_char, focus)
    _draw_labels(panel, labels)
    _draw_gaps(panel, axis, len(rows))
    _draw_rows_axis(panel, rows, axis)
    _draw_time_axis(panel, axis, forward.range.name)
    panel.legend = _legend(drawn, bars, shape)
    panel.legend_columns = min(len(panel.legend), 3)
    panel.legend_share = 0.06 * (1 + (len(panel.legend) > 3)) if panel.legend else 0.0
    panel.write(path)


def _bars(
    rows: list[tuple[str, list[Event]]], axis: TimeAxis, focus: str | None
) -> list[list[Bar]]:
    """Each row's bars in drawing position, merged into spans until at most MAX_BARS remain."""
    bars = []
    for _, evts in rows:
        starts = axis.x(np.array([e.ts for e in evts])).tolist()
        ends = axis.x(np.array([e.end for e in evts])).tolist()
        bars.append(list(zip(starts, ends, map(color, evts), evts, strict=True)))
    min_width = axis.width / PLOT_PX  # one pixel on the page
    while sum(map(len, bars)) > MAX_BARS and min_width < axis.width:
        bars = [
            merge(row, min_width, focus) for row in bars
        ]  # a big range: spans of the shortest events
        min_width *= 2
    return bars


def _draw_bars(
    panel: Panel, bars: list[list[Bar]], axis: TimeAxis, per_char: float, focus: str | None
) -> list:
    """Draw each row's bars; return the labels they could carry:
    (is the chapter's event, width, x0, x1, y, event, text inside its bar or None)."""
    labels = []
    shortest = axis.width * MIN_WIDTH_FRACTION
    for row, drawn_row in enumerate(bars):
        y = len(bars) - 1 - row
        panel.bars += [(x0, x0 + max(x1 - x0, shortest), y + 0.08, y + 0.92, c)
                       for x0, x1, c, _ in drawn_row]  # fmt: skip
        for x0, x1, _, e in drawn_row:
            text = label(e, x1 - x0, per_char) if e is not None else None
            is_focus = e is not None and e.name == focus
            if text or (is_focus and not any(f for f, *_ in labels)):
                labels.append((is_focus, x1 - x0, x0, x1, y, e, text))
    return labels


def _draw_labels(panel: Panel, labels: list) -> None:
    """Write the chapter's event's label and the widest ones: a million events get a few hundred."""
    kept = set(sorted(range(len(labels)), key=lambda i: labels[i][:2], reverse=True)[:MAX_LABELS])
    for _, _, x0, x1, y, e, text in (labels[i] for i in sorted(kept)):
        shown = visible(text or f" ← {short_name(e.name)}")  # too long for its bar: beside it
        panel.texts.append(
            Text((x0 + x1) / 2 if text else x1, y + 0.5, shown, ha="center" if text else "left",
                 color="#ffffff" if is_copy(e) and text else "#000000")
        )  # fmt: skip


def _draw_gaps(panel: Panel, axis: TimeAxis, n_rows: int) -> None:
    """Shade each idle stretch that was cut short and say above it how long it was."""
    for start, end in axis.gaps:
        x = float(axis.x(start))
        panel.spans.append((x, x + GAP_DRAWN * axis.span, "#eeeeee"))
        panel.texts.append(
            Text(x + GAP_DRAWN * axis.span / 2, n_rows + 0.05, f"+{end - start:,.0f} µs idle",
                 va="bottom", color="#555555", clip=False)
        )  # fmt: skip


def _draw_rows_axis(panel: Panel, rows: list[tuple[str, list[Event]]], axis: TimeAxis) -> None:
    """Row titles on the y axis, and a line between the CPU rows and the GPU streams."""
    n_cpu = sum(1 for _, evts in rows if evts[0].cat not in DEVICE_CATEGORIES)
    if n_cpu < len(rows):
        panel.hlines.append(len(rows) - n_cpu)
    panel.yticks = [(len(rows) - 1 - i + 0.5, visible(t)) for i, (t, _) in enumerate(rows)]
    panel.ylim = (0, len(rows) + (0.6 if axis.gaps else 0))


def _draw_time_axis(panel: Panel, axis: TimeAxis, range_name: str) -> None:
    """The x axis: µs since the range began, ticked on each uncut stretch of time."""
    panel.xlim = (0, axis.width * 1.01)
    for start, end in axis.segments():
        nbins = max(2, int(6 * (end - start) / axis.span))
        for t in tick_values(start - axis.t0, end - axis.t0, nbins):
            if start - axis.t0 <= t <= end - axis.t0:
                panel.xticks.append((float(axis.x(t + axis.t0)), f"{t:,.0f}"))
    panel.xlabel = visible(f"µs since the {range_name} range began")


def copied(e: Event, shape: dict | None) -> str:
    """What a copy event copies, told by its first input's recorded shape against the summary's
    `shape`: the scores [b, h, sq, sk], the K/V cache (decode_repeat_kv's repeated heads), an
    output block and its row statistics (a ring rank's), else the shape itself."""
    dims = (e.args.get("Input Dims") or [None])[0]
    if not dims:
        return "a copy" if e.cat == MEMCPY else "a tensor"  # a memcpy records no shape
    if shape:
        b, h, sq, sk, d = (shape[k] for k in ("batch", "heads", "seq_q", "seq_k", "head_dim"))
        if dims == [b, h, sq, sk]:
            return "the scores"
        if len(dims) >= 4 and dims[0] == b and dims[-2:] == [sk, d] and (len(dims) > 4 or sq != sk):
            return "the K/V cache"
        if len(dims) == 4 and dims[:2] == [b, h] and dims[2] < sq and dims[3] in (d, 1):
            return "an output block" if dims[3] == d else "its row statistics"
    return f"[{', '.join(map(str, dims))}]"


def _legend(
    drawn: list[Event], bars: list[list[Bar]], shape: dict | None = None
) -> list[tuple[str, str]]:
    """Legend entries (color, text) for the colors that need one: copies (named after what they
    copy), merged spans, runtime call kinds."""
    legend = []
    what = list(dict.fromkeys(copied(e, shape) for e in drawn if is_copy(e)))
    if what:
        legend.append((COPY_COLOR, "copy of " + " and ".join(what)))
    if any(c == MIXED_COLOR for row in bars for _, _, c, _ in row):
        legend.append((MIXED_COLOR, "many short events"))
    kinds = {runtime_kind(e.name) for e in drawn if e.cat in RUNTIME_CATEGORIES}
    legend += [(c, text) for k, (c, text) in RUNTIME_COLORS.items() if k in kinds]
    return legend
