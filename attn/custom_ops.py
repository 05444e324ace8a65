"""Build the attn C++ (and, where CUDA is available, CUDA) ops on first use and load them."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import threading
from pathlib import Path

import torch

# The kernels live in the repository, next to the package: the project is used from a checkout
# (`pip install -e .`); a wheel would not carry csrc/.
CSRC = Path(__file__).resolve().parent.parent / "csrc"
CPU_SOURCES = ("ops.cpp", "cpu/flash_attention_cpu.cpp")
CUDA_SOURCES = ("cuda/flash_fwd.cu", "cuda/binding.cu")
LIBRARY_NAME = "attn_ops"
# at::parallel_for is a header template compiled into our library: without OpenMP flags it runs
# every item on the calling thread. (Linux builds of torch use OpenMP; macOS's clang has no -fopenmp.)
OPENMP = ["-fopenmp"] if sys.platform.startswith("linux") else []

_lock = threading.Lock()
_loaded = False


def _cuda_sources() -> list[Path]:
    """The CUDA sources, when this machine can build and run them; else an empty list."""
    from torch.utils.cpp_extension import CUDA_HOME

    files = [CSRC / name for name in CUDA_SOURCES]
    if torch.cuda.is_available() and CUDA_HOME is not None and all(f.is_file() for f in files):
        return files
    return []


def sources() -> list[Path]:
    """The files the library is built from: the CPU ones, plus the CUDA ones where they apply."""
    return [CSRC / name for name in CPU_SOURCES] + _cuda_sources()


def build_directory() -> Path:
    """Where the build is cached: per torch version and CPU/CUDA flavour, never inside the repo."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    flavour = f"cu{torch.version.cuda.replace('.', '')}" if _cuda_sources() else "cpu"
    return cache / "attention-profiled" / f"torch{torch.__version__}-{flavour}"


def _compiler() -> str:
    """The C++ compiler torch.utils.cpp_extension will call (CXX, else c++)."""
    words = shlex.split(os.environ.get("CXX", "c++"))
    return words[0] if words else "c++"


def _find_ninja() -> bool:
    """Whether ninja is on PATH; pip's ninja (in an unactivated venv) is put on PATH if needed."""
    if shutil.which("ninja"):
        return True
    try:
        import ninja  # the PyPI package ships the binary
    except ImportError:
        return False
    os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    return shutil.which("ninja") is not None


def build_problem() -> str | None:
    """Why the ops cannot be built here (a sentence), or None. Cheap: compiles nothing."""
    if _loaded:
        return None
    missing = [str(f) for f in sources() if not f.is_file()]
    if missing:
        return (
            f"the C++ sources are not there ({', '.join(missing)}); the custom ops build from a "
            "source checkout of attention-profiled (pip install -e .)"
        )
    if shutil.which(_compiler()) is None:
        return (
            f"no C++ compiler: {_compiler()!r} is not on PATH (install g++ or clang, "
            "or point CXX at one)"
        )
    if not _find_ninja():
        return "ninja is not installed (pip install ninja); torch builds C++ extensions with it"
    return None


def _is_stale(directory: Path) -> bool:
    """True when the library is missing or older than a source, i.e. loading will compile."""
    built = directory / f"{LIBRARY_NAME}.so"
    if not built.is_file():
        return True
    newest = max(p.stat().st_mtime for p in [*sources(), *CSRC.rglob("*.h")])
    return built.stat().st_mtime < newest


def load_ops() -> torch._ops._OpNamespace:
    """Build (first use only; cached) and load the library; returns torch.ops.attn."""
    global _loaded
    with _lock:
        if not _loaded:
            problem = build_problem()
            if problem is not None:
                raise RuntimeError(f"cannot build the attn C++ ops: {problem}")
            from torch.utils.cpp_extension import load

            directory = build_directory()
            directory.mkdir(parents=True, exist_ok=True)
            if _is_stale(directory):
                print(
                    f"building attn C++ ops into {directory} (first use, about a minute)...",
                    file=sys.stderr,
                    flush=True,
                )
            load(
                name=LIBRARY_NAME,
                sources=[str(s) for s in sources()],
                extra_include_paths=[str(CSRC)],
                extra_cflags=["-O3", *OPENMP],
                extra_ldflags=OPENMP,
                extra_cuda_cflags=["-O3"],
                build_directory=str(directory),
                is_python_module=False,
                verbose=False,
            )
            _loaded = True
    return torch.ops.attn
