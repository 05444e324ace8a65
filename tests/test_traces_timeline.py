"""attn.traces.timeline: the picture of one forward, whatever its events are called."""

import xml.etree.ElementTree as ElementTree

from attn.traces.timeline import draw_timeline
from attn.traces.trace import parse


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
