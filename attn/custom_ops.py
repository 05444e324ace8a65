"""Build the attn kernels on first use and load them: a CPU library, and a CUDA one where it can run.

The two are separate libraries on purpose: a CUDA build that fails (a toolkit that does not match
torch, a compiler error) leaves the CPU op working and becomes custom_cuda's unavailable reason.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import torch


def _kernel_sources() -> Path:
    """csrc/: inside the installed package as attn/_csrc (see pyproject.toml), else beside attn/."""
    package = Path(__file__).resolve().parent
    installed = package / "_csrc"  # a wheel: setuptools maps csrc/ to the attn._csrc package
    # A source tree (an editable install or a plain checkout) keeps csrc/ beside attn/. Looked up
    # from this file rather than imported by name: with attn on PYTHONPATH, `import attn._csrc` could
    # resolve to another tree's editable install.
    return installed if installed.is_dir() else package.parent / "csrc"


CSRC = _kernel_sources()
# ops.cpp holds the only schema (TORCH_LIBRARY): the CPU library defines the op, the CUDA library
# adds its CUDA implementation (TORCH_LIBRARY_IMPL), so it is loaded second.
CPU_LIBRARY = "attn_ops_cpu"
CPU_SOURCES = (
    "ops.cpp",
    "cpu/flash_attention_cpu.cpp",
    "cpu/flash_attention_backward_cpu.cpp",
    "cpu/bf16_products.cpp",
    "cpu/bf16_backward.cpp",
    "cpu/cpu_features.cpp",
    "cpu/peaks_cpu.cpp",
)
CUDA_LIBRARY = "attn_ops_cuda"
CUDA_SOURCES = ("cuda/flash_fwd.cu", "cuda/flash_bwd.cu", "cuda/binding.cu")
# at::parallel_for is a header template compiled into our library: without OpenMP flags it runs
# every item on the calling thread. (Linux builds of torch use OpenMP; macOS's clang has no -fopenmp.)
OPENMP = ["-fopenmp"] if sys.platform.startswith("linux") else []

_lock = threading.Lock()
_loaded: set[str] = set()  # libraries loaded into this process
_failed: dict[str, str] = {}  # library -> why its build failed; a build is tried once per process


def sources(library: str = CPU_LIBRARY) -> list[Path]:
    """The files a library is built from."""
    names = CPU_SOURCES if library == CPU_LIBRARY else CUDA_SOURCES
    return [CSRC / name for name in names]


def build_directory(library: str = CPU_LIBRARY) -> Path:
    """Where a library is built and cached: per torch version, library and source content.

    Keyed by what the sources say, not where they lie: a fresh clone or an installed copy of the
    same sources reuses the build, and an edited source gets a build of its own.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256()
    for path in sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".cu", ".h", ".cuh")):
        digest.update(path.relative_to(CSRC).as_posix().encode() + path.read_bytes())
    return (
        cache
        / "attention-profiled"
        / f"torch{torch.__version__}-{digest.hexdigest()[:10]}"
        / library
    )


def library_path(library: str = CPU_LIBRARY) -> Path:
    """The built shared library."""
    return build_directory(library) / f"{library}.so"


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


def _missing_sources(library: str) -> str | None:
    missing = [str(f) for f in sources(library) if not f.is_file()]
    if not missing:
        return None
    return (
        f"the kernel sources are missing ({', '.join(missing)}); they ship inside the attn "
        "package as attn/_csrc, so reinstall attention-profiled"
    )


def build_problem() -> str | None:
    """Why the CPU op cannot be built here (a sentence), or None. Cheap: compiles nothing."""
    if CPU_LIBRARY in _loaded:
        return None
    if CPU_LIBRARY in _failed:
        return _failed[CPU_LIBRARY]
    if problem := _missing_sources(CPU_LIBRARY):
        return problem
    if shutil.which(_compiler()) is None:
        return (
            f"no C++ compiler: {_compiler()!r} is not on PATH (install g++ or clang, "
            "or point CXX at one)"
        )
    if not _find_ninja():
        return "ninja is not installed (pip install ninja); torch builds C++ extensions with it"
    return None


def _nvcc() -> str | None:
    """Path of the nvcc torch.utils.cpp_extension would use, or None. Never compiles."""
    from torch.utils.cpp_extension import CUDA_HOME  # None on CPU-only builds of torch

    if CUDA_HOME is None:
        return None
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc")  # where torch will look for it
    return nvcc if os.path.isfile(nvcc) else None


@functools.cache
def _nvcc_version(nvcc: str) -> str | None:
    """The CUDA release nvcc reports ("13.0"), or None when it cannot say."""
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"release (\d+\.\d+)", done.stdout)
    return found.group(1) if found else None


def _cuda_toolkit_problem() -> str | None:
    """Why nvcc cannot build against this torch, asked the way torch's build would, or None."""
    if torch.version.cuda is None:
        return "this torch build has no CUDA support (a CPU-only build)"
    nvcc = _nvcc()
    if nvcc is None:
        return (
            "the kernel is compiled on first use, but no CUDA toolkit was found "
            "(set CUDA_HOME to a CUDA install that has bin/nvcc)"
        )
    found = _nvcc_version(nvcc)
    # torch.utils.cpp_extension refuses to build when the major versions differ.
    if found is not None and found.split(".")[0] != torch.version.cuda.split(".")[0]:
        return (
            f"{nvcc} is CUDA {found} but this torch was built with CUDA {torch.version.cuda}; "
            "torch builds extensions only with a toolkit of the same major version "
            "(point CUDA_HOME at one)"
        )
    return None


def cuda_build_problem() -> str | None:
    """Why the CUDA op cannot be built here (a sentence), or None. Cheap: compiles nothing."""
    if CUDA_LIBRARY in _loaded:
        return None
    if CUDA_LIBRARY in _failed:
        return _failed[CUDA_LIBRARY]
    # The op's schema comes with the CPU library, so the CUDA one needs it too.
    return build_problem() or _missing_sources(CUDA_LIBRARY) or _cuda_toolkit_problem()


def _is_stale(library: str) -> bool:
    """True when the library is not built yet for these sources, i.e. loading will compile."""
    return not library_path(library).is_file()


def _summary(error: Exception) -> str:
    """The line of a build error that says what went wrong: the compiler's first error, if any."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # gcc and nvcc say "error:" or "fatal"; torch's own refusals are a single sentence.
    errors = [line for line in lines if "error:" in line or "fatal" in line]
    return (errors or lines or [type(error).__name__])[0][:400]


def _build(library: str, kind: str) -> None:
    """Compile (first use only; cached) and load one library; a failure is remembered."""
    from torch.utils import cpp_extension

    directory = build_directory(library)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if not _is_stale(library):  # built from these very sources: load it, no build tool
            torch.ops.load_library(str(library_path(library)))
            _loaded.add(library)
            return
        note = f"building the attn {kind} ops into {directory} (first use, about a minute)..."
        print(note, file=sys.stderr, flush=True)
        cpp_extension.load(
            name=library,
            sources=[str(s) for s in sources(library)],
            extra_include_paths=[str(CSRC)],
            extra_cflags=["-O3", *OPENMP],
            extra_ldflags=[*OPENMP],  # a copy: torch appends its own flags to the list it gets
            extra_cuda_cflags=["-O3"],
            build_directory=str(directory),
            is_python_module=False,
            verbose=False,
        )
    # Compiler errors, a toolkit torch refuses, a library that won't load: one line, remembered.
    except Exception as error:
        _failed[library] = f"building the {kind} ops failed: {_summary(error)}"
        raise RuntimeError(f"cannot build the attn {kind} ops: {_failed[library]}") from error
    _loaded.add(library)


def load_ops() -> torch._ops._OpNamespace:
    """Build (first use only; cached) and load the CPU library; returns torch.ops.attn."""
    with _lock:
        if CPU_LIBRARY not in _loaded:
            problem = build_problem()
            if problem is not None:
                raise RuntimeError(f"cannot build the attn C++ ops: {problem}")
            _build(CPU_LIBRARY, "C++")
            _register_autograd()
    return torch.ops.attn


def load_cuda_ops() -> torch._ops._OpNamespace:
    """The CPU library, then the CUDA one (built on first use; cached); returns torch.ops.attn."""
    ops = load_ops()
    with _lock:
        if CUDA_LIBRARY not in _loaded:
            problem = cuda_build_problem()
            if problem is not None:
                raise RuntimeError(f"cannot build the attn CUDA ops: {problem}")
            _build(CUDA_LIBRARY, "CUDA")
    return ops


# ---- backward ----------------------------------------------------------------------------------
# The op has two backwards, one per forward op:
#  - attn::flash_attention_forward_lse (training) also returns each query row's log-sum-exp; its
#    autograd saves q, k, v, the output and lse, and its backward is the fused kernel
#    attn::flash_attention_backward, which recomputes the probabilities tile by tile from lse and
#    never holds a [seq_q, seq_k] tensor.
#  - attn::flash_attention_forward (inference: no lse written) keeps q, k, v; its backward,
#    attention_backward below, recomputes attention with PyTorch ops: correct on every device, but
#    it holds the whole probability matrix. It is what a missing fused backward costs (the training
#    chapter shows it), and what a device whose library has no fused backward falls back to.
# Autograd sits on the lse op rather than on the plain one because setup_context sees only an op's
# outputs: a plain forward with a fused backward would have to write lse on every inference call.


# --8<-- [start:backward]
def attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grad_out: torch.Tensor,
    *,
    is_causal: bool,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of softmax(scale * q @ k^T) @ v for q, k, v, computed in fp32 (or float64)."""
    compute = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf, do = (t.to(compute) for t in (q, k, v, grad_out))
    scores = qf @ kf.transpose(-2, -1) * scale
    if is_causal:  # SDPA's convention: query i sees keys j <= i
        hidden = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, -math.inf)
    p = scores.softmax(dim=-1)
    dv = p.transpose(-2, -1) @ do
    dp = do @ vf.transpose(-2, -1)
    # Softmax's Jacobian, row by row: dS = P * (dP - sum_j P dP), with sum_j P dP = rowsum(dO * O).
    ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
    dq = ds @ kf * scale
    dk = ds.transpose(-2, -1) @ qf * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, is_causal, scale = inputs
    ctx.save_for_backward(q, k, v)
    ctx.is_causal, ctx.scale = is_causal, scale


# --8<-- [end:backward]


def _backward(ctx, grad_out):
    q, k, v = ctx.saved_tensors
    grads = attention_backward(q, k, v, grad_out, is_causal=ctx.is_causal, scale=ctx.scale)
    return (*grads, None, None)  # is_causal and scale get no gradient


# --8<-- [start:fused-backward]
def _setup_fused_context(ctx, inputs, output) -> None:
    q, k, v, is_causal, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)  # lse: 4 bytes a query row, nothing score-sized
    ctx.mark_non_differentiable(lse)
    ctx.is_causal, ctx.scale = is_causal, scale


def _fused_backward(ctx, grad_out, _grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    grads = torch.ops.attn.flash_attention_backward(
        grad_out, q, k, v, out, lse, ctx.is_causal, ctx.scale
    )
    return (*grads, None, None)


# --8<-- [end:fused-backward]


@functools.cache  # once per process: a second registration is an error
def _register_autograd() -> None:
    """Give both forward ops their backward, for the CPU and CUDA kernels alike."""
    torch.library.register_autograd(
        "attn::flash_attention_forward", _backward, setup_context=_setup_context
    )
    torch.library.register_autograd(
        "attn::flash_attention_forward_lse", _fused_backward, setup_context=_setup_fused_context
    )


BACKWARDS = ("fused", "recompute")


def has_fused_backward(device: torch.device | str) -> bool:
    """Whether the loaded libraries implement the lse forward and the fused backward there."""
    key = torch._C._dispatch_key_for_device(torch.device(device).type)
    return all(
        torch._C._dispatch_has_kernel_for_dispatch_key(f"attn::{op}", key)
        for op in ("flash_attention_forward_lse", "flash_attention_backward")
    )


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_causal: bool,
    scale: float,
    *,
    backward: str = "fused",
) -> torch.Tensor:
    """softmax(scale * q @ k^T) @ v through the attn ops (load them first), on q's device.

    Without gradients it is the plain forward. With them, backward="fused" takes the lse forward
    and the fused backward, and backward="recompute" the plain forward and attention_backward. A
    device whose library has no fused backward yet (say a CUDA build before its kernel) falls back
    to recompute, which works everywhere.
    """
    if backward not in BACKWARDS:
        raise ValueError(f"backward={backward!r}; use one of {', '.join(BACKWARDS)}")
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if needs_grad and backward == "fused" and has_fused_backward(q.device):
        out, _lse = torch.ops.attn.flash_attention_forward_lse(q, k, v, is_causal, scale)
        return out
    return torch.ops.attn.flash_attention_forward(q, k, v, is_causal, scale)
