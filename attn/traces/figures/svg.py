"""One panel of a picture (bars, lines, text, ticks, a legend below) written as SVG text, laid out
and drawn as matplotlib draws it with attn.traces.figures.plot's settings, without importing matplotlib:
for `analyze` on a trace of a hundred thousand events, importing and drawing with it took longer
than reading the trace.

Text is DejaVu Sans at 8.5 pt (a 10 pt title at the left) and stays text. The panel's box is where
matplotlib 3.11's tight_layout puts it; the text metrics below were read off matplotlib's own
measures of this font (tight_layout measures with Agg at 100 dpi, whose widths are whole pixels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

FONT = (
    "'DejaVu Sans', 'Bitstream Vera Sans', 'Computer Modern Sans Serif', 'Lucida Grande', "
    "'Verdana', 'Geneva', 'Lucid', 'Arial', 'Helvetica', 'Avant Garde', sans-serif"
)
WIDTH_IN = 7.2  # the page's width: pictures are drawn at it, so their text shows at its size
FONT_PT, TITLE_PT = 8.5, 10.0
# DejaVu Sans's advance widths, in 1/2048 of the font size; other characters take a digit's.
ADVANCES = dict(
    zip(
        " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`"
        "abcdefghijklmnopqrstuvwxyz{|}~µ…←",
        (651, 821, 942, 1716, 1303, 1946, 1597, 563, 799, 799, 1024, 1716, 651, 739, 651, 690,
         *[1303] * 10, 690, 690, 1716, 1716, 1716, 1087, 2048, 1401, 1405, 1430, 1577, 1294,
         1178, 1587, 1540, 604, 604, 1343, 1141, 1767, 1532, 1612, 1235, 1612, 1423, 1300, 1251,
         1499, 1401, 2025, 1403, 1251, 1403, 799, 690, 799, 1716, 1024, 1024, 1255, 1300, 1126,
         1300, 1260, 721, 1300, 1298, 569, 569, 1186, 569, 1995, 1298, 1253, 1300, 1300, 842,
         1067, 803, 1298, 1212, 1675, 1212, 1212, 1075, 1303, 690, 1303, 1716, 1303, 2048, 1716),
        strict=True,
    )
)  # fmt: skip
ASCENT, DESCENT = 0.759765625, 0.2403125  # of a line of text as drawn, in font sizes
# As tight_layout measures (pt): the title's ascent, a tick label's and the axis label's height.
TITLE_ASCENT, TICK_LABEL_HEIGHT, XLABEL_HEIGHT = 7.92, 8.522, 9.36
PAD = 1.08 * FONT_PT  # tight_layout's margin around everything
TICK, TICK_PAD, LABEL_PAD, TITLE_PAD = 3.5, 3.5, 4.0, 6.0  # matplotlib's defaults, pt
DEFAULT_BOX = (0.125, 0.9)  # where the panel's sides stand before tight_layout moves them
# The legend's spacing, in font sizes: a patch 2 wide and 0.7 high, 0.8 to its text, 2 between
# columns, 0.5 between rows, 0.9 from the figure's corner.
HANDLE_W, HANDLE_H, HANDLE_GAP, COLUMN_GAP, ROW_GAP, CORNER = 2.0, 0.7, 0.8, 2.0, 0.5, 0.9


def text_width(text: str, size: float = FONT_PT, layout: bool = False) -> float:
    """The text's width in pt, as drawn, or (`layout`) as tight_layout measures it: each
    character in whole pixels at 100 dpi, the autohinter rounding up from 0.43 of one."""
    units = [ADVANCES.get(c, 1303) for c in text]
    if not layout:
        return sum(units) * size / 2048
    return sum(math.floor(u * size / 72 * 100 / 2048 + 0.57) for u in units) * 0.72


def number(x: float) -> str:
    """A coordinate as SVG text: six decimals at most, as matplotlib writes them."""
    return f"{x:f}".rstrip("0").rstrip(".")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass
class Text:
    x: float  # data coordinates
    y: float
    text: str
    ha: str = "center"  # left, center, right
    va: str = "center"  # center, bottom
    color: str = "#000000"
    clip: bool = True
    size: float = FONT_PT


@dataclass
class Panel:
    """One axes of a figure, in data coordinates: build it, then `write` it."""

    width_in: float
    height_in: float
    xlim: tuple[float, float] = (0.0, 1.0)
    ylim: tuple[float, float] = (0.0, 1.0)
    title: str = ""
    xlabel: str = ""
    xticks: list[tuple[float, str]] = field(default_factory=list)
    yticks: list[tuple[float, str]] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (color, label)
    legend_columns: int = 1
    legend_share: float = 0.0  # of the height, kept under the panel for the legend
    xgrid: bool = False  # a faint line across the panel at each x tick
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # x0, x1, color
    bars: list[tuple[float, float, float, float, str]] = field(default_factory=list)
    hlines: list[float] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)

    def box(self) -> tuple[float, float, float, float]:
        """(left, right, top, bottom) of the panel in pt from the figure's top left, as
        tight_layout places it: room for the tick labels, title and axis label, plus PAD."""
        width, height = self.width_in * 72, self.height_in * 72
        x0, x1 = (side * width for side in DEFAULT_BOX)  # measured where matplotlib measures
        left = max((text_width(t, layout=True) for _, t in self.yticks if t), default=0)
        left, right = left + TICK_PAD, 0.0
        for x, t, ha in [(x, t, "center") for x, t in self.xticks] + [
            (t.x, t.text, t.ha) for t in self.texts if not t.clip
        ]:
            at = x0 + (x - self.xlim[0]) / (self.xlim[1] - self.xlim[0]) * (x1 - x0)
            w = text_width(t, layout=True)
            start = at - {"left": 0, "center": w / 2, "right": w}[ha]
            left, right = max(left, x0 - start), max(right, start + w - x1)
        top = TITLE_PAD + TITLE_ASCENT if self.title else 0.0
        bottom = TICK + TICK_PAD + TICK_LABEL_HEIGHT if self.xticks else 0.0
        bottom += LABEL_PAD + XLABEL_HEIGHT if self.xlabel else 0.0
        return (
            left + PAD,
            width - right - PAD,
            top + PAD,
            height - bottom - PAD - self.legend_share * height,
        )

    def write(self, path: Path) -> None:
        """Write the panel as an SVG file."""
        Path(path).write_text(self.svg(), encoding="utf-8")

    def svg(self) -> str:
        """The panel as an SVG document."""
        box = self.box()
        width, height = self.width_in * 72, self.height_in * 72
        head = [
            '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{number(width)}pt" '
            f'height="{number(height)}pt" viewBox="0 0 {number(width)} {number(height)}" '
            'version="1.1">\n'
            ' <defs>\n  <style type="text/css">*{stroke-linejoin: round; stroke-linecap: butt}'
            f" text{{font-family: {FONT}; font-size: {number(FONT_PT)}px}}</style>\n"
            f'  <clipPath id="panel"><rect x="{number(box[0])}" y="{number(box[2])}" '
            f'width="{number(box[1] - box[0])}" height="{number(box[3] - box[2])}"/></clipPath>\n'
            " </defs>\n"
            f' <rect width="{number(width)}" height="{number(height)}" style="fill: #ffffff"/>\n'
        ]
        body = self._shapes(box) + self._axes(box) + self._texts(box) + self._legend(height)
        return "".join(head + body) + "</svg>\n"

    def _to(self, box, x: float, y: float) -> tuple[float, float]:
        """Data coordinates to pt on the page."""
        (x_lo, x_hi), (y_lo, y_hi) = self.xlim, self.ylim
        left, right, top, bottom = box
        return (
            left + (x - x_lo) / (x_hi - x_lo) * (right - left),
            bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top),
        )

    def _shapes(self, box) -> list[str]:
        """Shaded spans, then bars, then the grid, all clipped to the panel (matplotlib's order)."""
        out = [' <g clip-path="url(#panel)">\n']
        for x0, x1, color in self.spans:
            (a, _), (b, _) = self._to(box, x0, 0), self._to(box, x1, 0)
            out.append(
                f'  <rect x="{number(a)}" y="{number(box[2])}" width="{number(b - a)}" '
                f'height="{number(box[3] - box[2])}" style="fill: {color}; stroke: {color}; '
                'stroke-linejoin: miter"/>\n'
            )
        out.append('  <g style="stroke: #ffffff; stroke-width: 0.3">\n')
        for x0, x1, y0, y1, color in self.bars:
            (a, top), (b, bottom) = self._to(box, x0, y1), self._to(box, x1, y0)
            out.append(
                f'   <rect x="{number(a)}" y="{number(top)}" width="{number(b - a)}" '
                f'height="{number(bottom - top)}" style="fill: {color}"/>\n'
            )
        out.append("  </g>\n")
        for x, _ in self.xticks if self.xgrid else []:  # over the bars, under lines and text
            at = number(self._to(box, x, 0)[0])
            out.append(
                f'  <path d="M {at} {number(box[3])} L {at} {number(box[2])}" style="fill: none; '
                "stroke: #b0b0b0; stroke-opacity: 0.5; stroke-width: 0.3; "
                'stroke-linecap: square"/>\n'
            )
        return [*out, " </g>\n"]

    def _axes(self, box) -> list[str]:
        """Ticks and their labels, the axis label, the lines across, and the bottom spine."""
        left, right, top, bottom = box
        out = []
        for x, label in self.xticks:
            at = number(self._to(box, x, 0)[0])
            out.append(
                f' <path d="M {at} {number(bottom)} L {at} {number(bottom + TICK)}" '
                'style="stroke: #000000; stroke-width: 0.8"/>\n'
            )
            baseline = bottom + TICK + TICK_PAD + ASCENT * FONT_PT
            out.append(_text(self._to(box, x, 0)[0], baseline, label, "middle"))
        if self.xlabel:
            below = bottom + TICK + TICK_PAD + (ASCENT + DESCENT) * FONT_PT + LABEL_PAD
            out.append(_text((left + right) / 2, below + ASCENT * FONT_PT, self.xlabel, "middle"))
        for y, label in self.yticks:  # centred on their baseline's half height, as matplotlib
            baseline = self._to(box, 0, y)[1] + ASCENT * FONT_PT / 2
            out.append(_text(left - TICK_PAD, baseline, label, "end") if label else "")
        for y in self.hlines:
            at = number(self._to(box, 0, y)[1])
            out.append(
                f' <path d="M {number(left)} {at} L {number(right)} {at}" clip-path="url(#panel)" '
                'style="fill: none; stroke: #000000; stroke-width: 0.8; stroke-linecap: square"/>\n'
            )
        out.append(
            f' <path d="M {number(left)} {number(bottom)} L {number(right)} {number(bottom)}" '
            'style="fill: none; stroke: #000000; stroke-width: 0.8; stroke-linejoin: miter; '
            'stroke-linecap: square"/>\n'
        )
        return out

    def _texts(self, box) -> list[str]:
        """The texts in the panel (those clipped to it kept inside), then the title."""
        out = []
        for t in self.texts:
            x, y = self._to(box, t.x, t.y)
            if t.va == "center":  # the middle of the line's height, descent included
                y += (ASCENT - DESCENT) * t.size / 2
            else:  # bottom: the descent above y
                y -= DESCENT * t.size
            anchor = {"left": "start", "center": "middle", "right": "end"}[t.ha]
            out.append(_text(x, y, t.text, anchor, t.color, t.size, clip=t.clip))
        if self.title:
            out.append(_text(box[0], box[2] - TITLE_PAD, self.title, "start", size=TITLE_PT))
        return out

    def _legend(self, height: float) -> list[str]:
        """The legend at the bottom left, its entries in columns filled top to bottom."""
        if not self.legend:
            return []
        columns = min(self.legend_columns, len(self.legend))
        rows, longer = divmod(len(self.legend), columns)
        sizes = [rows + 1] * longer + [rows] * (columns - longer)
        pitch = (ASCENT + DESCENT + ROW_GAP) * FONT_PT
        first = height - CORNER * FONT_PT - DESCENT * FONT_PT - (max(sizes) - 1) * pitch
        out, x, entries = [], CORNER * FONT_PT, iter(self.legend)
        for size in sizes:
            column = [next(entries) for _ in range(size)]
            for row, (color, label) in enumerate(column):
                y = first + row * pitch
                out.append(
                    f' <path d="M {number(x)} {number(y)} h {number(HANDLE_W * FONT_PT)} '
                    f'v {number(-HANDLE_H * FONT_PT)} h {number(-HANDLE_W * FONT_PT)} z" '
                    f'style="fill: {color}; stroke: {color}; stroke-linejoin: miter"/>\n'
                )
                out.append(_text(x + (HANDLE_W + HANDLE_GAP) * FONT_PT, y, label, "start"))
            widest = max(text_width(label) for _, label in column)
            x += (HANDLE_W + HANDLE_GAP + COLUMN_GAP) * FONT_PT + widest
        return out


def _text(
    x: float,
    y: float,
    text: str,
    anchor: str,
    color: str = "#000000",
    size: float = FONT_PT,
    clip: bool = False,
) -> str:
    """A <text> at its baseline; the font is the style sheet's."""
    style = f"text-anchor: {anchor}"
    style += f"; font-size: {number(size)}px" if size != FONT_PT else ""
    style += f"; fill: {color}" if color != "#000000" else ""
    clipped = ' clip-path="url(#panel)"' if clip else ""
    return (
        f' <text x="{number(x)}" y="{number(y)}"{clipped} style="{style}">{escape(text)}</text>\n'
    )
