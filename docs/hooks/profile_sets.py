"""The hardware sets the profiles hook shows: each folder of profiles/ with a manifest, checked.

A set is published only whole: a summary that is not one, a file the manifest lists but that is
missing or unreadable, or a folder the manifest does not know fails the build with one line naming
the file. File names are attn.profiling.layout's; this module reads artifacts, it measures nothing.
"""

from __future__ import annotations

import functools
import gzip
import html
import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import PIL.Image
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from attn.profiling import layout

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
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
        return s
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
        elif path.suffix == ".png":
            with PIL.Image.open(path) as image:  # a whole picture, not a PNG signature alone
                image.verify()
        elif path.stat().st_size == 0:
            raise ValueError("empty")
    except (OSError, ValueError, EOFError, ElementTree.ParseError, PIL.UnidentifiedImageError) as e:
        raise BrokenSet(f"profiles hook: {path} is broken ({type(e).__name__}: {e})") from e


SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*")  # what a set's folder may be called: safe in any URL


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
    summaries = {}
    for name, entry in variants.items():
        for f in entry.get("files", []):
            if not (folder / name / f).is_file():
                raise BrokenSet(
                    f"profiles hook: {index} lists {folder / name / f}, which is missing"
                )
            check_file(folder / name / f)
        summaries[name] = check_summary(folder / name / layout.SUMMARY, name)
    for figure in manifest.get("figures", []):
        check_file(folder / f"{figure}.svg")
        check_file(folder / f"{figure}.json")
    env_path = folder / layout.ENVIRONMENT
    env = read_json(env_path) if env_path.exists() else {}
    env = {k: html.escape(v) if isinstance(v, str) else v for k, v in env.items()}
    device_type = manifest.get("device_type") or env.get("device_type") or "cpu"
    name = html.escape(str(manifest.get("device_name") or env.get("device_name") or folder.name))
    name = re.sub(r"([\\`*_\[\]])", r"\\\1", name)  # a tab label is Markdown: its marks as text
    return {
        "slug": folder.name,
        "folder": folder,
        "env": env,
        "manifest": manifest,
        "summaries": summaries,
        "title": "CPU" if device_type == "cpu" else name,
        "device_type": device_type,
    }


@functools.cache
def hardware_sets(root: Path) -> list[dict]:
    """Every hardware set under root (the folders with a manifest), checked, GPUs first.

    Read once per root; the hook clears the cache at the start of each build."""
    found = [
        load_set(p) for p in layout.hardware_dirs(Path(root)) if (p / layout.MANIFEST).is_file()
    ]
    found = sorted(found, key=lambda h: (DEVICE_ORDER.get(h["device_type"], 1), h["title"]))
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
        paths += [
            folder / f"{f}.{ext}" for f in manifest.get("figures", []) for ext in ("svg", "json")
        ]
        paths += [folder / layout.DIFF_DIR / d for d in manifest.get("diffs", [])]
        for name, entry in manifest["variants"].items():
            paths += [folder / name / f for f in entry.get("files", []) if f != layout.TABLE_MD]
        found += [p for p in paths if p.is_file()]
    for folder in sorted((Path(root) / layout.PUBLIC_DIR).glob("*/")):  # traces of others
        found += [folder / f for f in (layout.DIAGNOSIS, layout.VIEWER) if (folder / f).is_file()]
    return [
        File.generated(config, "profiles/" + p.relative_to(root).as_posix(), abs_src_path=str(p))
        for p in sorted(found)
    ]
