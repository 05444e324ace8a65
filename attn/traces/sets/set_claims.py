"""The verdicts of a set's figure claims, decided once and stored: `<set>/claims.json`.

A BenchmarkClaim (attn.traces.claims.benchmark_checks) reads a figure's rows (benchmark.json,
scaling.json, training.json, decoding.json, dispatch.json) or, for "timing", each training step
both profiled and timed. Each sweep writes this file after its rows, and `recheck` decides it
again and fails `--check` when a verdict flips; the docs hooks only show what it holds.

    {"schema": 1, "device_type": "cpu",
     "variants": {variant: {key: {"text", "figure", "holds", "observed"}}},
     "not_measured": {variant: [key, ...]}}   # this device type's claims the set has no rows for
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attn.traces.claims import step_checks
from attn.traces.claims.benchmark_checks import BenchmarkClaim, BenchmarkEvidence
from attn.traces.common import artifacts, intervals
from attn.traces.common.artifacts import BrokenSet
from attn.traces.common.atomic import write_json
from attn.traces.common.busy import how_busy

CLAIMS_SCHEMA = 1


def _read(path: Path, kind: type) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BrokenSet(f"{path} cannot be read as JSON ({e})") from e
    if not isinstance(data, kind):
        raise BrokenSet(f"{path} holds a {type(data).__name__}, not a {kind.__name__}")
    return data


def step_rows(hw: Path, names: list[str]) -> list[dict]:
    """The set's training steps both profiled and timed, in chapter order (step_checks.step_rows)."""
    path = hw / artifacts.TIMING
    timing = _read(path, dict) if path.is_file() else {}
    try:
        timed = {
            r.get("variant"): intervals.checked(r, f"{path}: {r.get('variant')}")
            for r in timing.get("rows") or []
        }
    except intervals.BadTiming as e:
        raise BrokenSet(str(e)) from e
    found = {v.name: v for v in artifacts.variant_dirs(hw)}
    summaries = {
        n: artifacts.read_summary(found[n] / artifacts.SUMMARY) for n in names if n in found
    }
    env_path = hw / artifacts.ENVIRONMENT
    env = _read(env_path, dict) if env_path.is_file() else {}
    # Other work lengthens the timed step too: on a busy set a shorter profiled sum is no verdict.
    busy = how_busy([env.get("load"), timing.get("load")]) is not None
    return step_checks.step_rows(summaries, timed, busy)


def has_figure(hw: Path, figure: str) -> bool:
    """Whether the set has what a benchmark claim reads: a figure (its picture listed, as the
    manifest lists figures), or for "timing" a timing pass."""
    if figure == "timing":
        path = hw / artifacts.TIMING
        return path.is_file() and bool(_read(path, dict).get("rows"))
    return (hw / f"{figure}.svg").is_file() and (hw / f"{figure}.json").is_file()


def set_claims(hw: Path, catalog: Any) -> dict:
    """Every benchmark claim of the set's device type, decided on its rows (see the module's doc).

    `catalog` has `names()` (chapter order) and `spec(name)` whose `claims` hold the claims."""
    hw = Path(hw)
    env_path = hw / artifacts.ENVIRONMENT
    device_type = (_read(env_path, dict) if env_path.is_file() else {}).get("device_type") or "cpu"
    names = catalog.names()
    rows: dict[str, list[dict]] = {}
    decided: dict[str, dict] = {}
    waiting: dict[str, list[str]] = {}
    for name in names:
        spec = catalog.spec(name)  # None: a name a test's catalog lists without an entry
        for claim in spec.claims if spec is not None else []:
            if not isinstance(claim, BenchmarkClaim) or claim.device_type != device_type:
                continue
            if not has_figure(hw, claim.figure):
                waiting.setdefault(name, []).append(claim.key)
                continue
            if claim.figure not in rows:
                rows[claim.figure] = (
                    step_rows(hw, names)
                    if claim.figure == "timing"
                    else _read(hw / f"{claim.figure}.json", list)
                )
            try:
                holds, observed = claim.check(BenchmarkEvidence(name, rows[claim.figure]))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                path = hw / f"{claim.figure}.json"
                raise BrokenSet(
                    f"{path}: a row {name}'s claim {claim.key!r} cannot read ({e!r})"
                ) from e
            decided.setdefault(name, {})[claim.key] = {
                "text": claim.text,
                "figure": claim.figure,
                "holds": holds,
                "observed": observed,
            }
    return {
        "schema": CLAIMS_SCHEMA,
        "device_type": device_type,
        "variants": decided,
        "not_measured": waiting,
    }


def write_claims(hw: Path, catalog: Any) -> Path:
    """`<set>/claims.json` as set_claims decides it now, and the manifest that lists it."""
    path = write_json(Path(hw) / artifacts.CLAIMS, set_claims(hw, catalog))
    if (Path(hw) / artifacts.MANIFEST).is_file():
        artifacts.write_manifest(hw)
    return path


def recheck_claims(hw: Path, catalog: Any, write: bool = True) -> list[dict]:
    """The set's claims.json against what its rows decide now; with write, rewritten. One row
    {path, before, after} where they differ, before and after the flipped verdicts."""
    path = Path(hw) / artifacts.CLAIMS
    expected = set_claims(hw, catalog)
    try:
        stored = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except ValueError:  # half a file: mended like any other difference
        stored = None
    if stored == expected:
        return []
    if write:
        write_json(path, expected)
    return [{"path": path, "before": _verdicts(stored), "after": _verdicts(expected)}]


def _verdicts(data: dict | None) -> list[dict] | None:
    """The claims of a claims.json as a summary's are listed: [{variant, key, text, holds}]."""
    if not isinstance(data, dict) or not isinstance(data.get("variants"), dict):
        return None
    return [
        {"variant": name, "key": key, "text": c.get("text"), "holds": c.get("holds")}
        for name, claims in data["variants"].items()
        for key, c in (claims.items() if isinstance(claims, dict) else [])
        if isinstance(c, dict)
    ]
