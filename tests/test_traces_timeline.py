"""attn.traces.figures.timeline: the picture of one forward, whatever its events are called."""

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from attn.traces.figures.timeline import MAX_CPU_ROWS, copied, draw_timeline, lanes
from attn.traces.read.trace import Event, parse, read_trace

sys.path.insert(0, str(Path(__file__).parent))
from committed import PROFILES  # noqa: E402  (the committed sets, as HEAD holds them)


def test_names_with_control_characters_and_dollars_draw_a_valid_svg(tmp_path):
    """A control character in a name made timeline.svg invalid XML, and analyze said nothing."""
    odd = "aten::mm\x1b[2J\x00$x$"
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "attn_fwd\x07", "ts": 0, "dur": 100,
         "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": odd, "ts": 1, "dur": 90, "pid": 1, "tid": 1},
    ]  # fmt: skip
    fwds = parse({"traceEvents": events}).forwards("attn_fwd\x07")
    path = tmp_path / "timeline.svg"
    draw_timeline(fwds, "naive\x1b]0;t\x07 on CPU", path, focus=odd)
    svg = ElementTree.fromstring(path.read_bytes())  # raised ParseError: "not well-formed"
    assert svg.tag.endswith("svg")


def test_a_stack_20000_calls_deep_is_folded_into_a_bounded_number_of_rows(tmp_path):
    """Events nested 20k deep drew a row each (106 s and 2.8 GB; 100k deep never ended). The
    rows are counted before anything is drawn: the old code fails there, in seconds."""
    depth = 20_000
    cpu = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    events = [{**cpu, "cat": "user_annotation", "name": "attn_fwd", "ts": 0, "dur": 4 * depth}]
    events += [
        {**cpu, "name": f"aten::op{i % 7}", "ts": 1 + i, "dur": 4 * depth - 2 - 2 * i}
        for i in range(depth)
    ]
    fwds = parse({"traceEvents": events}).forwards()
    rows = lanes(fwds[0])
    assert len(rows) == MAX_CPU_ROWS  # no GPU streams in this trace
    assert rows[-1][0] == "19,986 levels folded"  # depths 15 to 20,000 share the last row
    draw_timeline(fwds, "deep", tmp_path / "timeline.svg")
    assert "19,986 levels folded" in (tmp_path / "timeline.svg").read_text()


# --- both committed CPU sets: a copy's legend says what is copied -------------------------------

SETS = sorted(p.name for p in PROFILES.iterdir() if p.name.startswith("cpu-"))
COPIED = {
    "naive": "copy of the scores",
    "decode_repeat_kv": "copy of the K/V cache",  # the kv heads repeated: [b, kv, rep, sk, d]
    "ring_zigzag/rank1": "copy of an output block and its row statistics",
}


@pytest.mark.parametrize("hw", SETS)
@pytest.mark.parametrize("variant", COPIED)
def test_a_copys_legend_names_what_it_copies(hw, variant, tmp_path):
    """Every legend said "copy of the scores", the K/V cache copies of decode_repeat_kv and the
    output-block copies of the ring timelines too: each is named from its recorded shape."""
    folder = PROFILES / hw / variant
    summary = json.loads((folder / "summary.json").read_text())
    fwds = read_trace(folder / "trace.json.gz").forwards(summary["range"])
    path = tmp_path / "timeline.svg"
    draw_timeline(fwds, variant, path, shape=summary["shape"])
    legend = [t.text for t in ElementTree.fromstring(path.read_bytes()).iter() if t.text]
    assert COPIED[variant] in legend
    assert variant == "naive" or "copy of the scores" not in legend


def test_a_copy_of_a_shape_no_rule_names_says_the_shape():
    event = Event("aten::copy_", "cpu_op", 0.0, 1.0, 1, 1, {"Input Dims": [[3, 5], [3, 5]]})
    shape = {"batch": 2, "heads": 8, "seq_q": 16, "seq_k": 16, "head_dim": 4}
    assert copied(event, shape) == copied(event, None) == "[3, 5]"
