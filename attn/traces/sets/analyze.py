"""From a trace to a variant folder: summary, tables, timeline and the scrubbed trace.

Every trace takes this path, whether our harness recorded it, an example wrote it, or a reader
brings it: one parser, one writer. Measuring reads the raw trace; the published copy is scrubbed
afterwards, so scrubbing can never change a count or a claim.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attn.traces.claims.claim import evaluate
from attn.traces.claims.trace_checks import Evidence
from attn.traces.common import artifacts
from attn.traces.common.atomic import atomic_folder
from attn.traces.figures import timeline
from attn.traces.figures.table import markdown_table
from attn.traces.read.backward import summarize_backward
from attn.traces.read.range_counts import per_forward
from attn.traces.read.scrub import Scrubber, write_trace
from attn.traces.read.trace import FIRST_CALLS_KEY, Forward, Trace, parse

ANALYSIS_STEPS = ("counting", "tabling", "drawing", "writing")  # what write_artifacts tells
# summary.json lists the first forward's kernels and top-level ops up to this many: a training
# step's thousands of names belong in table.md, and a summary stays a few kilobytes.
LISTED = 100


def summarize(
    trace: dict | Trace,
    *,
    spec: Any | None = None,
    device_type: str | None = None,
    range_name: str | None = None,
    base: dict | None = None,
) -> tuple[dict, list[Forward]]:
    """The summary of a trace (per-range counts and times, their means, claims) and its ranges;
    `spec` (a variant's, from attn.specs) gives the title, lesson and claims to check."""
    trace = parse(trace)
    measured = per_forward(trace, range_name)
    device_type = device_type or ("cuda" if trace.has_device_activity else "cpu")
    summary = {**(base or {}), "available": True, "device_type": device_type, **measured}
    for key in ("kernels", "ops"):
        if len(names := summary[key]) > LISTED:
            summary[key], summary[f"{key}_not_listed"] = names[:LISTED], len(names) - LISTED
    if FIRST_CALLS_KEY in trace.raw:  # recorded by our harness beside the profiler's events
        summary["first_calls_seconds"] = trace.raw[FIRST_CALLS_KEY]
    fwds = trace.forwards(range_name)
    if (backward := summarize_backward(trace, fwds)) is not None:  # a training step's trace
        summary["backward"] = backward
    if spec is not None:
        summary.update(title=spec.title, lesson=spec.lesson)
        summary["claims"] = evaluate(spec.trace_claims, device_type, Evidence(summary, fwds))
        for claim in summary["claims"] if trace.problems else []:  # impossible data: no verdict
            claim.update(holds=None, observed=f"cannot tell: {'; '.join(trace.problems)}")
    return summary, fwds


def focus(summary: dict, trace: Trace, spec: Any | None) -> str | None:
    """The name of the event to select in the screenshot of this summary's trace and to label in
    its timeline: the one its spec names (on a GPU by default its first kernel), as spelled there."""
    on_gpu = summary.get("device_type") == "cuda"
    pattern = spec and (spec.gpu_focus if on_gpu else spec.focus)
    if pattern is None:  # the first kernel of the range shown (a training step's: the backward)
        shown = summary.get("backward") or summary
        return (shown.get("kernels") or [None])[0] if on_gpu else None
    return next((n for n in trace.name if re.search(pattern, n)), None)


def write_artifacts(
    trace: dict | Trace,
    folder: Path,
    *,
    spec: Any | None = None,
    base: dict | None = None,
    device_type: str | None = None,
    range_name: str | None = None,
    table_txt: str | None = None,
    progress: Callable[[str], None] = lambda step: None,
) -> dict:
    """Analyse `trace` and write `folder` (replaced whole, or left as it was); returns the summary.
    `progress` is told each step as it starts (ANALYSIS_STEPS), for a progress bar."""
    trace = parse(trace)
    progress(ANALYSIS_STEPS[0])
    summary, fwds = summarize(
        trace, spec=spec, device_type=device_type, range_name=range_name, base=base
    )
    name = summary.get("variant") or Path(folder).name
    where = summary.get("device_name") or summary["device_type"]
    scrubber = Scrubber()  # what is published names no local path, the summary's op names included
    with atomic_folder(artifacts.check_replaceable(folder)) as out:
        progress(ANALYSIS_STEPS[1])
        on_device = summary["device_type"] != "cpu"
        (out / artifacts.TABLE_MD).write_text(scrubber.text(markdown_table(fwds, on_device)))
        if table_txt is not None:
            (out / artifacts.TABLE_TXT).write_text(table_txt.rstrip() + "\n")
        progress(ANALYSIS_STEPS[2])
        title = f"{name} on {where}: one {summary['range']}"
        # timeline.draw_timeline looked up as it draws: a test stands in for it
        timeline.draw_timeline(
            fwds, title, out / artifacts.TIMELINE, focus=focus(summary, trace, spec),
            shape=summary.get("shape"),
        )  # fmt: skip
        progress(ANALYSIS_STEPS[3])
        write_trace(trace.raw, out / artifacts.TRACE, scrubber)  # measuring read the raw trace
        summary = {"schema": artifacts.SUMMARY_SCHEMA, **scrubber.value(summary)}
        (out / artifacts.SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


SPEC_FIELDS = ("claims", "title", "lesson")  # from the specs; the rest of these from the trace
MEASURED = (*SPEC_FIELDS, "range", "forwards", "cpu_time_us", "device_time_us", "ops_per_forward",
            "kernels_per_forward", "memcpy_per_forward", "memset_per_forward",
            "launches_per_forward", "peak_memory_bytes", "kernels", "ops", "kernels_not_listed",
            "ops_not_listed", "ranges", "problems",
            "backward")  # fmt: skip
