"""attn.traces.sets.recheck: every committed set checked again from its traces finds nothing to
mend, and a set's peaks.svg is redrawn from its benchmark.json (the ranks' recheck is in
test_traces_rank_artifacts.py)."""

import json

import pytest
from committed import PROFILES  # the committed sets, as HEAD holds them
from test_traces_peaks_figure import ROWS

from attn import specs
from attn.traces.common.artifacts import BrokenSet
from attn.traces.figures import peaks_figure
from attn.traces.sets.recheck import recheck, recheck_peaks


def test_committed_summaries_carry_the_claims_their_traces_give():
    """What `python -m attn.profiling recheck --check` checks: a new or changed claim must be
    re-evaluated on every committed set (and committed) before it lands."""
    root = PROFILES  # as committed: a run here rewrites the work tree's set, and recheck its own
    if not root.is_dir():
        pytest.skip("no profiles/ in this checkout")
    stale = recheck(root, specs, write=False)
    assert stale == [], f"run: python -m attn.profiling recheck profiles ({stale[0]['path']})"


def test_recheck_draws_it_from_benchmark_json_and_then_finds_it_current(tmp_path):
    assert recheck_peaks(tmp_path) == []  # no benchmark: nothing to draw
    (tmp_path / "benchmark.json").write_text(json.dumps(ROWS))
    assert recheck_peaks(tmp_path, write=False) == [
        {"path": tmp_path / peaks_figure.FILE, "before": None, "after": None}
    ]
    assert not (tmp_path / peaks_figure.FILE).exists()  # --check writes nothing
    assert len(recheck_peaks(tmp_path)) == 1
    assert (tmp_path / peaks_figure.FILE).read_text() == peaks_figure.svg_text(ROWS)
    assert recheck_peaks(tmp_path) == []


def test_recheck_names_a_benchmark_json_that_is_not_rows(tmp_path):
    (tmp_path / "benchmark.json").write_text('{"not": "rows"}')
    with pytest.raises(BrokenSet, match="benchmark.json is not a benchmark's rows"):
        recheck_peaks(tmp_path)


def test_every_committed_set_has_the_picture_its_rows_give():
    """A set benchmarked with the peaks shows them (recheck draws what is missing); one from
    before has none."""
    for rows_path in sorted(PROFILES.glob("*/benchmark.json")):
        assert recheck_peaks(rows_path.parent, write=False) == [], rows_path.parent
