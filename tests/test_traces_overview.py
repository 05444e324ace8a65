import json
import shutil
import sys
from pathlib import Path

import pytest

from attn import specs
from attn.traces.figures.overview import is_current, summaries, wrapped, write_overview

sys.path.insert(0, str(Path(__file__).parent))
from committed import PROFILES  # noqa: E402  (the committed sets, as HEAD holds them)


def fake(folder, variant, available=True, cpu_time_us=1000.0):
    path = folder / variant / "summary.json"
    path.parent.mkdir(parents=True)
    summary = {
        "variant": variant,
        "available": available,
        "device_name": "Fake CPU",
        "dtype": "float32",
    }
    if available:
        shape = {"batch": 1, "heads": 2, "seq_q": 8, "seq_k": 8, "head_dim": 4}
        summary |= {"cpu_time_us": cpu_time_us, "device_time_us": None, "shape": shape}
    path.write_text(json.dumps(summary))


def test_summaries_are_in_chapter_order_and_skip_unavailable(tmp_path):
    for name in ("sdpa_flash", "naive", "sdpa_cudnn"):
        fake(tmp_path, name, available=name != "sdpa_cudnn")
    assert [s["variant"] for s in summaries(tmp_path, specs.names())] == ["naive", "sdpa_flash"]


def test_overview_chart_labels_each_variant(tmp_path):
    fake(tmp_path, "naive", cpu_time_us=5000.0)
    fake(tmp_path, "inplace", cpu_time_us=2500.0)
    svg = write_overview(tmp_path, specs.names(), specs.REFERENCE).read_text()
    assert "naive" in svg and "inplace" in svg and "5 ms" in svg and "2.5 ms" in svg


def test_no_summaries_no_chart(tmp_path):
    assert write_overview(tmp_path) is None
    assert not (tmp_path / "overview.svg").exists()


def test_a_shape_wraps_between_its_parts_never_inside_one():
    text = "* decode_repeat_kv: float32, batch 4, heads 32, seq 1, head_dim 64"
    lines = wrapped(text, 44, "  ").splitlines()
    assert lines == ["* decode_repeat_kv: float32, batch 4,", "  heads 32, seq 1, head_dim 64"]
    assert wrapped("float32, seq 64", 44) == "float32, seq 64"  # short: one line


# --- both committed CPU sets: a label per source of the time -----------------------------------

SETS = sorted(p for p in PROFILES.iterdir() if p.name.startswith("cpu-"))


def copy_set(hw: Path, into: Path) -> Path:
    """A committed set's summaries and timing pass, without its traces and pictures."""
    return Path(shutil.copytree(hw, into / hw.name, ignore=shutil.ignore_patterns("*.gz", "*.png")))


@pytest.mark.parametrize("hw", SETS, ids=lambda p: p.name)
def test_timed_and_profiled_bars_are_labelled_apart(hw, tmp_path):
    """15 of 17 bars were timing-pass medians under "CPU ms per forward under the profiler": the
    label fell back because the two ring rows have no timed row. Each source is now named."""
    folder = copy_set(hw, tmp_path)
    rows = summaries(folder, specs.names())
    timed = ["timed" in s for s in rows]
    assert any(timed) and not all(timed)  # what this set holds: the ring rows are not timed
    text = write_overview(folder, specs.names(), specs.REFERENCE).read_text()
    assert ">timed: median and interquartile range<" in text
    assert ">not timed: CPU mean under the profiler<" in text
    assert "<pattern" in text  # the profiled-only bars hatched: an SVG pattern fills them
    assert is_current(folder, specs.names())


def test_an_overview_under_another_label_is_not_current(tmp_path):
    fake(tmp_path, "naive", cpu_time_us=5000.0)
    write_overview(tmp_path, specs.names(), specs.REFERENCE)
    path = tmp_path / "overview.svg"
    assert is_current(tmp_path, specs.names())
    old = path.read_text().replace(">CPU ms per forward under the profiler<", ">ms per forward<")
    path.write_text(old)
    assert not is_current(tmp_path, specs.names())
