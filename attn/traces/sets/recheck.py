"""A whole committed set checked again from its traces: every summary measured again, each set's
diffs, manifest, overview and peaks against those; with write, mended.

Runs nothing: the traces are committed, and what a variant claims comes in as data (`Catalog`).
One trace into a variant folder is attn.traces.sets.analyze; a variant run on several ranks is
checked again by attn.traces.sets.rank_artifacts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from attn.traces.common import artifacts
from attn.traces.common.artifacts import BrokenSet
from attn.traces.common.atomic import write_json
from attn.traces.compare.diff import diffs_of, write_diffs
from attn.traces.figures import peaks_figure
from attn.traces.figures.overview import is_current, write_overview
from attn.traces.read.trace import read_trace
from attn.traces.sets.analyze import MEASURED, summarize
from attn.traces.sets.rank_artifacts import recheck_ranked
from attn.traces.sets.set_claims import recheck_claims


class Catalog(Protocol):
    """What recheck needs to know of the variants, handed in as data: `attn.specs` is one.

    A spec (what `spec(name)` returns) has `title`, `lesson`, `trace_claims`, `focus` and
    `gpu_focus`; reading a trace never imports the variants that made it.
    """

    REFERENCE: str  # the variant speedups are over, drawn apart in the overview

    def spec(self, name: str) -> Any | None: ...
    def names(self) -> list[str]: ...  # chapter order
    def diff_pairs(self) -> list[tuple[str, str]]: ...


def _fresh_summary(vdir: Path, catalog: Catalog) -> tuple[dict, dict]:
    """(the stored summary, the same with every measured field as its trace gives it now)."""
    path = vdir / artifacts.SUMMARY
    summary = artifacts.read_summary(path)  # BrokenSet naming a cut one
    if summary.get("variant") != vdir.name:
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
        changed += recheck_claims(hw, catalog, write)  # after the summaries: timing reads them
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
