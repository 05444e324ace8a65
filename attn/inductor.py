"""Can torch.compile generate code here? The checks every compiled variant shares.

Inductor writes C++ for the CPU, built with the compiler named by CXX, and Triton kernels for GPUs.
Torch only: copy this file with attn/compiled.py or attn/flex.py (keep the relative path).
"""

import os
import shutil
import sys
import tempfile
from importlib.util import find_spec

import torch

# A variant meets several dtypes, shapes and both values of is_causal; each compiles anew (a
# recompile). Past torch's default of 8 recompiles a function falls back to eager unnoticed, so each
# compiled module keeps a budget of its own, and fullgraph=True turns running past it (or a graph
# break) into an error instead.
RECOMPILE_LIMIT = 64
# On CPU the C++ kernels Inductor generates are invisible to the profiler (one opaque
# "## Call CompiledFxGraph ##" row) unless each records itself; these modules are here to be profiled.
KERNEL_ROWS = {"cpp.enable_kernel_profile": True}


def compiler_safe_cache() -> None:
    """Move Inductor's cache where its C++ compiler command survives the path.

    Inductor joins that command into one string and splits it on whitespace again, so a cache in
    a home folder with a space (/home/Jane Doe/.cache/...) broke every compile on the CPU: such a
    folder is swapped for one under the temp folder, whose path has none. Called on import, before
    anything compiles (Inductor reads the variable at each compile).
    """
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tempfile.gettempdir()  # its default
    if not any(c.isspace() for c in current):
        return
    if (base := spaceless_temp_dir()) is not None:
        user = getattr(os, "getuid", lambda: "user")()
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(base, f"torchinductor_attn_{user}")


def spaceless_temp_dir() -> str | None:
    """The temp folder, else /tmp, whichever path has no whitespace (None: neither does)."""
    for base in (tempfile.gettempdir(), "/tmp"):
        if not any(c.isspace() for c in base) and os.path.isdir(base):
            return base
    return None


compiler_safe_cache()


def recompile_budget() -> dict:
    """torch.compile's arguments for a recompile budget of the module's own, as far as this torch has
    them. Torch 2.13 takes isolate_recompiles and recompile_limit; an older one (2.11) has only the
    process-wide limit, which is raised to the same number instead."""
    import inspect

    accepted = inspect.signature(torch.compile).parameters
    budget = {"isolate_recompiles": True, "recompile_limit": RECOMPILE_LIMIT}
    if all(name in accepted for name in budget):
        return budget
    config = torch._dynamo.config
    if getattr(config, "recompile_limit", RECOMPILE_LIMIT) < RECOMPILE_LIMIT:
        config.recompile_limit = RECOMPILE_LIMIT
    return {name: value for name, value in budget.items() if name in accepted}


def inductor_problem(device: torch.device | str, what: str = "the compiled variants") -> str | None:
    """Why Inductor cannot generate code for this device here, or None."""
    device = torch.device(device)
    if device.type == "cpu":
        cxx = os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")
        if shutil.which(cxx) is None:
            return (
                f"torch.compile builds generated C++ for the CPU and there is no C++ compiler "
                f"here ({cxx!r} is not on PATH; install g++ or set CXX)"
            )
        return None
    if device.type == "cuda":
        if find_spec("triton") is None:
            return "torch.compile generates Triton kernels for GPUs and triton is not installed"
        if torch.cuda.is_available() and torch.cuda.get_device_capability(device) < (7, 0):
            name = torch.cuda.get_device_name(device)
            return f"Inductor's Triton kernels need an sm_70 or newer GPU; {name} is older"
        return None
    return f"{what} are written for CPU and CUDA, not {device.type}"
