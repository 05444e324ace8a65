"""attn/traces/claims/step_checks.py: a training step profiled (forward plus backward) against the same step
timed whole, on made-up summaries and timing rows."""

from attn import specs
from attn.traces.claims.benchmark_checks import BenchmarkEvidence
from attn.traces.claims.step_checks import (
    BUSY,
    WHY_LONGER,
    WHY_NOT,
    profiled_over_timed,
    step_rows,
)
from attn.traces.common import intervals


def summary(forwards: tuple[float, ...], backwards: tuple[float, ...], **more) -> dict:
    """A training step's summary: each profiled step's forward and backward CPU time, in ms."""
    ranges = lambda times: [{"cpu_time_us": t * 1000} for t in times]  # noqa: E731
    mean = lambda times: 1000 * sum(times) / len(times)  # noqa: E731
    back = {"cpu_time_us": mean(backwards), "ranges": ranges(backwards)}
    return {"available": True, "cpu_time_us": mean(forwards), "ranges": ranges(forwards),
            "backward": back, **more}  # fmt: skip


def timed(median: float, low: float, high: float) -> dict:
    """A timing.json row of a whole step, in ms."""
    return {"median_us": median * 1000, "low_us": low * 1000, "high_us": high * 1000,
            "repeats": 10, "calls": 10}  # fmt: skip


SUMMARIES = {
    "train_a": summary((10.0, 12.0, 14.0), (90.0, 100.0, 110.0)),  # 100 to 124 ms profiled
    "train_b": summary((10.0, 10.0, 10.0), (40.0, 45.0, 50.0)),  # 50 to 60 ms profiled
    "train_c": summary((5.0, 5.0, 5.0), (20.0, 20.0, 20.0)),  # 25 ms profiled
    "train_off": {"available": False},
}


def check(timing: dict) -> tuple[bool | None, str]:
    return profiled_over_timed(BenchmarkEvidence("train_a", step_rows(SUMMARIES, timing)))


def test_every_step_longer_profiled_holds_and_says_why():
    timing = {
        "train_a": timed(90, 85, 95),
        "train_b": timed(45, 44, 46),
        "train_c": timed(20, 19, 21),
    }
    holds, observed = check(timing)
    assert holds is True
    assert observed == (
        "longer at 3 of 3 steps: train_a: profiled 112.00 ms (100.00 ms–124.00 ms), timed "
        "90.00 ms (85.00 ms–95.00 ms); train_b: profiled 55.00 ms (50.00 ms–60.00 ms), timed "
        "45.00 ms (44.00 ms–46.00 ms); train_c: profiled 25.00 ms (25.00 ms–25.00 ms), timed "
        f"20.00 ms (19.00 ms–21.00 ms). Why: {WHY_LONGER}."
    )


def test_a_step_whose_spreads_overlap_cannot_tell_and_the_reason_changes():
    timing = {"train_a": timed(110, 105, 115), "train_b": timed(45, 44, 46)}
    holds, observed = check(timing)
    assert holds is None
    assert observed.startswith("longer at 1 of 2 steps, cannot tell at 1 (train_a): ")
    assert observed.endswith(f"Why: where longer, {WHY_LONGER}; where not, {WHY_NOT}.")


def test_a_step_longer_timed_than_profiled_fails_the_claim():
    holds, observed = check({"train_c": timed(30, 29, 31)})
    assert holds is False
    assert observed.startswith("longer at 0 of 1 steps, shorter at 1 (train_c): ")
    assert observed.endswith(f"Why: {WHY_NOT}.")  # no step was longer: no profiler's cost to name


def test_only_steps_both_profiled_and_timed_count():
    assert step_rows(SUMMARIES, {"train_off": timed(1, 1, 1), "forward": timed(1, 1, 1)}) == []
    assert check({}) == (None, "no training step here was both profiled and timed")


def test_a_summary_without_its_ranges_shows_no_spread():
    old = {"train_a": {k: v for k, v in SUMMARIES["train_a"].items() if k != "ranges"}}
    (row,) = step_rows(old, {"train_a": timed(90, 85, 95)})
    assert row["profiled"]["spread"] is False
    assert intervals.profiled_text(row["profiled"]) == "112.00 ms (no spread in this set)"
    assert intervals.profiled({"cpu_time_us": None}) is None


def test_the_claim_is_train_naives_and_reads_the_timing_pass():
    claim = specs.claim("train_naive", "profiled-over-timed")
    assert claim.figure == "timing" and claim.device_type == "cpu"


def test_a_step_timed_longer_on_a_busy_set_cannot_tell():
    rows = step_rows(SUMMARIES, {"train_c": timed(30, 29, 31)}, busy=True)
    holds, observed = profiled_over_timed(BenchmarkEvidence("train_a", rows))
    assert holds is None
    assert observed.startswith("longer at 0 of 1 steps, cannot tell at 1 (train_c): ")
    assert observed.endswith(f"Why: {WHY_NOT}; {BUSY}.")


def test_a_busy_set_still_tells_a_step_profiled_longer():
    rows = step_rows(SUMMARIES, {"train_a": timed(90, 85, 95)}, busy=True)
    holds, observed = profiled_over_timed(BenchmarkEvidence("train_a", rows))
    assert holds is True and BUSY not in observed
