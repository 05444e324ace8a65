"""Empty compile caches for a cold run: every folder torch caches in, new, empty and removed after."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attn.profiling.cold_cache import FOLDERS, SWITCHES, empty_compile_cache

# Where torch itself puts each cache, asked in a fresh interpreter with the cold run's variables.
WHERE = """import json, tempfile
from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir, triton_cache_dir
print(json.dumps({"inductor": cache_dir(), "triton": triton_cache_dir(0),
                  "precompiled headers": default_cache_dir(), "temp": tempfile.gettempdir()}))"""


def test_each_cache_folder_is_new_and_empty_and_all_are_removed_after():
    with empty_compile_cache() as env:
        folders = [Path(env[name]) for name in FOLDERS]
        (top,) = {f.parent for f in folders}  # one folder to remove holds them all
        assert all(f.is_dir() and not any(f.iterdir()) for f in folders)
        assert not any(c.isspace() for c in str(top))  # Inductor's compiler command splits paths
        assert {k: env[k] for k in SWITCHES} == SWITCHES
        (folders[0] / "built.so").write_bytes(b"")  # what a cold run leaves
    assert not top.exists()


def test_the_folder_is_removed_when_the_run_fails():
    with pytest.raises(RuntimeError), empty_compile_cache() as env:
        top = Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent
        raise RuntimeError("the example failed")
    assert not top.exists()


def test_torch_finds_every_cache_it_keeps_inside_the_empty_folder():
    """On a CPU the precompiled headers go to Inductor's default folder, under the temp folder,
    whatever TORCHINDUCTOR_CACHE_DIR says: TMPDIR moves them in too."""
    with empty_compile_cache() as env:
        top = Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent
        found = subprocess.run(
            [sys.executable, "-c", WHERE], env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        where = json.loads(found.stdout)
        assert all(top in Path(path).parents for path in where.values()), where
