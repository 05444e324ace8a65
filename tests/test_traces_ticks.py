"""attn.traces.figures.ticks: the timeline's ticks where matplotlib's MaxNLocator puts them."""

import random

from matplotlib.ticker import MaxNLocator

from attn.traces.figures.ticks import tick_values


def test_ticks_are_matplotlibs_on_any_range():
    rng = random.Random(0)
    ranges = [(0, 0), (5, 5), (0, 1e-3), (0, 77_490.8), (1e6, 1e6 + 3), (1e9, 1e9 + 1e-3)]
    for _ in range(2000):
        start = rng.choice([0.0, rng.uniform(0, 1e6), 10 ** rng.uniform(-3, 9)])
        ranges.append((start, start + 10 ** rng.uniform(-4, 8) * rng.random()))
    for vmin, vmax in ranges:
        for nbins in (2, 3, 6):
            assert (
                tick_values(vmin, vmax, nbins)
                == MaxNLocator(nbins).tick_values(vmin, vmax).tolist()
            )
