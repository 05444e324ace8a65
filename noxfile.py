"""Sessions: tests, docs, profile_examples, benchmark, serve.

nox -s tests                    # the test suite, docs code blocks included
nox -s profile_examples         # profile every example and run the sweeps here, then build site/
nox -s benchmark                # only the benchmark: custom kernels against SDPA on this machine
nox -s docs                     # build site/ from the committed profiles/
nox --no-venv -s profile_examples -- --device cuda   # a GPU box with torch already installed
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
# Pinned for a quick CPU install where a local wheel exists; GPU users get that release's CUDA build.
# Override with e.g. ATTN_TORCH="torch==2.11.0" (or use --no-venv with a preinstalled torch).
TORCH = os.environ.get("ATTN_TORCH", "torch==2.13.0")
# One environment for every session, so torch (a GB or more) is installed once, not per session.
SHARED = ROOT / ".nox" / "attention-profiled"
EXTRAS = "test,docs,viewer"  # what every session together needs
CPU_TORCH = "https://download.pytorch.org/whl/cpu"  # PyTorch's own CPU wheels

nox.options.sessions = ["tests"]
nox.options.reuse_venv = "yes"


def torch_index() -> list[str]:
    """Where pip also looks for torch: PyTorch's CPU wheels on a machine with no NVIDIA GPU (PyPI's
    Linux torch is the CUDA build: gigabytes of CUDA libraries a CPU never loads), none on a GPU
    machine; ATTN_TORCH_INDEX overrides (empty: pip's own configuration only)."""
    index = os.environ.get("ATTN_TORCH_INDEX")
    if index is None:
        gpu = shutil.which("nvidia-smi") or Path("/dev/nvidia0").exists()
        index = "" if gpu else CPU_TORCH
    # An extra index, not the only one: its +cpu build wins the pin where it is reachable, and
    # a machine offline (or with its own wheel mirror) still installs from pip's configuration.
    # Asked once here: an index pip cannot reach costs it five retries for every package it looks up.
    return ["--extra-index-url", index] if index and _reachable(index) else []


def _reachable(url: str, timeout_s: float = 3.0) -> bool:
    """Whether the index's host answers on its port within a few seconds."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    try:
        port = where.port or (443 if where.scheme == "https" else 80)
        socket.create_connection((where.hostname, port), timeout=timeout_s).close()
    except (OSError, ValueError):
        return False
    return True


def install(session: nox.Session) -> str:
    """The Python a session runs: the one shared environment, made or brought up to date (pip's
    own output shown: the torch download is the long step), or with --no-venv the interpreter's."""
    # Inductor's cache in ours, outside the checkout: warm compiles, and no cache paths in /tmp.
    # Under a home folder with a space attn/inductor.py moves it (the compiler command splits it).
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attention-profiled"
    session.env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    if session.venv_backend == "none":
        # --no-venv: use the interpreter's own torch; make `attn` importable from this checkout.
        session.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
        )
        return "python"
    python = str(SHARED / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    # pip takes 10 s to find nothing to do: skip it while the pins and the extras are as installed.
    wanted = f"{TORCH} {torch_index()} .[{EXTRAS}]\n{(ROOT / 'pyproject.toml').read_text()}"
    stamp = SHARED / "attention-profiled-installed.txt"
    if stamp.is_file() and stamp.read_text() == wanted:
        return python
    if not Path(python).exists():  # made by the session's own Python: the version nox picked
        session.run("python", "-m", "venv", str(SHARED))
    session.log(f"installing {TORCH} and the project into {SHARED}, once for every session")
    pip = [python, "-m", "pip", "install", "--progress-bar", "on"]
    session.run(*pip, *torch_index(), TORCH, external=True)  # before the project: its torch
    session.run(*pip, "-e", f".[{EXTRAS}]", external=True)
    stamp.write_text(wanted)
    return python


def fetch_viewer(session: nox.Session, python: str) -> None:
    """The offline trace viewer, once per machine (PyPI and npm); without it, screenshots are skipped."""
    session.run(python, "-m", "attn.profiling.viewer", "fetch", success_codes=[0, 1], external=True)


MKDOCS_ENV = {
    # Material's boxed notice about MkDocs 2.0 on every build: about its plans, not this site.
    "NO_MKDOCS_2_WARNING": "1",
    # The notebook's kernel talks over IPC, not TCP (docs/jupyter/ says why).
    "JUPYTER_CONFIG_PATH": str(ROOT / "docs" / "jupyter"),
}


def build_site(session: nox.Session, python: str) -> None:
    if session.venv_backend == "none" and shutil.which("mkdocs") is None:
        session.warn("mkdocs is not installed here: profiles written, site not built")
        return
    session.run(
        python, "-m", "mkdocs", "build", "--strict", "--site-dir", "site", env=MKDOCS_ENV,
        external=True,
    )  # fmt: skip


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite, including every runnable code block in README.md and docs/."""
    python = install(session)
    fetch_viewer(session, python)
    # -n: a worker per core (at most 4: each imports torch), a test file per worker at a time, so
    # a file's fixtures (a built site, a compiled op) are made once. --durations: the slowest
    # tests, printed at the end of every run, so a slow one is seen.
    session.run(
        python, "-m", "pytest", "--codeblocks", "-n", "auto", "--maxprocesses", "4",
        "--dist", "loadfile", "--durations=25", "tests", "README.md", "docs", *session.posargs,
        external=True,
    )  # fmt: skip


@nox.session
def profile_examples(session: nox.Session) -> None:
    """Run every example under the profiler into profiles/<hardware>/, then the timing pass and the
    sweeps (scaling, decoding, training, the benchmark of the custom kernels against SDPA, SDPA's
    dispatch, and what the profiler itself costs), then build the site."""
    python = install(session)
    fetch_viewer(session, python)
    # Every variant's example (its spec in attn/specs/ names its script and flags), then the sweeps.
    session.run(
        python, "-m", "attn.profiling", "example", "--out", "profiles", *session.posargs,
        external=True,
    )  # fmt: skip
    # The timing pass, then scaling, decoding, training, the benchmark, dispatch and the
    # profiler's own cost: one process (attn/profiling/every_sweep.py).
    args = ["--out", "profiles", *_device_args(session.posargs)]
    session.run(python, "-m", "attn.profiling.every_sweep", *args, external=True)
    build_site(session, python)


def _device_args(posargs: list[str]) -> list[str]:
    """The --device flag (and its value) out of the examples' flags, for the other entry points."""
    for i, arg in enumerate(posargs):
        if arg == "--device" and i + 1 < len(posargs):
            return ["--device", posargs[i + 1]]
        if arg.startswith("--device="):
            return [arg]
    return []


@nox.session
def scaling(session: nox.Session) -> None:
    """Sweep sequence length for every available variant: profiles/<hardware>/scaling.{json,svg}."""
    python = install(session)
    args = ["--out", "profiles", *session.posargs]
    session.run(python, "-m", "attn.profiling.scaling", *args, external=True)


@nox.session
def benchmark(session: nox.Session) -> None:
    """Time the custom kernels against SDPA: profiles/<hardware>/benchmark.{json,svg} and ratios."""
    python = install(session)
    args = ["--out", "profiles", *session.posargs]
    session.run(python, "-m", "attn.profiling.benchmark", *args, external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """Build site/ from the committed profiles."""
    python = install(session)
    fetch_viewer(session, python)
    build_site(session, python)


@nox.session
def serve(session: nox.Session) -> None:
    """Serve the site with live reload on http://127.0.0.1:8000."""
    python = install(session)
    session.run(python, "-m", "mkdocs", "serve", *session.posargs, env=MKDOCS_ENV, external=True)
