"""The hardware sets the profiles hook shows: each folder of profiles/ with a manifest, checked.

A set is published only whole: a summary that is not one, a file the manifest lists but that is
missing or unreadable, or a folder the manifest does not know fails the build with one line naming
the file. File names are attn.traces.layout's; this module reads artifacts, it measures nothing.
"""

from __future__ import annotations

import functools
import gzip
import html
import json
import math
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import PIL.Image
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from attn.traces import intervals, layout

DEVICE_ORDER = {"cuda": 0, "cpu": 2}  # GPUs first, anything else in between, CPU last


class BrokenSet(PluginError):
    """A profile set the site must not publish; the message names the file and the problem."""


def read_json(path: Path, kind: type = dict):
    """The JSON at path, which must be a `kind`, or BrokenSet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BrokenSet(f"profiles hook: cannot read {path}: {e}") from e
    if not isinstance(data, kind):
        raise BrokenSet(
            f"profiles hook: {path} holds a {type(data).__name__}, not a {kind.__name__}"
        )
    return data


def _number(value) -> bool:
    """A count or a time a page can show: finite and not negative ("nan µs", "-5 ATen ops")."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


OPTIONAL_NUMBERS = (
    "device_time_us", "kernels_per_forward", "memset_per_forward", "peak_memory_bytes",
)  # fmt: skip


def _check_shown(path: Path, s: dict) -> None:
    """What a page shows of a summary beyond its counts: each field the type the page reads."""
    for key in OPTIONAL_NUMBERS:
        if s.get(key) is not None and not _number(s[key]):
            raise BrokenSet(f"profiles hook: {path}: {key} is {s[key]!r}, not a number")
    memcpy = s.get("memcpy_per_forward")
    if memcpy is not None and not (
        isinstance(memcpy, dict)
        and all(isinstance(k, str) and _number(n) for k, n in memcpy.items())
    ):
        raise BrokenSet(
            f"profiles hook: {path}: memcpy_per_forward is {memcpy!r}, not counts by direction"
        )
    kernels = s.get("kernels")
    if kernels is not None and not (
        isinstance(kernels, list) and all(isinstance(k, str) for k in kernels)
    ):
        raise BrokenSet(f"profiles hook: {path}: kernels is {kernels!r}, not a list of names")
    claims = s.get("claims")
    if claims is not None and not isinstance(claims, list):
        raise BrokenSet(f"profiles hook: {path}: claims is {claims!r}, not a list")
    for i, c in enumerate(claims or []):
        if not (
            isinstance(c, dict)
            and isinstance(c.get("text"), str)
            and c.get("holds") in (True, False, None)
            and isinstance(c.get("observed"), (str, type(None)))
        ):
            raise BrokenSet(
                f"profiles hook: {path}: claims[{i}] is {c!r}, not a claim (text, holds, observed)"
            )
    mark = (s.get("viewer") or {}).get("mark") if isinstance(s.get("viewer"), dict) else None
    if mark is not None and not (
        isinstance(mark, dict) and _number(mark.get("left")) and _number(mark.get("right"))
    ):
        raise BrokenSet(f"profiles hook: {path}: viewer.mark is {mark!r}, not left and right")


RANK_NUMBERS = ("communication_us", "recv_wait_us", "sends_per_range")
RANK_OPTIONAL = ("blocks", "hidden_share")


def _check_ranks(path: Path, s: dict) -> None:
    """A summary across ranks: each rank's row holds the numbers its table shows."""
    ranks, imb = s["ranks"], s.get("imbalance")

    def good(r) -> bool:
        per = r.get("compute_us_per_range") if isinstance(r, dict) else None
        return (
            type(r.get("rank")) is int
            and isinstance(per, list) and per and all(map(_number, per))
            and all(_number(r.get(k)) for k in RANK_NUMBERS)
            and all(r.get(k) is None or _number(r[k]) for k in RANK_OPTIONAL)
            and all(map(_number, r.get("bytes_per_send") or []))
        )  # fmt: skip

    bad = next((r for r in ranks if not good(r)), None) if isinstance(ranks, list) else ranks
    if bad is not None or not ranks:
        raise BrokenSet(f"profiles hook: {path}: ranks holds {bad!r}, not a rank's row")
    if imb is not None and not (
        isinstance(imb, dict)
        and all(_number(imb.get(k)) for k in ("value", "low", "high", "ranges", "straggler"))
    ):
        raise BrokenSet(f"profiles hook: {path}: imbalance is {imb!r}, not a ratio and its range")


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
    if not s["available"]:
        if not isinstance(s.get("reason"), (str, type(None))):
            raise BrokenSet(f"profiles hook: {path}: reason is {s['reason']!r}, not a sentence")
        return s
    _check_shown(path, s)
    if "ranks" in s:
        _check_ranks(path, s)
    for key in ("cpu_time_us", "ops_per_forward"):
        if not _number(s.get(key)):
            raise BrokenSet(f"profiles hook: {path}: {key} is {s.get(key)!r}, not a number")
    shape = s.get("shape")
    if not isinstance(shape, dict) or not all(
        _number(shape.get(k)) for k in ("batch", "heads", "seq_q", "seq_k", "head_dim")
    ):
        raise BrokenSet(
            f"profiles hook: {path}: shape is {shape!r}, not batch/heads/seq_q/seq_k/head_dim"
        )
    return s


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
            trace = json.loads(gzip.decompress(path.read_bytes()))
            if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
                raise ValueError("not a Chrome trace: no 'traceEvents' list")
        elif path.suffix == ".svg":
            ElementTree.fromstring(path.read_bytes())
        elif path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.name == layout.TABLE_MD:
            check_table(path)
        elif path.suffix == ".png":
            with PIL.Image.open(path) as image:  # a whole picture, not a PNG signature alone
                image.verify()
        elif path.stat().st_size == 0:
            raise ValueError("empty")
    except (OSError, ValueError, EOFError, ElementTree.ParseError, PIL.UnidentifiedImageError) as e:
        raise BrokenSet(f"profiles hook: {path} is broken ({type(e).__name__}: {e})") from e


SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*")  # what a set's folder may be called: safe in any URL


def check_timing(path: Path) -> dict | None:
    """A set's timing.json, each row's median and interval checked, keyed by variant (None when the
    set has none): {variant: row, "score_clone": row, ...} beside the file's own fields."""
    if not path.is_file():
        return None
    data = read_json(path)
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise BrokenSet(f"profiles hook: {path} has no 'rows' list")
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

    What a contributed set says about itself (device name, versions) is HTML-escaped here, once,
    so every tab, attribute and line that shows it shows text."""
    if not SLUG.fullmatch(folder.name):
        raise BrokenSet(
            f"profiles hook: {folder} cannot be a set's folder: name it in lowercase letters, "
            "digits, '.', '_' and '-' (as attn.profiling does)"
        )
    index = folder / layout.MANIFEST
    manifest = read_json(index)
    variants = manifest.get("variants")
    if not isinstance(variants, dict):
        raise BrokenSet(f"profiles hook: {index} has no 'variants' object")
    _check_folders(folder, index, variants)
    summaries = {
        name: _check_variant(folder, index, name, entry) for name, entry in variants.items()
    }
    for figure in manifest.get("figures", []):
        check_file(folder / f"{figure}.svg")
        check_file(folder / f"{figure}.json")
    env = _environment(folder)
    device_type = manifest.get("device_type") or env.get("device_type") or "cpu"
    name = _device_name(manifest, env, folder)
    return {
        "slug": folder.name,
        "folder": folder,
        "env": env,
        "manifest": manifest,
        "summaries": summaries,
        "title": "CPU" if device_type == "cpu" else name,
        "name": name,
        "device_type": device_type,
        "timing": check_timing(folder / layout.TIMING),
    }


def _check_folders(folder: Path, index: Path, variants: dict) -> None:
    """Every variant folder on disk must be one the manifest lists (scratch and diffs aside)."""
    on_disk = {
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not layout.is_scratch(p) and p.name != layout.DIFF_DIR
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
        return bool(layout.RANK_DIR.fullmatch(rank)) and file in layout.VARIANT_FILES
    return f in (*layout.VARIANT_FILES, layout.RANKS_FIGURE)


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
                f"({', '.join(layout.VARIANT_FILES)}, {layout.RANKS_FIGURE}, or a rank's: "
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
        check_summary(folder / name / summary / layout.SUMMARY, name)
    return check_summary(folder / name / layout.SUMMARY, name)


def _environment(folder: Path) -> dict:
    """The set's environment.json ({} without one), its text escaped for HTML and Markdown."""
    env_path = folder / layout.ENVIRONMENT
    env = read_json(env_path) if env_path.exists() else {}
    marks = lambda v: re.sub(r"([\\`\[\]{}])", r"\\\1", v)  # noqa: E731  (a link, code, attributes)
    return {k: html.escape(marks(v)) if isinstance(v, str) else v for k, v in env.items()}


def _device_name(manifest: dict, env: dict, folder: Path) -> str:
    """The set's device as a tab label shows it: escaped HTML, its Markdown marks as text."""
    name = html.escape(str(manifest.get("device_name") or env.get("device_name") or folder.name))
    return re.sub(r"([\\`*_\[\]])", r"\\\1", name)  # a tab label is Markdown: its marks as text


@functools.cache
def hardware_sets(root: Path) -> list[dict]:
    """Every hardware set under root (the folders with a manifest), checked, GPUs first.

    Read once per root; the hook clears the cache at the start of each build."""
    found = [
        load_set(p) for p in layout.hardware_dirs(Path(root)) if (p / layout.MANIFEST).is_file()
    ]
    found = sorted(found, key=lambda h: (DEVICE_ORDER.get(h["device_type"], 1), h["title"]))
    titles = [h["title"] for h in found]
    for h in found:  # two CPU sets: each tab names its CPU
        if titles.count(h["title"]) > 1 and h["device_type"] == "cpu":
            h["title"] = f"CPU: {h['name']}"
    titles = [h["title"] for h in found]
    for h in found:  # two sets of one title would make two tabs no one can tell (or select) apart
        if titles.count(h["title"]) > 1:
            h["title"] = f"{h['title']} ({h['slug']})"
    return found


def artifact_files(root: Path, config) -> list[File]:
    """Every published artifact of every set, as MkDocs files at profiles/<hardware>/..."""
    found = []
    for hw in hardware_sets(root):
        folder, manifest = hw["folder"], hw["manifest"]
        paths = [folder / layout.MANIFEST, folder / layout.ENVIRONMENT, folder / layout.OVERVIEW]
        paths += [folder / layout.TIMING]
        paths += [
            folder / f"{f}.{ext}" for f in manifest.get("figures", []) for ext in ("svg", "json")
        ]
        paths += [folder / layout.DIFF_DIR / d for d in manifest.get("diffs", [])]
        for name, entry in manifest["variants"].items():
            paths += [
                folder / name / f
                for f in entry.get("files", [])
                if Path(f).name != layout.TABLE_MD  # shown in the page, never linked
            ]
        found += [p for p in paths if p.is_file()]
    for folder in sorted((Path(root) / layout.PUBLIC_DIR).glob("*/")):  # traces of others
        found += [folder / f for f in (layout.DIAGNOSIS, layout.VIEWER) if (folder / f).is_file()]
    return [
        File.generated(config, "profiles/" + p.relative_to(root).as_posix(), abs_src_path=str(p))
        for p in sorted(found)
    ]
