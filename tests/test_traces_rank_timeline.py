"""The ranks' figure (attn.traces.ranks.rank_timeline): one row per rank on one time axis, its lanes drawn
from where each rank's range began."""

import xml.etree.ElementTree as ElementTree

from rank_traces import ring_rank

from attn.traces.common.markdown import visible
from attn.traces.common.terminal import UNSAFE
from attn.traces.ranks.comm import lanes
from attn.traces.ranks.rank_timeline import MAX_ROWS_IN, draw_ranks
from attn.traces.read.trace import Trace

SVG = "{http://www.w3.org/2000/svg}"


def texts(path) -> list[str]:
    return [t.text or "" for t in ElementTree.fromstring(path.read_bytes()).iter(f"{SVG}text")]


def test_every_rank_is_a_row_named_in_order(tmp_path):
    drawn = [(r, lanes(Trace(ring_rank(r, world=3)), 1)) for r in range(3)]
    path = draw_ranks(drawn, "ring on a test CPU", tmp_path / "ranks.svg")
    found = texts(path)
    assert {"rank 0", "rank 1", "rank 2", "ring on a test CPU"} <= set(found)
    assert {"compute", "communication under way", "waiting on a receive"} <= set(found)


def test_a_rank_that_started_later_is_drawn_later(tmp_path):
    early, late = lanes(Trace(ring_rank(0)), 0), lanes(Trace(ring_rank(1, start_us=5000)), 0)
    path = draw_ranks([(0, early), (1, late)], "t", tmp_path / "ranks.svg")
    assert "4" in " ".join(texts(path))  # the axis reaches past 4 ms, where rank 1 began


def test_many_ranks_stay_a_figure_a_page_can_hold(tmp_path):
    one = lanes(Trace(ring_rank(0, forwards=1)), 0)
    path = draw_ranks([(r, one) for r in range(64)], "t", tmp_path / "ranks.svg")
    height = ElementTree.fromstring(path.read_bytes()).get("height")
    assert float(height.removesuffix("pt")) <= MAX_ROWS_IN * 72 + 1


def test_a_title_naming_anything_stays_text_in_a_well_formed_picture(tmp_path, recwarn):
    """Escape characters in a folder's or a device's name made ranks.svg not well-formed XML,
    and reached the terminal raw through matplotlib's warnings of glyphs the font lacks; a
    name's byte that is not UTF-8 (a lone surrogate) could not be drawn at all."""
    one = lanes(Trace(ring_rank(0, forwards=1)), 0)
    title = "job\x1b[2J<b>&amp;\x00 $\\frac{a}$ on GPU\x07\n\x9b\udcff"  # and a byte not UTF-8
    path = draw_ranks([(0, one)], title, tmp_path / "ranks.svg")
    (drawn,) = [t for t in texts(path) if t.startswith("job")]  # parsed: well-formed XML
    assert drawn == visible(title) and not UNSAFE.search(drawn)  # each control as its escape
    assert "<b>&amp;" in drawn and "$\\frac{a}$" in drawn  # as written: no markup, no formula
    said = " ".join(str(w.message) for w in recwarn)
    assert not UNSAFE.search(said), said
