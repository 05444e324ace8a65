"""What every picture shares: matplotlib without a display, text kept as text, files that only
change when the picture does. Pictures are drawn at the page's width (7.2 in, about 690 px), so 8.5
pt text shows at about 11 px there."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure  # not pyplot: no backend or figure manager to load
from matplotlib.ticker import FuncFormatter, NullFormatter

# The page's width, shared with the pictures written without matplotlib (attn.traces.figures.svg).
from attn.traces.figures.svg import WIDTH_IN


def figure(height_in: float, font_pt: float = 8.5, width_in: float = WIDTH_IN, **subplots):
    """A figure at the page's width (or `width_in`) and its axes (Figure.subplots' arguments pass
    through)."""
    matplotlib.rcParams.update(
        # SVG text stays text (searchable, crisp); a fixed salt keeps ids the same from run to run.
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": font_pt}
    )
    fig = Figure(figsize=(width_in, height_in))
    return fig, fig.subplots(**subplots)


def save(fig: Figure, path: Path, **savefig) -> None:
    """Write the figure (SVG, or PNG by suffix) without a date, so an unchanged picture stays
    unchanged in git."""
    fig.savefig(path, metadata={"Date": None} if Path(path).suffix == ".svg" else None, **savefig)


def size_text(n: float) -> str:
    """512, 1k, 32k: a sequence length as a tick label."""
    return f"{n / 1024:g}k" if n >= 1024 else f"{n:g}"


def number_text(y: float) -> str:
    """0.05, 20, 1,000: a value as a tick label."""
    return f"{y:,.0f}" if y >= 1000 else f"{y:g}"


def plain_log_ticks(ax) -> None:
    """Tick labels of a log-log panel (sequence lengths on x) as plain numbers in the text's size:
    matplotlib's powers (2^9, 10^1) put their digits in superscripts drawn at 70% of it. Between
    the decades of an axis that spans few of them, 2 and 5 are labelled too."""

    def minor(y: float, _) -> str:
        lo, hi = ax.get_ylim()
        lead = round(y / 10 ** math.floor(math.log10(y)), 6)
        return number_text(y) if hi / lo <= 100 and lead in (2, 5) else ""

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_text(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: number_text(y)))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
