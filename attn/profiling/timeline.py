"""Draw one forward of a trace as a timeline picture: the CPU lane and one lane per GPU stream."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from attn.profiling.trace import LAUNCH_CATEGORIES, Event, Forward, depths, forwards  # noqa: E402

COPY_COLOR = "#d62728"  # clones, copies and Memcpys: what the naive-vs-in-place lesson is about
RANGE_COLOR = "#9e9e9e"
LAUNCH_COLOR = "#ff9f1c"
PALETTE = ["#4e79a7", "#59a14f", "#76b7b2", "#b07aa1", "#9c755f", "#edc948", "#86bcb6", "#8cd17d"]
ROW_HEIGHT_IN = 0.34
MIN_WIDTH_FRACTION = 0.002  # like Perfetto's one-pixel minimum, so a short copy stays visible


def is_copy(e: Event) -> bool:
    return e.name in ("aten::clone", "aten::copy_") or e.cat == "gpu_memcpy"


def color(e: Event) -> str:
    if is_copy(e):
        return COPY_COLOR
    if e.cat == "user_annotation":
        return RANGE_COLOR
    if e.cat in LAUNCH_CATEGORIES:
        return LAUNCH_COLOR
    return PALETTE[zlib.crc32(e.name.encode()) % len(PALETTE)]


def short_name(name: str) -> str:
    """`void at::native::foo_kernel<...>(...)` -> `foo_kernel`; `aten::mul` -> `mul`."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return re.split(r"[<(]", name)[0].strip().split("::")[-1]


def label(e: Event, width_us: float, us_per_char: float) -> str | None:
    """The event's name, shortened or cut so it fits inside its bar, or None."""
    fits = int(width_us / us_per_char)
    for text in (e.name, short_name(e.name)):
        if len(text) <= fits:
            return text
    short = short_name(e.name)
    return short[: fits - 1] + "…" if fits >= 6 else None


def lanes(forward: Forward) -> list[tuple[str, list[Event]]]:
    """(row title, events) from top to bottom: CPU rows by nesting depth, then each GPU stream."""
    cpu = [forward.range, *forward.cpu_events]
    rows: dict[int, list[Event]] = {}
    for e, d in zip(cpu, depths(cpu), strict=True):
        rows.setdefault(d, []).append(e)
    result = [("CPU" if d == 0 else "", rows[d]) for d in sorted(rows)]
    streams: dict[tuple, list[Event]] = {}
    for e in forward.device_events:
        streams.setdefault((e.pid, e.tid), []).append(e)
    for (pid, tid), evts in sorted(streams.items(), key=lambda kv: str(kv[0])):
        result.append((f"GPU {pid} stream {tid}", evts))
    return result


def draw_timeline(trace: dict, title: str, path: Path, forward_index: int | None = None) -> None:
    """Write a picture (SVG, or PNG by suffix) of one `attn_fwd` forward (the middle one by default) of the trace."""
    fwds = forwards(trace)
    forward = fwds[len(fwds) // 2 if forward_index is None else forward_index]
    rows = lanes(forward)
    t0 = min([forward.range.ts] + [e.ts for e in forward.device_events])
    t1 = max([forward.range.end] + [e.end for e in forward.device_events])
    span = max(t1 - t0, 1e-3)

    plt.rcParams.update(
        {"svg.fonttype": "none", "svg.hashsalt": "attention-profiled", "font.size": 8}
    )
    fig_w = 11.0
    fig, ax = plt.subplots(figsize=(fig_w, 1.2 + ROW_HEIGHT_IN * len(rows)))
    us_per_char = span / (fig_w * 0.85 * 72 / 4.6)  # about 4.6 pt per character at 7 pt

    for row, (_, evts) in enumerate(rows):
        y = len(rows) - 1 - row
        for e in evts:
            width = max(e.dur, span * MIN_WIDTH_FRACTION)
            ax.broken_barh(
                [(e.ts - t0, width)],
                (y + 0.1, 0.8),
                facecolors=color(e),
                edgecolor="white",
                linewidth=0.3,
            )
            text = label(e, e.dur, us_per_char)
            if text:
                ax.text(
                    e.ts - t0 + e.dur / 2,
                    y + 0.5,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if is_copy(e) else "black",
                    clip_on=True,
                )

    n_cpu = sum(1 for _, evts in rows if evts[0].cat not in ("kernel", "gpu_memcpy", "gpu_memset"))
    if n_cpu < len(rows):
        ax.axhline(len(rows) - n_cpu, color="black", linewidth=0.8)
    ax.set_yticks([len(rows) - 1 - i + 0.5 for i in range(len(rows))], [t for t, _ in rows])
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(0, len(rows))
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel("microseconds since the forward started")
    ax.set_title(title, loc="left", fontsize=10)
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    legend = [Patch(color=COPY_COLOR, label="clone / copy_ / Memcpy")]
    if forward.device_events:
        legend.append(Patch(color=LAUNCH_COLOR, label="kernel launch (CPU side)"))
    ax.legend(
        handles=legend,
        loc="upper right",
        bbox_to_anchor=(1.0, 1.0 + 0.5 / len(rows)),
        fontsize=7,
        frameon=False,
        ncol=len(legend),
    )
    fig.tight_layout()
    # No date in the file, so an unchanged picture stays unchanged in git.
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None, dpi=110)
    plt.close(fig)
