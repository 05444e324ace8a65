"""What every picture shares: matplotlib without a display, text kept as text, files that only
change when the picture does. Pictures are drawn at the page's width (7.2 in, about 690 px), so 8.5
pt text shows at about 11 px there."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure  # not pyplot: no backend or figure manager to load

WIDTH_IN = 7.2


def figure(height_in: float, font_pt: float = 8.5, **subplots):
    """A figure at the page's width and its axes (Figure.subplots' arguments pass through)."""
    matplotlib.rcParams.update(
        # SVG text stays text (searchable, crisp); a fixed salt keeps ids the same from run to run.
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": font_pt}
    )
    fig = Figure(figsize=(WIDTH_IN, height_in))
    return fig, fig.subplots(**subplots)


def save(fig: Figure, path: Path, **savefig) -> None:
    """Write the figure (SVG, or PNG by suffix) without a date, so an unchanged picture stays
    unchanged in git."""
    fig.savefig(path, metadata={"Date": None} if Path(path).suffix == ".svg" else None, **savefig)
