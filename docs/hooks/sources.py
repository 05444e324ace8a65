"""MkDocs hook: publish the source files the chapters excerpt or tell readers to copy, whole.

A chapter shows an excerpt of, say, examples/naive_attention.py and links to the whole file. Each
spec in attn/specs.py names its example script and the files its chapter excerpts; this hook puts
every one of them into the site at its path in the repository (site/examples/naive_attention.py),
so that link works on any host, offline too. A strict build fails when a chapter links to a source
that no spec names, since MkDocs finds no such file.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

from attn import specs


def source_paths() -> list[str]:
    """Each spec's example script and sources, once each, in chapter order."""
    return list(dict.fromkeys(p for s in specs.SPECS for p in (s.example[0], *s.sources)))


def on_files(files, config):
    root = Path(config.config_file_path).resolve().parent
    for uri in source_paths():
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(root / uri)))
    return files
