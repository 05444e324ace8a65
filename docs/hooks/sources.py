"""MkDocs hook: publish the source files the chapters excerpt or tell readers to copy, whole, and
the package itself as a wheel.

A chapter shows an excerpt of, say, examples/naive_attention.py and links to the whole file. Each
spec in attn/specs.py names its example script and the files its chapter excerpts; this hook puts
every one of them into the site at its path in the repository (site/examples/naive_attention.py),
so that link works on any host, offline too. A strict build fails when a chapter links to a source
that no spec names, since MkDocs finds no such file.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.structure.files import File

from attn import specs

log = logging.getLogger("mkdocs.hooks.sources")


def source_paths() -> list[str]:
    """Each spec's example script and sources, once each, in chapter order."""
    return list(dict.fromkeys(p for s in specs.SPECS for p in (s.example[0], *s.sources)))


def on_files(files, config):
    root = Path(config.config_file_path).resolve().parent
    for uri in source_paths():
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(root / uri)))
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
