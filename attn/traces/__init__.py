"""How we read a trace, ours or anyone's: parse, scrub, count, check claims, diagnose, diff, draw.

Needs no torch (numpy, orjson, rich and matplotlib only) and no variant: what a variant claims
comes in as data from `attn.specs`. The code sits in a few folders by job, each importing only the
folders before it (tests/test_traces_layers.py holds them to it):

    read       a trace's text, its table of events, the name table, backward, lint, scrub
    common     units, intervals, atomic writes, safe text, the artifact contract
    figures    SVG panels, the timeline, the set's overview and peaks, a trace's table
    claims     claims, every check, the roofline, the tables that show verdicts
    ranks      one rank's communication, a folder of ranks, their timeline
    compare    diff and gate (python -m attn.traces.compare A B)
    diagnosis  diagnose: calls, their device work, findings, reports
    sets       a trace into a variant folder, ranks into one, recheck a set

`diagnose` and `read_trace` are importable from here: `from attn.traces import diagnose, read_trace`.
"""

from attn.traces.diagnosis.diagnose import diagnose
from attn.traces.read.trace import read_trace

__all__ = ["diagnose", "read_trace"]
