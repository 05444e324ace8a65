"""What every picture shares: matplotlib without a display, text kept as text, files that only
change when the picture does. Pictures are drawn at the page's width (7.2 in, about 690 px), so 8.5
pt text shows at about 11 px there."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402

WIDTH_IN = 7.2


def figure(height_in: float, font_pt: float = 8.5, **subplots):
    """A figure at the page's width and its axes (plt.subplots' arguments pass through)."""
    plt.rcParams.update(
        # SVG text stays text (searchable, crisp); a fixed salt keeps ids the same from run to run.
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": font_pt}
    )
    return plt.subplots(figsize=(WIDTH_IN, height_in), **subplots)


def save(fig, path: Path, **savefig) -> None:
    """Write the figure (SVG, or PNG by suffix) without a date, so an unchanged picture stays
    unchanged in git, and free it."""
    fig.savefig(path, metadata={"Date": None} if Path(path).suffix == ".svg" else None, **savefig)
    plt.close(fig)
