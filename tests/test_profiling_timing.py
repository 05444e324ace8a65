"""The timing pass's contract: its fields, their order, interleaving, and "cannot tell" on overlap.

Nothing here depends on how fast anything ran: calls are counted, not timed, and the intervals
whose verdicts are checked are written by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attn
from attn.profiling.config import ProfileConfig
from attn.profiling.environment import cpu_model, cpu_slug, hardware_slug
from attn.profiling.machine_load import (
    _ended_children,
    adopting_orphans,
    busy_line,
    load_over,
    own_cpu_seconds,
)
from attn.profiling.run import finish_set, profile_variant
from attn.profiling.timing import measure
from attn.profiling.timing_pass import SCORE_CLONE, main, run
from attn.traces.common import artifacts, intervals

TINY = ProfileConfig(batch=1, heads=2, seq_q=32, seq_k=32, head_dim=16)


def t(median: float, low: float, high: float) -> dict:
    return {"median_us": median, "low_us": low, "high_us": high, "repeats": 9}


def test_measure_interleaves_the_calls_round_by_round():
    order: list[str] = []  # each change of call, not each call: a block makes many calls

    def call(label):
        def fn():
            if not order or order[-1] != label:
                order.append(label)

        return fn

    found = measure(
        {"a": call("a"), "b": call("b")}, min_rounds=4, max_rounds=4, budget_s=0, block_s=1e-4
    )
    # warm-up a, b, then four rounds of a's block and b's block: a and b take turns throughout
    assert order == ["a", "b"] * 5
    for row in found.values():
        assert 0 < row.low_us <= row.median_us <= row.high_us
        assert row.repeats >= 4 and row.calls >= row.repeats


def test_measure_stops_at_max_rounds_whatever_the_budget():
    calls = []
    found = measure(
        {"a": lambda: calls.append(1)}, min_rounds=2, max_rounds=3, budget_s=1e9, precision=0.0
    )
    assert found["a"].repeats >= 3  # three rounds, each one block or more, and no more rounds


def test_timing_pass_writes_every_variant_with_its_interval_and_the_load():
    result = run(TINY, ["naive", "inplace", "decode_repeat_kv", "train_naive"], 0.1, lambda _: 0)
    rows = {r["variant"]: r for r in result["rows"]}
    assert set(rows) == {"naive", "inplace", "decode_repeat_kv", "train_naive"}
    for row in rows.values():
        assert intervals.checked(row) is row  # fields there, low <= median <= high
        assert row["repeats"] >= 1 and row["shape"]["batch"] >= 1
    assert rows["train_naive"]["what"] == "training step" and rows["naive"]["what"] == "forward"
    assert rows["decode_repeat_kv"]["shape"]["seq_q"] == 1  # timed at its own (decode) shape
    clone = result[SCORE_CLONE]
    assert clone["bytes"] == 1 * 2 * 32 * 32 * 4 and intervals.checked(clone)
    assert result["interval"] == intervals.INTERVAL
    assert set(result["load"]) >= {"load_avg_before", "load_avg_after", "steal_share", "busy"}


def test_timing_pass_main_writes_timing_json_into_the_set(tmp_path, monkeypatch):
    monkeypatch.setattr("attn.profiling.timing_pass.default_config", lambda device: TINY)
    monkeypatch.setattr("attn.profiling.timing_pass.specs.names", lambda: ["naive", "sdpa_math"])
    assert main(["--out", str(tmp_path), "--device", "cpu", "--budget", "0.05"]) == 0
    (folder,) = tmp_path.iterdir()
    assert folder.name.startswith("cpu-") or folder.name == "cpu"
    data = json.loads((folder / artifacts.TIMING).read_text())
    assert [r["variant"] for r in data["rows"]] == ["naive", "sdpa_math"]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"median_us": 2.0, "low_us": 1.0, "repeats": 3}, "no finite number for high_us"),
        (t(2.0, 3.0, 4.0), "low_us ≤ median_us ≤ high_us"),
        (t(2.0, 1.0, 1.5), "low_us ≤ median_us ≤ high_us"),
        (t(0.0, 0.0, 0.0), "low_us ≤ median_us ≤ high_us"),
        ({**t(2.0, 1.0, 3.0), "repeats": 0}, "repeats is 0"),
    ],
)
def test_a_timing_row_out_of_order_is_refused_in_one_line(row, says):
    with pytest.raises(intervals.BadTiming, match=says):
        intervals.checked(row)


def test_speedup_is_the_ratio_of_medians_with_the_widest_interval_the_ranges_allow():
    value, low, high = intervals.ratio(t(100.0, 90.0, 110.0), t(50.0, 45.0, 55.0))
    assert value == 2.0
    assert low == pytest.approx(90 / 55) and high == pytest.approx(110 / 45)
    assert intervals.above(low, high) is True


def test_overlapping_intervals_cannot_tell():
    naive, inplace = t(100.0, 90.0, 110.0), t(95.0, 85.0, 105.0)
    assert intervals.faster(inplace, naive) is None
    assert intervals.above(*intervals.ratio(naive, inplace)[1:]) is None
    assert intervals.faster(t(50.0, 45.0, 55.0), naive) is True
    assert intervals.faster(naive, t(50.0, 45.0, 55.0)) is False
    assert intervals.below(0.8, 1.1, 1.0) is None and intervals.below(0.5, 0.9) is True


def test_cpu_sets_are_named_by_the_cpu_model():
    assert cpu_slug("AMD EPYC") == "cpu-amd-epyc"
    assert (
        cpu_slug("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz") == "cpu-intel-xeon-platinum-8480"
    )
    assert cpu_slug("AMD EPYC 9654 96-Core Processor") == "cpu-amd-epyc-9654"
    assert cpu_slug("") == "cpu"


CPUINFO = (
    "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
)


@pytest.mark.parametrize(
    "name, family, model, slug",
    [  # a cloud VM's bare name: two generations of EPYC made one set, each overwriting the other
        ("AMD EPYC", 25, 17, "cpu-amd-epyc-family-25-model-17"),  # Zen 4
        ("AMD EPYC", 26, 2, "cpu-amd-epyc-family-26-model-2"),  # Zen 5
        ("Intel(R) Xeon(R) CPU @ 2.20GHz", 6, 85, "cpu-intel-xeon-family-6-model-85"),
        ("AMD EPYC 9654 96-Core Processor", 25, 17, "cpu-amd-epyc-9654"),  # the name tells it
    ],
)
def test_a_cpu_name_that_tells_no_generation_gets_its_family_and_model(name, family, model, slug):
    first = CPUINFO.format(n=0, family=family, model=model) + f"model name\t: {name}\n"
    other = CPUINFO.format(n=1, family=1, model=1) + "model name\t: other\n"
    assert cpu_slug(cpu_model(f"{first}\n{other}")) == slug


def _sample(total, idle, steal, own_cpu_s, at, load_avg=(0.1, 0.1, 0.1)):
    return {"load_avg": list(load_avg), "ticks": {"total": total, "idle": idle, "steal": steal},
            "own_cpu_s": own_cpu_s, "at": at}  # fmt: skip


def test_a_run_is_busy_by_other_work_not_by_its_own_load(monkeypatch):
    """Two cores, 5 s: the machine worked 40% of its CPU time, stolen time aside."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    before = _sample(1000, 800, 0, own_cpu_s=0.0, at=0.0)
    after = dict(total=2000, idle=1300, steal=100, at=5.0, load_avg=(2.5, 1.0, 0.5))
    others = load_over(before, _sample(**after, own_cpu_s=1.0))  # the run used 10% of it
    assert others["steal_share"] == 0.1 and others["others_share"] == 0.3
    assert others["busy"] is True and "other work used 30% of its 2 cores" in busy_line(others)
    own = load_over(before, _sample(**after, own_cpu_s=3.0))  # the run used 30%: its own load
    assert own["others_share"] == 0.1 and own["busy"] is False and busy_line(own) is None
    assert own["load_avg_after"] == [2.5, 1.0, 0.5]  # recorded, though it is mostly the run's


def test_without_cpu_counters_a_load_above_the_core_count_is_busy(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    quiet = {"load_avg": [0.1, 0.1, 0.1], "ticks": None}
    assert load_over(quiet, quiet)["busy"] is False
    load = load_over(quiet, {"load_avg": [9.0, 1, 1], "ticks": None})
    assert load["busy"] is True and load["others_share"] is None
    assert busy_line(load).startswith("busy machine: a load average of 9.00 on 2 cores")


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_the_cpu_time_of_running_and_ended_children_counts_as_the_runs_own():
    start = own_cpu_seconds()
    burn = "import time\nwhile time.process_time() < 0.5: pass\nprint('done', flush=True)\ntime.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "done\n"
        assert own_cpu_seconds() - start >= 0.45  # running: from /proc, in 10 ms ticks
    finally:
        child.kill()
        child.wait()
    assert own_cpu_seconds() - start >= 0.45  # ended and waited for: in os.times()


ORPHAN = """import subprocess, sys
burn = "import time\\nwhile time.process_time() < 0.5: pass\\nopen(sys.argv[1], 'w').close()"
subprocess.Popen([sys.executable, "-c", "import sys\\n" + burn, sys.argv[1]])"""  # and ends


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_an_orphan_s_cpu_time_counts_as_the_runs_own_and_it_is_reaped(tmp_path):
    """A browser's renderers outlive it at shutdown: their parent ends first, as here."""
    done = tmp_path / "done"
    with adopting_orphans():
        start = own_cpu_seconds()
        subprocess.run([sys.executable, "-c", ORPHAN, str(done)], check=True)
        deadline = time.monotonic() + 120  # only a guard against hanging
        while not (done.exists() and _ended_children()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the orphan burns, then ends
        assert _ended_children(), "the orphan went to init, not to this process"
        assert own_cpu_seconds() - start >= 0.45  # an ended orphan, come to this process
    assert _ended_children() == []  # reaped on leaving
    assert own_cpu_seconds() - start >= 0.45  # and its time is in os.times() now


def _tiny_pass(monkeypatch, names=("naive", "sdpa_math")):
    monkeypatch.setattr("attn.profiling.timing_pass.default_config", lambda device: TINY)
    monkeypatch.setattr("attn.profiling.timing_pass.specs.names", lambda: list(names))


def test_a_variant_that_fails_is_one_line_and_the_rest_are_written(tmp_path, monkeypatch, capsys):
    """Under a home folder with a space every compiled variant failed to build, and the timing
    pass died on the first with a traceback, writing no timing.json."""
    _tiny_pass(monkeypatch)

    def fails(*args, **kwargs):
        raise RuntimeError("C++ compile error\n\nCommand:\ng++ /home/Jane Doe/x.cpp")

    monkeypatch.setattr(attn.get_variant("naive"), "forward", fails)
    assert main(["--out", str(tmp_path), "--device", "cpu", "--budget", "0.05"]) == 1
    (folder,) = tmp_path.iterdir()
    data = json.loads((folder / artifacts.TIMING).read_text())
    assert [r["variant"] for r in data["rows"]] == ["sdpa_math"]
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "naive failed" in line]
    assert said == [
        "timing: naive failed and is left out (RuntimeError: C++ compile error)",
        "error: naive failed (said above): not in timing.json",
    ]


def _never_timed(*args, **kwargs):
    raise AssertionError("timed before its output was checked")


@pytest.mark.parametrize("where", [artifacts.TIMING, artifacts.OVERVIEW, artifacts.MANIFEST])
def test_an_output_that_is_a_folder_is_refused_before_any_timing(
    tmp_path, monkeypatch, capsys, where
):
    """timing.json as a folder: the pass timed for minutes, then crashed with a traceback."""
    _tiny_pass(monkeypatch)
    monkeypatch.setattr("attn.profiling.timing_pass.run", _never_timed)
    (tmp_path / hardware_slug("cpu") / where).mkdir(parents=True)
    assert main(["--out", str(tmp_path), "--device", "cpu", "--budget", "0.05"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and f"{where} is not a plain file" in line


def _set(tmp_path) -> Path:
    """A set of two variants with its timing.json, overview and index, as a run leaves it."""
    folder = tmp_path / hardware_slug("cpu")
    for name in ("naive", "sdpa_math"):
        profile_variant(attn.get_variant(name), TINY, tmp_path)
    finish_set(tmp_path, "cpu")
    (folder / artifacts.TIMING).write_text('{"rows": []}\n')
    return folder


def test_a_cut_summary_is_refused_before_any_timing(tmp_path, monkeypatch, capsys):
    """A cut summary.json left timing.json updated, the set's overview and index not."""
    _tiny_pass(monkeypatch)
    folder = _set(tmp_path)
    summary = folder / "naive" / artifacts.SUMMARY
    summary.write_text(summary.read_text()[:50])
    monkeypatch.setattr("attn.profiling.timing_pass.run", _never_timed)
    assert main(["--out", str(tmp_path), "--device", "cpu", "--budget", "0.05"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "naive/summary.json cannot be read as JSON" in line
    assert (folder / artifacts.TIMING).read_text() == '{"rows": []}\n'


def test_a_set_is_rewritten_whole_or_not_at_all(tmp_path, monkeypatch, capsys):
    """The overview cannot be drawn after timing.json was written: timing.json goes back."""
    _tiny_pass(monkeypatch)
    folder = _set(tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def cannot_draw(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("attn.profiling.timing_pass.write_overview", cannot_draw)
    assert main(["--out", str(tmp_path), "--device", "cpu", "--budget", "0.05"]) == 1
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert "No space left on device" in capsys.readouterr().err
