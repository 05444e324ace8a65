"""Times with their spread, and what may be said from them: no torch, so the site can read them.

A time is the median of many timed blocks with its interquartile range (the middle half of the
blocks, 25th to 75th percentile) as its interval. A ratio of two times is the ratio of their medians,
with the interval of the widest ratio their intervals allow; a verdict on it is "cannot tell" where
that interval holds the value the claim turns on.
"""

from __future__ import annotations

import dataclasses
import math

from attn.traces.common.units import time_text

INTERVAL = "interquartile range"  # the name the site and timing.json give the interval
FIELDS = ("median_us", "low_us", "high_us", "repeats")


@dataclasses.dataclass(frozen=True)
class Timed:
    """A median time per call and its interval, in µs, over `repeats` timed blocks of `calls`."""

    median_us: float
    low_us: float
    high_us: float
    repeats: int
    calls: int = 0

    def row(self, digits: int = 1) -> dict:
        """The fields timing.json and the sweeps' rows carry."""
        return {
            "median_us": round(self.median_us, digits),
            "low_us": round(self.low_us, digits),
            "high_us": round(self.high_us, digits),
            "repeats": self.repeats,
            "calls": self.calls,
        }


class BadTiming(ValueError):
    """A time whose fields are missing or out of order (low ≤ median ≤ high, all positive)."""


def checked(row: dict, where: str = "a timing row") -> dict:
    """The row, once its median, interval and repeats are there and in order; else BadTiming."""

    def number(value) -> bool:  # true is no time, nor is Infinity
        return (
            not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
        )

    missing = [f for f in FIELDS if not number(row.get(f))]
    if missing:
        shown = ", ".join(f"{f} ({row.get(f)!r})" for f in missing)
        raise BadTiming(f"{where} has no finite number for {shown}")
    low, median, high = row["low_us"], row["median_us"], row["high_us"]
    if not 0 < low <= median <= high:
        raise BadTiming(
            f"{where}: expected 0 < low_us ≤ median_us ≤ high_us, got {low}, {median}, {high}"
        )
    if row["repeats"] < 1:
        raise BadTiming(f"{where}: repeats is {row['repeats']}")
    return row


def ratio(over: dict, under: dict) -> tuple[float, float, float]:
    """over ÷ under: the ratio of the medians, and the lowest and highest ratio their intervals allow."""
    checked(over), checked(under)
    return (
        over["median_us"] / under["median_us"],
        over["low_us"] / under["high_us"],
        over["high_us"] / under["low_us"],
    )


def above(low: float, high: float, limit: float = 1.0) -> bool | None:
    """True when the whole interval is above `limit`, False when it is all below, None (cannot tell)
    when it holds `limit`."""
    if low > limit:
        return True
    if high < limit:
        return False
    return None


def below(low: float, high: float, limit: float = 1.0) -> bool | None:
    """above's mirror: True when the whole interval is under `limit`."""
    verdict = above(low, high, limit)
    return None if verdict is None else not verdict


def faster(a: dict, b: dict) -> bool | None:
    """Whether a takes less time than b: True, False, or None when their intervals overlap."""
    if checked(a)["high_us"] < checked(b)["low_us"]:
        return True
    if a["low_us"] > b["high_us"]:
        return False
    return None


def ratio_text(value: float, low: float, high: float) -> str:
    """'1.23× (1.10–1.35×)'."""
    return f"{value:.2f}× ({low:.2f}–{high:.2f}×)"


NO_SPREAD = "no spread in this set"  # a summary written before its ranges were kept


def profiled(block: dict, key: str = "cpu_time_us") -> dict | None:
    """A profiled pass's time as ratio() reads one: its mean over the profiled ranges (a summary's
    or its backward block's `key`) in place of a median, the least and most of them as its interval;
    the mean alone where the ranges are not kept. None where the pass has no such time."""
    mean = block.get(key)
    if not mean:
        return None
    return spread_of(mean, [r[key] for r in block.get("ranges") or [] if r.get(key)])


def spread_of(mean: float, times: list[float]) -> dict:
    """A mean as ratio() reads a row: the least and most of the times it came from as its interval,
    or the mean alone where fewer than two were kept."""
    spread = len(times) > 1
    low, high = (min(times), max(times)) if spread else (mean, mean)
    return {"median_us": mean, "low_us": min(low, mean), "high_us": max(high, mean),
            "repeats": max(len(times), 1), "spread": spread}  # fmt: skip


def profiled_text(t: dict, digits: int = 2) -> str:
    """'11.04 ms (9.45–14.02 ms)': a profiled mean and the range of its steps, or the mean and
    'no spread in this set'."""
    spread = f"{time_text(t['low_us'], digits)}–{time_text(t['high_us'], digits)}"
    return f"{time_text(t['median_us'], digits)} ({spread if t.get('spread') else NO_SPREAD})"
