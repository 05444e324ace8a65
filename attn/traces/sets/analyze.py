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
from typing import Any, Protocol

from attn.traces.claims.claim import evaluate
from attn.traces.claims.trace_checks import Evidence
from attn.traces.common import artifacts
from attn.traces.common.artifacts import BrokenSet
from attn.traces.common.atomic import atomic_folder, write_json
from attn.traces.compare.diff import diffs_of, write_diffs
from attn.traces.figures import peaks_figure
from attn.traces.figures.overview import is_current, write_overview
from attn.traces.figures.table import markdown_table
from attn.traces.read.backward import summarize_backward
from attn.traces.read.scrub import Scrubber, write_trace
from attn.traces.read.trace import FIRST_CALLS_KEY, Forward, Trace, parse, per_forward, read_trace
from attn.traces.sets.rank_artifacts import recheck_ranked

ANALYSIS_STEPS = ("counting", "tabling", "drawing", "writing")  # what write_artifacts tells
# summary.json lists the first forward's kernels and top-level ops up to this many: a training
# step's thousands of names belong in table.md, and a summary stays a few kilobytes.
LISTED = 100


class Catalog(Protocol):
    """What recheck needs to know of the variants, handed in as data: `attn.specs` is one.

    A spec (what `spec(name)` returns) has `title`, `lesson`, `trace_claims`, `focus` and
    `gpu_focus`; reading a trace never imports the variants that made it.
    """

    REFERENCE: str  # the variant speedups are over, drawn apart in the overview

    def spec(self, name: str) -> Any | None: ...
    def names(self) -> list[str]: ...  # chapter order
    def diff_pairs(self) -> list[tuple[str, str]]: ...


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
    from attn.traces.figures.timeline import (
        draw_timeline,  # looked up as it draws: a test stands in for it
    )

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
        draw_timeline(fwds, title, out / artifacts.TIMELINE, focus=focus(summary, trace, spec))
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


def _fresh_summary(vdir: Path, catalog: Catalog) -> tuple[dict, dict]:
    """(the stored summary, the same with every measured field as its trace gives it now)."""
    path = vdir / artifacts.SUMMARY
    try:
        summary = json.loads(path.read_text())
    except ValueError as e:
        raise BrokenSet(f"{path} is not JSON ({e})") from e
    if not isinstance(summary, dict) or summary.get("variant") != vdir.name:
        raise BrokenSet(f"{path} is not the summary of {vdir.name} (rerun the profile)")
    if not summary.get("available"):
        return summary, summary
    for key, kind in (("shape", dict), ("dtype", str)):  # what ran: no trace can say it again
        if not isinstance(summary.get(key), kind):
            raise BrokenSet(f"{path} has no {key}, which its trace cannot give: rerun the profile")
    if not (vdir / artifacts.TRACE).is_file():
        raise BrokenSet(f"{vdir / artifacts.TRACE} is missing: the summary cannot be checked")
    fresh, _ = summarize(  # the stored fields (shape, compile times) under fresh counts
        read_trace(vdir / artifacts.TRACE),
        spec=catalog.spec(summary["variant"]),
        device_type=summary.get("device_type"),
        range_name=summary.get("range"),
        base=summary,
    )
    return summary, {**summary, **{k: fresh.get(k) for k in MEASURED if k in fresh or k in summary}}


def recheck(root: Path, catalog: Catalog, write: bool = True) -> list[dict]:
    """Check every set under root against what its traces give; with write, mend what differs.

    Runs nothing: every summary is measured again from its committed trace (numbers, ops, claims,
    a spec's new title or lesson), and each set's diffs, manifest and overview checked against
    those.
    Returns one row per file that differs: {path, before, after} (for a summary, its claims).
    BrokenSet names what cannot be mended: a trace or environment.json gone, a summary that is
    not one, a root with no set.
    """
    sets = artifacts.hardware_dirs(root)
    if not sets:
        raise BrokenSet(f"{root}: no hardware set here (a folder with {artifacts.MANIFEST})")
    changed = []
    for hw in sets:
        if not (hw / artifacts.ENVIRONMENT).is_file():
            raise BrokenSet(f"{hw / artifacts.ENVIRONMENT} is missing: rerun the profile there")
        for vdir in artifacts.variant_dirs(hw):
            if artifacts.rank_dirs(vdir):  # run on several ranks: each rank's, then across them
                changed += recheck_ranked(vdir, catalog.spec(vdir.name), write)
                continue
            summary, fresh = _fresh_summary(vdir, catalog)
            if summary != fresh:
                path = vdir / artifacts.SUMMARY
                changed.append(
                    {"path": path, "before": summary.get("claims"), "after": fresh.get("claims")}
                )
                if write:
                    write_json(path, fresh)
        expected = {out: data for out, data in diffs_of(hw, catalog.diff_pairs())}
        for out in sorted(set(expected) | set((hw / artifacts.DIFF_DIR).glob("*.json"))):
            if out not in expected:  # a diff no pair makes: ours if it names two variants
                if not all(catalog.spec(n) for n in out.stem.split("__")) or "__" not in out.stem:
                    raise BrokenSet(f"{out} is no diff of two variants: move it out of the set")
                changed.append({"path": out, "before": None, "after": None})
                if write:
                    out.unlink()  # a side no longer ran, or the pair is gone: never shown stale
                continue
            try:
                stored = json.loads(out.read_text()) if out.is_file() else None
            except ValueError:  # half a file: mended like any other difference
                stored = None
            if stored != expected.get(out):
                changed.append({"path": out, "before": None, "after": None})
        try:  # a summary without its numbers (reported above) cannot be drawn: not current
            current = is_current(hw, catalog.names())
        except (KeyError, TypeError):
            current = False
        if not current:  # a run killed before redrawing it
            changed.append({"path": hw / artifacts.OVERVIEW, "before": None, "after": None})
        index = hw / artifacts.MANIFEST
        if not index.is_file() or json.loads(index.read_text()) != artifacts.manifest(hw):
            changed.append({"path": index, "before": None, "after": None})
        if write and changed and any(hw in Path(r["path"]).parents for r in changed):
            write_overview(hw, catalog.names(), catalog.REFERENCE)
            write_diffs(hw, catalog.diff_pairs())
            artifacts.write_manifest(hw)
        changed += recheck_peaks(hw, write)
    return changed


def recheck_peaks(hw: Path, write: bool = True) -> list[dict]:
    """The set's peaks.svg against the picture its benchmark.json gives (none without peaks);
    with write, redrawn or removed. One row {path, before, after} where it differs."""
    rows_path, path = hw / "benchmark.json", hw / peaks_figure.FILE
    if not rows_path.is_file():
        return []
    try:
        rows = json.loads(rows_path.read_text(encoding="utf-8"))
        expected = peaks_figure.svg_text(rows)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise BrokenSet(f"{rows_path} is not a benchmark's rows ({type(e).__name__}: {e})") from e
    stored = path.read_text(encoding="utf-8") if path.is_file() else None
    if stored == expected:
        return []
    if write:
        peaks_figure.write(hw, rows)
    return [{"path": path, "before": None, "after": None}]
