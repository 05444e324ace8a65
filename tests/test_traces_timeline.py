"""attn.traces.figures.timeline: the picture of one forward, whatever its events are called."""

import xml.etree.ElementTree as ElementTree

from attn.traces.figures.timeline import MAX_CPU_ROWS, draw_timeline, lanes
from attn.traces.read.trace import parse


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
