"""The committed profile sets, as the commit holds them: what tests about the committed sets read.

`nox -s profile_examples` rewrites `profiles/<hardware>/` for the machine it runs on (a busy
machine's timing claims may say "cannot tell", a machine without chromium writes no viewer.png),
and `nox -s tests` runs after it. So a test about the committed sets reads `profiles/` as HEAD
has it, exported once per version of it into a folder of its own (`git archive`, a tenth of a second),
not what a run left in the work tree. Outside a git checkout (an unpacked sdist) the work tree's
`profiles/` is all there is. `ATTN_COMMITTED_PROFILES` names another folder to read instead.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU = "cpu-amd-epyc"  # the committed CPU set the tests read


def _git(*args: str) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout


def committed_profiles() -> Path:
    """`profiles/` as the checkout's HEAD commit holds it (the work tree's outside a checkout)."""
    if given := os.environ.get("ATTN_COMMITTED_PROFILES"):
        return Path(given)
    try:  # the tree of profiles/ at HEAD: it changes only with a commit that changes a set
        tree = _git("rev-parse", "HEAD:profiles").decode().strip()
    except (OSError, subprocess.SubprocessError):  # no git, no checkout, no profiles/ committed
        return ROOT / "profiles"
    # One export per tree, shared by every test worker: made in scratch, renamed into place.
    user = getattr(os, "getuid", int)()
    home = Path(tempfile.gettempdir()) / f"attn-committed-{user}-{tree[:16]}"
    if not (home / "profiles").is_dir():
        scratch = Path(tempfile.mkdtemp(prefix=f"{home.name}.", dir=home.parent))
        with tarfile.open(fileobj=io.BytesIO(_git("archive", "HEAD", "profiles"))) as tar:
            # Our own commit's tree: the "data" filter where this Python has it (3.10.12+).
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(scratch, **safe)
        try:
            scratch.rename(home)
        except OSError:  # another worker got there first: theirs is the same tree's
            shutil.rmtree(scratch, ignore_errors=True)
    return home / "profiles"


PROFILES = committed_profiles()
CPU_SET = PROFILES / CPU
