"""The artifact contract: every path and file name under `profiles/`, and each set's manifest.

    <root>/<hardware>/index.json             the manifest: variants, their files, shape and stamp
    <root>/<hardware>/environment.json       device, CPU, versions, date, commit
    <root>/<hardware>/overview.svg           time per forward of every variant there
    <root>/<hardware>/timing.json            every variant timed interleaved: median and interval
    <root>/<hardware>/{scaling,benchmark,decoding,training,dispatch,overhead}.{json,svg}
    <root>/<hardware>/claims.json            the verdicts of the claims on those rows and timing
    <root>/<hardware>/<variant>/summary.json trace.json.gz table.txt table.md timeline.svg viewer.png
    <root>/<hardware>/<variant>/ranks.svg    a variant run on several ranks: its summary across
    <root>/<hardware>/<variant>/rank<r>/...  them, their figure, and each rank's files as above
    <root>/<hardware>/diff/<a>__<b>.json
    <root>/public/<trace>/diagnosis.json     a trace recorded by others: its source, what diagnose
    <root>/public/<trace>/viewer.png         finds, its claims checked; and its screenshot

Folders whose names start with `.` are scratch space of a run in progress and never part of a set.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from attn.traces.common.atomic import check_output, write_json, write_rows

MANIFEST = "index.json"
ENVIRONMENT = "environment.json"
OVERVIEW = "overview.svg"
TIMING = "timing.json"  # the timing pass: every variant timed interleaved, with intervals
FIGURES = ("scaling", "benchmark", "decoding", "training", "dispatch", "overhead")
CLAIMS = "claims.json"  # the figure and timing claims' verdicts (attn.traces.sets.set_claims)
SUMMARY = "summary.json"
# The version of summary.json's fields, its `schema` key: raised when a field changes meaning or
# goes. Summaries written before it was added have no `schema`: read them as version 1.
SUMMARY_SCHEMA = 1
TRACE = "trace.json.gz"
TABLE_TXT = "table.txt"
TABLE_MD = "table.md"
TIMELINE = "timeline.svg"
VIEWER = "viewer.png"
VARIANT_FILES = (SUMMARY, TRACE, TABLE_TXT, TABLE_MD, TIMELINE, VIEWER)
ANALYZED_FILES = (SUMMARY, TRACE, TABLE_MD, TIMELINE)  # what analyze writes from a trace alone
RANKS_FIGURE = "ranks.svg"  # one forward of every rank, stacked on one time axis
RANK_DIR = re.compile(r"rank(\d+)")  # rank0, rank1, ...: one folder per rank of a variant
DIFF_DIR = "diff"
PUBLIC_DIR = "public"  # no hardware set: a folder of traces recorded by others
DIAGNOSIS = "diagnosis.json"


class BrokenSet(ValueError):
    """A set recheck cannot mend from its traces (a trace or the environment gone); one line."""


class RefusedFolder(RuntimeError):
    """A folder a run will not replace: it holds what attn.profiling did not write."""


def check_replaceable(folder: Path, writes: tuple[str, ...] = VARIANT_FILES) -> Path:
    """The variant folder, if a run that writes `writes` may replace it: absent, or a summary and
    those artifacts only. RefusedFolder otherwise, naming what would be lost (an example's raw
    trace, a run's table.txt that analyze cannot make again, a user's file)."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise RefusedFolder(f"{folder} is not a folder; give --out a folder")
    if not folder.exists():
        return folder
    names = {p.name for p in folder.iterdir()}
    ranks = {n for n in names if RANK_DIR.fullmatch(n) and (folder / n).is_dir()}
    for rank in sorted(ranks):  # a variant run on several ranks: each rank's folder as one's
        check_replaceable(folder / rank, writes)
    names -= ranks | ({RANKS_FIGURE} if ranks else set())
    foreign = sorted(names - set(writes)) or ([] if SUMMARY in names else sorted(names))
    if foreign:
        raise RefusedFolder(
            f"{folder} holds {foreign[0]}, which attn.profiling did not write: it would be lost; "
            "give --out another folder"
        )
    return folder


def hardware_dir(root: Path, hardware: str) -> Path:
    return Path(root) / hardware


def variant_dir(root: Path, hardware: str, variant: str) -> Path:
    return Path(root) / hardware / variant


def is_scratch(path: Path) -> bool:
    return path.name.startswith(".")


def rank_dirs(variant_folder: Path) -> list[Path]:
    """A variant's rank folders (rank0, rank1, ...) in rank order; none for a single process."""
    found = [p for p in Path(variant_folder).iterdir() if p.is_dir() and RANK_DIR.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(p.name[4:]))


def variant_files(variant_folder: Path) -> list[str]:
    """The artifacts of a variant folder, as its manifest lists them: its own, then each rank's
    as rank<r>/<file>."""
    vdir = Path(variant_folder)
    files = [f for f in (*VARIANT_FILES, RANKS_FIGURE) if (vdir / f).is_file()]
    for rank in rank_dirs(vdir):
        files += [f"{rank.name}/{f}" for f in VARIANT_FILES if (rank / f).is_file()]
    return files


def variant_dirs(hardware_folder: Path) -> list[Path]:
    """The variant folders of a set: those holding a summary, scratch folders left out."""
    return sorted(
        p
        for p in Path(hardware_folder).iterdir()
        if p.is_dir() and not is_scratch(p) and (p / SUMMARY).is_file()
    )


def hardware_dirs(root: Path) -> list[Path]:
    """The hardware sets under root: folders with a manifest or an environment."""
    if not Path(root).is_dir():
        return []
    return sorted(
        p
        for p in Path(root).iterdir()
        if p.is_dir()
        and not is_scratch(p)
        and ((p / MANIFEST).is_file() or (p / ENVIRONMENT).is_file())
    )


def ran(variant_folder: Path) -> bool:
    """Whether a variant ran: its trace is there and its summary, if any, does not say it could
    not run. A summary that cannot be read counts as ran, so that what reads it next names it."""
    if not (Path(variant_folder) / TRACE).is_file():
        return False
    try:
        summary = json.loads((Path(variant_folder) / SUMMARY).read_text())
    except (OSError, ValueError):
        return True
    return not isinstance(summary, dict) or bool(summary.get("available", True))


def read_summary(path: Path) -> dict:
    """A variant's summary.json; BrokenSet naming it when it is not a JSON object (cut short)."""
    try:
        summary = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BrokenSet(f"{path} cannot be read as JSON ({e}): rerun the profile") from e
    if not isinstance(summary, dict):
        raise BrokenSet(f"{path} is not a summary (not a JSON object): rerun the profile")
    return summary


def summaries_of(hardware_folder: Path) -> list[dict]:
    """Every variant's summary in a set, in folder order (BrokenSet naming one that is cut)."""
    return [read_summary(vdir / SUMMARY) for vdir in variant_dirs(hardware_folder)]


def manifest(hardware_folder: Path) -> dict:
    """The manifest of a set, built from what is there: each variant's files, shape and stamp."""
    folder = Path(hardware_folder)
    env_path = folder / ENVIRONMENT
    env = json.loads(env_path.read_text()) if env_path.is_file() else {}
    variants = {}
    for vdir in variant_dirs(folder):
        summary = read_summary(vdir / SUMMARY)
        variants[vdir.name] = {
            "available": bool(summary.get("available")),
            "files": variant_files(vdir),
            **{key: summary.get(key) for key in ("shape", "dtype", "is_causal", "stamp")},
        }
    ran = [v for v in variants.values() if v["available"]]
    shapes = {json.dumps([v["shape"], v["dtype"], v["is_causal"]]) for v in ran}
    return {
        "hardware": folder.name,
        "device_name": env.get("device_name"),
        "device_type": env.get("device_type"),
        "one_shape": len(shapes) <= 1,  # False: rows were profiled at different shapes
        "variants": variants,
        "figures": [f for f in FIGURES if (folder / f"{f}.svg").is_file()],
        "overview": (folder / OVERVIEW).is_file(),
        "timing": (folder / TIMING).is_file(),
        "claims": (folder / CLAIMS).is_file(),
        "diffs": sorted(p.name for p in (folder / DIFF_DIR).glob("*.json")),  # none: no folder
    }


def write_manifest(hardware_folder: Path) -> Path:
    return write_json(Path(hardware_folder) / MANIFEST, manifest(hardware_folder))


def check_figure(folder: Path, stem: str) -> None:
    """RefusedOutput naming the file, before the work, where `<stem>.json`, `<stem>.svg` or the
    set's index is not a file that can be replaced."""
    for name in (f"{stem}.json", f"{stem}.svg", MANIFEST):
        check_output(Path(folder) / name)


def write_figure(folder: Path, stem: str, rows: list[dict], draw) -> Path:
    """`<stem>.json` and `<stem>.svg` in a set, each replaced atomically, and listed in its manifest."""
    write_rows(folder, stem, rows, draw)
    if (Path(folder) / MANIFEST).is_file():  # a set made by a profile run
        write_manifest(folder)
    return Path(folder)
