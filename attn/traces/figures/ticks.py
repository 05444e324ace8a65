"""Tick positions at round numbers, where matplotlib's MaxNLocator (its default steps) puts them,
without importing matplotlib: the timeline is written as SVG text, and importing matplotlib took
longer than drawing."""

from __future__ import annotations

import math

# MaxNLocator's default steps (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10), a tenth of them below, and 15.
STEPS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15)
MIN_TICKS = 2


def _nonsingular(vmin: float, vmax: float) -> tuple[float, float]:
    """A range with room for ticks: one too narrow to tell its ends apart is widened a little."""
    expander, tiny = 1e-13, 1e-14
    if not (math.isfinite(vmin) and math.isfinite(vmax)):
        return -expander, expander
    vmin, vmax = sorted((float(vmin), float(vmax)))
    biggest = max(abs(vmin), abs(vmax))
    if biggest < (1e6 / tiny) * 2.2250738585072014e-308 or vmax == vmin == 0:
        return -expander, expander
    if vmax - vmin <= biggest * tiny:
        return vmin - expander * abs(vmin), vmax + expander * abs(vmax)
    return vmin, vmax


def _scale_range(vmin: float, vmax: float, n: int) -> tuple[float, float]:
    """(the power of ten the steps are counted in, an offset for a range far from zero)."""
    span, middle = abs(vmax - vmin), (vmax + vmin) / 2
    offset = 0.0
    if abs(middle) / span >= 100:
        offset = math.copysign(10 ** (math.log10(abs(middle)) // 1), middle)
    return 10 ** (math.log10(span / n) // 1), offset


def _close_to(ratio: float, edge: float, step: float, offset: float) -> bool:
    """Whether a multiple of `step` is as good as on `edge` (more slack far from zero)."""
    tol = 1e-10
    if offset > 0:
        tol = min(0.4999, max(1e-10, 10 ** (math.log10(offset / step) - 12)))
    return abs(ratio - edge) < tol


def tick_values(vmin: float, vmax: float, nbins: int) -> list[float]:
    """At most nbins + 1 ticks at multiples of a step from STEPS times a power of ten, spanning the
    range (the first and last may fall just outside it), as MaxNLocator(nbins).tick_values."""
    vmin, vmax = _nonsingular(vmin, vmax)
    scale, offset = _scale_range(vmin, vmax, nbins)
    low_v, high_v = vmin - offset, vmax - offset
    steps = [s * scale for s in STEPS]
    raw_step = (high_v - low_v) / nbins
    first_large = next((i for i, s in enumerate(steps) if s >= raw_step), len(steps) - 1)
    ticks: list[float] = []
    for step in steps[first_large::-1]:  # the smallest step that is large enough, else smaller
        best_vmin = (low_v // step) * step
        d, m = divmod(low_v - best_vmin, step)
        low = d + 1 if _close_to(m / step, 1, step, abs(offset)) else d
        d, m = divmod(high_v - best_vmin, step)
        high = d if _close_to(m / step, 0, step, abs(offset)) else d + 1
        ticks = [(low + i) * step + best_vmin for i in range(math.ceil(high + 1 - low))]
        if sum(low_v <= t <= high_v for t in ticks) >= MIN_TICKS:
            break
    return [t + offset for t in ticks]
