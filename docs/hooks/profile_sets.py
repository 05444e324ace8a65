"""The hardware sets the profiles hook shows: each folder of profiles/ with a manifest, checked.

A set is a stranger's data (sets arrive as pull requests), published only whole and only as data:
a summary that is not one, a file the manifest lists but that is missing or unreadable, a folder
the manifest does not know, a link anywhere in the set, a JSON field outside its schema
(attn/traces/common/set_schema.py) or an SVG outside its allowlist (set_svg.py) fails the build with one line naming
the file and the field. Nothing here escapes: the pages write every string of a set through
attn.traces.common.markdown. File names are attn.traces.common.artifacts's; this module measures nothing.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import PIL.Image
from image_sizes import png_size
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from set_svg import BadSvg, check_svg, clean_svg

from attn.traces.common import artifacts, intervals, jsonfile
from attn.traces.common import set_schema as schema
from attn.traces.figures import peaks_figure

DEVICE_ORDER = {"cuda": 0, "cpu": 2}  # GPUs first, anything else in between, CPU last


class BrokenSet(PluginError):
    """A profile set the site must not publish; the message names the file and the problem."""


def read_json(path: Path, kind: type = dict, fits: schema.Schema | None = None):
    """The JSON at path, which must be a `kind` that fits the schema, or BrokenSet."""
    try:
        data = jsonfile.load(path)  # depth and numbers checked: one line, never a RecursionError
    except jsonfile.BadJson as e:
        raise BrokenSet(f"profiles hook: {e}") from e
    if not isinstance(data, kind):
        raise BrokenSet(
            f"profiles hook: {path} holds a {type(data).__name__}, not a {kind.__name__}"
        )
    if fits is not None:
        try:
            fits(data, "")
        except schema.Refused as e:
            raise BrokenSet(f"profiles hook: {path}: {e}") from e
    return data


def check_links(folder: Path) -> None:
    """No link anywhere in a set, the folder itself included: a link publishes what it points at
    (/etc/passwd, the checkout's .git/config)."""
    if folder.is_symlink():
        raise BrokenSet(f"profiles hook: {folder} is a link: a set holds its own files")
    for parent, folders, files in os.walk(folder):  # a linked folder is listed, never entered
        for name in sorted(folders + files):
            if (Path(parent) / name).is_symlink():
                raise BrokenSet(
                    f"profiles hook: {Path(parent) / name} is a link: a set holds its own files"
                )


def check_summary(path: Path, variant: str) -> dict:
    """The summary at path, or BrokenSet naming what is wrong with it."""
    s = read_json(path)
    if s.get("variant") != variant:
        raise BrokenSet(
            f"profiles hook: {path} is the summary of {s.get('variant')!r}, not {variant!r} "
            "(a folder copied over another?)"
        )
    if not isinstance(s.get("available"), bool):
        raise BrokenSet(f"profiles hook: {path} has no 'available' true/false")
    return read_json(path, fits=schema.SUMMARY if s["available"] else schema.UNAVAILABLE)


PLAIN = r"[^|<>`\[\]{}\\&!]*"  # a number, a time or a dash: nothing Markdown or HTML would act on
TABLE_LINES = {  # what may stand on each side of the one code span a line may hold
    re.compile(r"\|(?: [\w ]+ \|)+"): None,  # the header
    re.compile(r"\|---\|(?:---:\|)+"): None,
    re.compile(r""): None,
    re.compile(r"<small>Mean per range, computed from the trace\.</small>"): None,
    re.compile(r"\| "): re.compile(rf"(?: <small>\(\w+\)</small>)? (?:\| {PLAIN} )+\|"),  # a row
    re.compile(r"<small>Mean per "): re.compile(r" range, computed from the trace\.</small>"),
}


def _after_code(line: str, start: int) -> str | None:
    """What follows the code span that opens at `start`, closed where Python-Markdown closes it
    (the next run of as many backticks); None if none opens there or a bare | is in it."""
    fence = re.match(r"`+", line[start:])
    if fence is None:
        return None
    for run in re.finditer(r"`+", line[start + fence.end() :]):
        if len(run[0]) == fence.end():
            inside = line[start + fence.end() : start + fence.end() + run.start()]
            if re.search(r"(?<!\\)\|", inside):
                return None
            return line[start + fence.end() + run.end() :]
    return None


def check_table(path: Path) -> None:
    """table.md is shown as it is: each line must be one analyze writes, names in code spans."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for before, after in TABLE_LINES.items():
            if after is None:
                if before.fullmatch(line):
                    break
                continue
            opened = before.match(line)
            rest = _after_code(line, opened.end()) if opened else None
            if rest is not None and after.fullmatch(rest):
                break
        else:
            raise ValueError(f"line {number} is not a row of the table analyze writes: {line!r}")


def check_file(path: Path) -> None:
    """A published artifact must be whole: gzip JSON traces decode, pictures parse, data loads."""
    try:
        if path.name.endswith(".json.gz"):
            trace = jsonfile.loads(gzip.decompress(path.read_bytes()), str(path))
            if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
                raise ValueError("not a Chrome trace: no 'traceEvents' list")
        elif path.suffix == ".svg":
            check_svg(path.read_bytes())
        elif path.suffix == ".json":
            jsonfile.load(path)
        elif path.name == artifacts.TABLE_MD:
            check_table(path)
        elif path.suffix == ".png":
            _check_png_size(path)
            with PIL.Image.open(path) as image:  # a whole picture, not a PNG signature alone
                image.verify()
        elif path.stat().st_size == 0:
            raise ValueError("empty")
    except BadSvg as e:
        raise BrokenSet(f"profiles hook: {path}: {e}") from e
    except jsonfile.BadJson as e:  # it names the file and the field
        raise BrokenSet(f"profiles hook: {e}") from e
    except (OSError, ValueError, EOFError, ElementTree.ParseError, PIL.UnidentifiedImageError) as e:
        raise BrokenSet(f"profiles hook: {path} is broken ({type(e).__name__}: {e})") from e


MAX_PIXELS = 50_000_000  # a viewer screenshot is a few megapixels; PIL's own guard is a traceback


def _check_png_size(path: Path) -> None:
    """A PNG's size from its header, before anything decodes it: a header declaring 50,000 x
    50,000 pixels would take gigabytes to open."""
    with path.open("rb") as f:
        size = png_size(f.read(24))
    if size is None:
        raise ValueError("not a PNG: no PNG signature and IHDR header")
    if size[0] * size[1] > MAX_PIXELS:
        raise ValueError(f"declares {size[0]} x {size[1]} pixels, over {MAX_PIXELS:,}")


SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*")  # what a set's folder may be called: safe in any URL


def check_timing(path: Path) -> dict | None:
    """A set's timing.json, each row's median and interval checked, keyed by variant (None when the
    set has none): {variant: row, "score_clone": row, ...} beside the file's own fields."""
    if not path.is_file():
        return None
    data = read_json(path, fits=schema.TIMING)
    rows = data["rows"]
    try:
        by_variant = {
            r.get("variant"): intervals.checked(r, f"{path}: {r.get('variant')}") for r in rows
        }
        if "score_clone" in data:
            intervals.checked(data["score_clone"], f"{path}: score_clone")
    except intervals.BadTiming as e:
        raise BrokenSet(f"profiles hook: {e}") from e
    return {**data, "variants": by_variant}


def load_set(folder: Path) -> dict:
    """One hardware set, checked: {slug, folder, env, manifest, summaries, title, device_type}.

    Its strings are as the set wrote them, each field of the type its schema says."""
    if not SLUG.fullmatch(folder.name):
        raise BrokenSet(
            f"profiles hook: {folder} cannot be a set's folder: name it in lowercase letters, "
            "digits, '.', '_' and '-' (as a profile run names them)"
        )
    check_links(folder)
    for svg in sorted(folder.rglob("*.svg")):  # every picture, published or not
        check_file(svg)
    index = folder / artifacts.MANIFEST
    manifest = read_json(index, fits=schema.INDEX)
    variants = manifest["variants"]
    _check_folders(folder, index, variants)
    for name in manifest.get("diffs", []):  # read whole before any page shows one
        read_json(folder / artifacts.DIFF_DIR / name)
    summaries = {
        name: _check_variant(folder, index, name, entry) for name, entry in variants.items()
    }
    rows = {}
    for figure in manifest.get("figures", []):
        check_file(folder / f"{figure}.svg")
        check_file(folder / f"{figure}.json")
        rows[figure] = read_json(folder / f"{figure}.json", list, fits=schema.FIGURES[figure])
    env_path = folder / artifacts.ENVIRONMENT
    env = read_json(env_path, fits=schema.ENVIRONMENT) if env_path.exists() else {}
    device_type = manifest.get("device_type") or env.get("device_type") or "cpu"
    name = manifest.get("device_name") or env.get("device_name") or folder.name
    return {
        "slug": folder.name,
        "folder": folder,
        "env": env,
        "manifest": manifest,
        "summaries": summaries,
        "title": "CPU" if device_type == "cpu" else name,  # as the set says it: pages escape it
        "name": name,
        "figure_rows": rows,  # each figure's rows, checked
        "cpu_label": cpu_label(env.get("cpu_model") or name, rows.get("benchmark") or []),
        "device_type": device_type,
        "timing": check_timing(folder / artifacts.TIMING),
    }


def _check_folders(folder: Path, index: Path, variants: dict) -> None:
    """Every variant folder on disk must be one the manifest lists (scratch and diffs aside)."""
    on_disk = {
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not artifacts.is_scratch(p) and p.name != artifacts.DIFF_DIR
    }
    unknown = sorted(on_disk - set(variants))
    if unknown:
        raise BrokenSet(
            f"profiles hook: {folder}/{unknown[0]}/ is not in {index}: rerun the profile, or "
            "delete the folder"
        )


def is_artifact(f: str) -> bool:
    """A file a manifest may list for a variant: one of its artifacts, or a rank's."""
    rank, _, file = f.rpartition("/")
    if rank:
        return bool(artifacts.RANK_DIR.fullmatch(rank)) and file in artifacts.VARIANT_FILES
    return f in (*artifacts.VARIANT_FILES, artifacts.RANKS_FIGURE)


def _check_variant(folder: Path, index: Path, name: str, entry) -> dict:
    """A manifest entry's files, each an artifact present in the set itself and whole; returns
    the variant's checked summary."""
    files = entry.get("files", []) if isinstance(entry, dict) else None
    if not SLUG.fullmatch(name) or not isinstance(files, list):
        raise BrokenSet(f"profiles hook: {index}: variants entry {name!r} is not a variant's")
    for f in files:
        if not is_artifact(f):  # "/etc/hostname" would be published
            raise BrokenSet(
                f"profiles hook: {index}: {name}'s files names {f!r}, not an artifact "
                f"({', '.join(artifacts.VARIANT_FILES)}, {artifacts.RANKS_FIGURE}, or a rank's: "
                "rank<r>/<one of those>)"
            )
        rank = folder / name / f.split("/")[0]
        if any(p.is_symlink() for p in (folder / name, rank, folder / name / f)):
            raise BrokenSet(
                f"profiles hook: {folder / name / f} is a link: a set holds its own files"
            )
        if not (folder / name / f).is_file():
            raise BrokenSet(f"profiles hook: {index} lists {folder / name / f}, which is missing")
        check_file(folder / name / f)
    for summary in sorted({f.split("/")[0] for f in files if "/" in f}):  # each rank's own
        check_summary(folder / name / summary / artifacts.SUMMARY, name)
    return check_summary(folder / name / artifacts.SUMMARY, name)


# What a CPU's model name says that tells no two models apart: marks, "CPU", "Processor", clocks.
CPU_NOISE = re.compile(r"\((?:r|tm)\)|\bcpu\b|\bprocessor\b|@?\s*\d+(?:\.\d+)?\s*ghz\b", re.I)
BF16_PATHS = {"amx": "AMX", "avx512_bf16": "AVX-512 BF16"}  # attn.profiling.peaks' bf16 paths


def cpu_label(model: str, benchmark: list[dict]) -> str:
    """A CPU set's tab: its model as the set recorded it, marks left out ('Intel Xeon (family 6,
    model 167)', 'AMD EPYC 9654'). A bare name recorded without its family and model ('Intel Xeon',
    as a cloud VM says it of every generation) is told by what the set's benchmark measured the
    CPU doing bfloat16 with ('Intel Xeon with AMX'), else said to be unrecorded: never a model the
    set does not record."""
    name = " ".join(CPU_NOISE.sub(" ", model).split()) or model
    if re.search(r"\d", name):  # a model number, or the family and model attn.profiling adds
        return name
    paths = {(r.get("peaks") or {}).get("bf16_path") for r in benchmark} - {None}
    if len(paths) == 1 and (path := paths.pop()) in BF16_PATHS:
        return f"{name} with {BF16_PATHS[path]}"
    return f"{name}, model not recorded"


@functools.cache
def hardware_sets(root: Path) -> list[dict]:
    """Every hardware set under root (the folders with a manifest), checked, GPUs first.

    Read once per root; the hook clears the cache at the start of each build."""
    found = [
        load_set(p)
        for p in artifacts.hardware_dirs(Path(root))
        if (p / artifacts.MANIFEST).is_file()
    ]
    found = sorted(found, key=lambda h: (DEVICE_ORDER.get(h["device_type"], 1), h["title"]))
    titles = [h["title"] for h in found]
    for h in found:  # two CPU sets: each tab names its CPU
        if titles.count(h["title"]) > 1 and h["device_type"] == "cpu":
            h["title"] = f"CPU: {h['cpu_label']}"
    titles = [h["title"] for h in found]
    for h in found:  # two sets of one title would make two tabs no one can tell (or select) apart
        if titles.count(h["title"]) > 1:
            h["title"] = f"{h['title']} ({h['slug']})"
    return found


def load_public(folder: Path) -> dict | None:
    """A trace of others' diagnosis.json (None before it is written), checked as a set is."""
    check_links(folder)
    path = folder / artifacts.DIAGNOSIS
    if not path.is_file():
        return None
    if (folder / artifacts.VIEWER).is_file():
        check_file(folder / artifacts.VIEWER)
    return read_json(path, fits=schema.DIAGNOSIS)


def artifact_files(root: Path, config) -> list[File]:
    """Every published artifact of every set, as MkDocs files at profiles/<hardware>/..."""
    found = []
    for hw in hardware_sets(root):
        folder, manifest = hw["folder"], hw["manifest"]
        paths = [
            folder / artifacts.MANIFEST,
            folder / artifacts.ENVIRONMENT,
            folder / artifacts.OVERVIEW,
        ]
        paths += [folder / artifacts.TIMING, folder / artifacts.CLAIMS]
        paths += [
            folder / f"{f}.{ext}" for f in manifest.get("figures", []) for ext in ("svg", "json")
        ]
        if "benchmark" in manifest.get("figures", []):  # drawn from its rows, when they have peaks
            paths += [folder / peaks_figure.FILE]
        paths += [folder / artifacts.DIFF_DIR / d for d in manifest.get("diffs", [])]
        for name, entry in manifest["variants"].items():
            paths += [
                folder / name / f
                for f in entry.get("files", [])
                if Path(f).name != artifacts.TABLE_MD  # shown in the page, never linked
            ]
        found += [p for p in paths if p.is_file()]
    public = Path(root) / artifacts.PUBLIC_DIR
    if public.exists():
        check_links(public)  # the folder of traces of others too
    for folder in sorted(public.glob("*/")):  # traces of others
        load_public(folder)
        found += [
            folder / f for f in (artifacts.DIAGNOSIS, artifacts.VIEWER) if (folder / f).is_file()
        ]
    return [_published(config, root, p) for p in sorted(found)]


def _published(config, root: Path, path: Path) -> File:
    """A set's file as the site publishes it: a picture written again from what the SVG allowlist
    kept (set_svg.clean_svg), anything else as it is."""
    uri = "profiles/" + path.relative_to(root).as_posix()
    if path.suffix == ".svg":
        try:
            return File.generated(config, uri, content=clean_svg(path.read_bytes()))
        except BadSvg as e:
            raise BrokenSet(f"profiles hook: {path}: {e}") from e
    return File.generated(config, uri, abs_src_path=str(path))
