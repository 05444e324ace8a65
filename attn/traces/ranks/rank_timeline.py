"""Draw one forward of every rank, stacked on one time axis: what each rank computed, while its
communication was under way, and where it waited on a receive (the lanes of attn.traces.ranks.comm).

The ranks of one machine share its clock, so their ranges line up as they ran: the rank that
computes longest is the one whose compute ends last, and the others wait for it in their next
collective. Ranks of several machines are only as aligned as those machines' clocks.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.patches import Patch

from attn.traces.common.markdown import visible
from attn.traces.figures.plot import figure, save

COMPUTE = ("#4e79a7", "compute")
COMMUNICATION = ("#f28e2b", "communication under way")
WAITING = ("#d62728", "waiting on a receive")
RANGE = "#9e9e9e"
ROW_IN, MAX_ROWS_IN = 0.55, 9.0  # a rank's row, and the most a figure of many ranks grows to


def _bars(ax, spans: list[list[float]], t0: float, y: float, height: float, color: str) -> None:
    ms = [((s - t0) / 1000, (e - s) / 1000) for s, e in spans]
    if ms:
        ax.broken_barh(ms, (y, height), facecolors=color, linewidth=0)


def draw_ranks(lanes: list[tuple[int, dict]], title: str, path: Path) -> Path:
    """lanes: (rank, its lanes) for each rank, drawn top to bottom in that order. The title may
    name anything (a folder, a device): drawn as text, its control characters as escapes."""
    n = len(lanes)
    height = min(MAX_ROWS_IN, 0.9 + ROW_IN * n)
    fig, ax = figure(height)
    t0 = min(lane["start_us"] for _, lane in lanes)
    for i, (_, lane) in enumerate(lanes):
        y = n - 1 - i
        start, end = lane["start_us"], lane["end_us"]
        ax.broken_barh([((start - t0) / 1000, (end - start) / 1000)], (y - 0.36, 0.72),
                       facecolors="none", edgecolors=RANGE, linewidth=0.6)  # fmt: skip
        _bars(ax, lane["compute"], t0, y - 0.05, 0.38, COMPUTE[0])
        _bars(ax, lane["communication"], t0, y - 0.3, 0.2, COMMUNICATION[0])
        _bars(ax, lane["waiting"], t0, y - 0.3, 0.2, WAITING[0])
    ax.set_yticks(range(n), [f"rank {rank}" for rank, _ in reversed(lanes)])
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("ms from the first rank's start of this range")
    # Not parsed as mathtext either: a name with two `$` in it would be a formula, or an error.
    ax.set_title(visible(title), loc="left", fontsize="medium", parse_math=False)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [Patch(color=c, label=label) for c, label in (COMPUTE, COMMUNICATION, WAITING)]
    handles.append(Patch(facecolor="none", edgecolor=RANGE, label="the range (attn_fwd)"))
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False)  # text at 11 px or more
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - 0.35 / height, bottom=0.75 / height)
    save(fig, path)
    return Path(path)
