"""MkDocs hook: publish the source files the chapters excerpt or tell readers to copy, whole, each
example as a zip laid out as the README's copy recipe, and the package itself as a wheel.

A chapter shows an excerpt of, say, examples/naive_attention.py and links to the whole file. Each
spec in attn/specs/ names its example script and the files its chapter excerpts; this hook puts
every one of them into the site at its path in the repository (site/examples/naive_attention.py),
so that link works on any host, offline too; a file a page excerpts that no spec names (a CI job's
YAML) is published the same way. A strict build fails when a chapter links to a source that is
neither, since MkDocs finds no such file.
"""

from __future__ import annotations

import ast
import io
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from mkdocs.structure.files import File

from attn import specs

log = logging.getLogger("mkdocs.hooks.sources")


def source_paths(root: Path) -> list[str]:
    """Each spec's example script and sources, and the attn/ modules they import, once each, in
    chapter order."""
    named = dict.fromkeys(p for s in specs.SPECS for p in (s.example[0], *s.sources))
    copyable = (p for p in named if p.startswith("examples/") or re.fullmatch(r"attn/\w+\.py", p))
    imported = (f for p in copyable for f in _imports(root, p))
    return list(dict.fromkeys([*named, *imported]))


EXCERPT = re.compile(r"^[ \t]*<!--\s*profile-excerpt:\s*[\"']?(?P<path>[^\s:\"']+):", re.M)


def published_paths(root: Path, docs: Path) -> list[str]:
    """What the site publishes whole: the spec's files and every file a page excerpts (a CI job's
    file, say), since each excerpt links to its whole file."""
    excerpted = [
        m["path"]
        for page in sorted(docs.glob("*.md"))
        for m in EXCERPT.finditer(page.read_text(encoding="utf-8"))
        if (root / m["path"]).is_file()
    ]
    return list(dict.fromkeys([*source_paths(root), *excerpted]))


def _imports(root: Path, path: str) -> list[str]:
    """The attn/ modules a file imports at its top, and theirs in turn."""
    found, todo = [], [path]
    while todo:
        for node in ast.parse((root / todo.pop()).read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attn."):
                name = node.module.replace(".", "/") + ".py"
                if name not in found:
                    found.append(name)
                    todo.append(name)
    return found


def recipe(root: Path, script: str) -> list[str] | None:
    """What a reader copies to run an example without a checkout (the README's recipe): the script,
    the attn/ modules it imports and those its flags choose (its specs' sources directly under
    attn/), with theirs. A module built on our kernels needs the package: left out, and None when
    the script itself needs it."""
    chosen = [
        f
        for s in specs.SPECS
        if s.example[0] == script
        for f in s.sources
        if re.fullmatch(r"attn/\w+\.py", f)
    ]
    needs = lambda f: "attn/custom_ops.py" in [f, *_imports(root, f)]  # noqa: E731
    mine = _imports(root, script)
    if any(needs(f) for f in mine):
        return None
    files = [*mine, *(f for m in chosen if not needs(m) for f in [m, *_imports(root, m)])]
    return [script, *dict.fromkeys(files)]


def recipe_zip(root: Path, files: list[str]) -> bytes:
    """The files in a zip, the script at its top and the modules under attn/, dated 1980 so that
    the same files make the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            name = f if f.startswith("attn/") else Path(f).name
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, (root / f).read_bytes(), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def recipe_zips(root: Path) -> dict[str, list[str]]:
    """examples/<script>.zip -> its files, for every example a reader can copy out."""
    scripts = dict.fromkeys(s.example[0] for s in specs.SPECS)
    found = {s: recipe(root, s) for s in scripts}
    return {s.removesuffix(".py") + ".zip": files for s, files in found.items() if files}


def wheel_name(root: Path) -> str:
    """The file name of the package's wheel in site/dist/, from pyproject.toml's name and version
    (as pip names a pure-Python wheel)."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    fields = dict(
        re.findall(r'^(name|version)\s*=\s*"([^"]+)"', project[1] if project else "", re.M)
    )
    if set(fields) != {"name", "version"}:
        raise ValueError(f"{root / 'pyproject.toml'}: no name and version under [project]")
    return f"{re.sub(r'[-_.]+', '_', fields['name'])}-{fields['version']}-py3-none-any.whl"


def on_files(files, config):
    root = Path(config.config_file_path).resolve().parent
    for uri in published_paths(root, Path(config["docs_dir"])):
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(root / uri)))
    for uri, parts in recipe_zips(root).items():
        files.append(File.generated(config, uri, content=recipe_zip(root, parts)))
    return files


def on_post_build(config):
    """Publish the package as a wheel in site/dist/, for readers without a checkout (the notebook
    installs it). Built from a copy of what the wheel holds, so the checkout gets no build files."""
    root = Path(config.config_file_path).resolve().parent
    dist = Path(config["site_dir"]) / "dist"
    with tempfile.TemporaryDirectory(prefix="attn-wheel-") as tmp:
        for name in ("pyproject.toml", "README.md", "LICENSE", "attn", "csrc"):
            copy = shutil.copytree if (root / name).is_dir() else shutil.copy
            copy(root / name, Path(tmp) / name)
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
        done = subprocess.run(
            [*pip, "--no-build-isolation", "-w", str(dist), tmp], capture_output=True, text=True
        )
    if done.returncode != 0:  # e.g. no setuptools here: the site builds, without the wheel
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        log.warning("sources hook: the package's wheel was not built (%s)", last)
