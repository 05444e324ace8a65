"""Empty compile caches for a pair of example runs: the first call cold, then warm.

Inductor keeps what it builds under TORCHINDUCTOR_CACHE_DIR (graphs, generated code, built
libraries, autotuning) and Triton its kernels under TRITON_CACHE_DIR; on a CPU Inductor keeps its
precompiled headers apart, in its default folder under the temp folder, whatever
TORCHINDUCTOR_CACHE_DIR says. All three point into one new folder here: a run there compiles
everything, as on a fresh machine (cold), and a second run there finds what the first built
(warm). The local caches are on and the remote ones off, whatever this shell says, so that
warm means warm and cold means cold. The folder is removed after, whatever happened.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attn.inductor import spaceless_temp_dir

FOLDERS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TMPDIR")  # each a folder of its own
SWITCHES = {
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "0",
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "0",
}


@contextmanager
def empty_compile_cache() -> Iterator[dict[str, str]]:
    """The variables that put every compile cache in a new, empty folder, removed on exit."""
    # Not under a path with whitespace: Inductor's compiler command would split it.
    with tempfile.TemporaryDirectory(prefix="attn-cold-cache-", dir=spaceless_temp_dir()) as top:
        yield cache_env(Path(top))


def cache_env(top: Path) -> dict[str, str]:
    """FOLDERS, each made empty under `top`, and SWITCHES."""
    folders = {name: top / name.lower() for name in FOLDERS}
    for folder in folders.values():
        folder.mkdir()  # a TMPDIR that is not there is passed over for /tmp
    return {**{name: str(folder) for name, folder in folders.items()}, **SWITCHES}
