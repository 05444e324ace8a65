"""MkDocs hook: publish the source files the chapters excerpt or tell readers to copy.

A chapter shows an excerpt of, say, examples/naive_attention.py and links to the whole file. This
hook puts each file named in SOURCES into the site at its path in the repository
(site/examples/naive_attention.py), so that link works on any host, offline too, and a strict build
fails when a chapter links to a source that is not published.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

SOURCES = (
    "examples/*.py",
    "attn/naive.py",
    "attn/inplace.py",
    "attn/sdpa.py",
    "attn/compiled.py",
    "attn/flex.py",
    "attn/decode.py",
    "attn/profiling/decoding.py",
    "attn/custom_cpu.py",
    "attn/custom_cuda.py",
    "attn/custom_triton.py",
    "csrc/cpu/flash_attention_cpu.cpp",
    "csrc/cuda/flash_fwd.cu",
)


def source_paths(root: Path) -> list[Path]:
    """The files SOURCES names under the repository root, each once, in a stable order."""
    found = {p for pattern in SOURCES for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


def on_files(files, config):
    root = Path(config.config_file_path).resolve().parent
    for path in source_paths(root):
        uri = path.relative_to(root).as_posix()
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
