"""attn.custom_ops: where the kernel sources are found, how the two libraries build, the backward."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attn import custom_ops
from attn.custom_cpu import CustomCpuVariant
from attn.custom_cuda import CustomCudaVariant
from attn.reference import reference_attention

REPO = Path(__file__).resolve().parents[1]
needs_cpu_build = pytest.mark.skipif(
    custom_ops.build_problem() is not None,
    reason=f"custom ops cannot be built here: {custom_ops.build_problem()}",
)


# ---- where the sources are ---------------------------------------------------------------------


def test_sources_of_this_tree_are_found():
    assert custom_ops.CSRC == REPO / "csrc"
    for library in (custom_ops.CPU_LIBRARY, custom_ops.CUDA_LIBRARY):
        assert all(path.is_file() for path in custom_ops.sources(library))


def test_sources_inside_an_installed_package_come_first(tmp_path, monkeypatch):
    # A wheel puts csrc/ at attn/_csrc; a csrc/ beside the package must not be picked instead.
    package = tmp_path / "attn"
    (package / "_csrc").mkdir(parents=True)
    (tmp_path / "csrc").mkdir()
    shutil.copy(custom_ops.__file__, package / "custom_ops.py")
    spec = importlib.util.spec_from_file_location(
        "_installed_custom_ops", package / "custom_ops.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.CSRC == package / "_csrc"
    assert "reinstall" in module.build_problem() and "pip install -e" not in module.build_problem()


def test_every_package_is_listed_for_setuptools():
    # pyproject.toml lists the packages by hand (a package-dir mapping rules out packages.find).
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "attn").rglob("__init__.py")
    }
    assert on_disk | {"attn._csrc"} == set(config["packages"])
    assert config["package-dir"] == {"attn._csrc": "csrc"}


def test_build_directory_is_a_user_cache_per_source_content(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cpu = custom_ops.build_directory(custom_ops.CPU_LIBRARY)
    cuda = custom_ops.build_directory(custom_ops.CUDA_LIBRARY)
    assert cpu.parent == cuda.parent and cpu != cuda  # the two libraries build apart
    assert cpu.parent.parent == tmp_path / "attention-profiled"
    assert torch.__version__ in cpu.parent.name
    edited = tmp_path / "elsewhere" / "csrc"
    shutil.copytree(custom_ops.CSRC, edited)
    monkeypatch.setattr(custom_ops, "CSRC", edited)
    assert custom_ops.build_directory(custom_ops.CPU_LIBRARY) == cpu  # same sources, same build
    (edited / "ops.cpp").write_text((edited / "ops.cpp").read_text() + "\n// edited\n")
    assert custom_ops.build_directory(custom_ops.CPU_LIBRARY) != cpu  # edited, a build of its own


# ---- installed, not from the checkout ----------------------------------------------------------


def _copy_project(destination: Path) -> Path:
    """What a source distribution holds: the project files, no build outputs or caches."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, destination / name)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "*.egg-info")
    for name in ("attn", "csrc"):
        shutil.copytree(REPO / name, destination / name, ignore=skip)
    return destination


def _venv_with_this_torch(path: Path) -> Path:
    """A fresh venv that sees this environment's packages (torch, triton...) through a .pth file."""
    venv.create(path, with_pip=False)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    # Appended after the venv's own site-packages, so the attn installed there comes first.
    Path(purelib, "this_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


def _run_outside_the_checkout(python: Path, code: str, tmp_path: Path) -> dict:
    """Run code in the venv from an empty folder, so only the installed attn is importable."""
    cwd = tmp_path / "empty"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_CACHE_HOME"] = str(
        tmp_path / "cache"
    )  # a throwaway build, not one in the user's cache
    done = subprocess.run(
        [python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


BUILD_AND_RUN = """
import json, torch, attn
from attn import custom_ops
from attn.custom_cpu import CustomCpuVariant
from attn.reference import reference_attention

gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, 7, 16, generator=gen) for _ in range(3))
out = CustomCpuVariant().forward(q, k, v, is_causal=True)
error = (out.double() - reference_attention(q, k, v, is_causal=True)).abs().max().item()
print(json.dumps({"attn": attn.__file__, "csrc": str(custom_ops.CSRC), "error": error,
                  "library": str(custom_ops.library_path())}))
"""


@pytest.mark.slow
@needs_cpu_build
def test_wheel_install_builds_and_runs_custom_cpu(tmp_path):
    pytest.importorskip("setuptools", reason="builds the wheel without build isolation")
    project = _copy_project(tmp_path / "project")
    wheels = tmp_path / "wheels"
    _pip(
        "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(wheels), str(project)
    )
    (wheel,) = wheels.glob("attention_profiled-*.whl")
    python = _venv_with_this_torch(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    shutil.rmtree(project)  # nothing of the source tree is left to fall back on

    found = _run_outside_the_checkout(python, BUILD_AND_RUN, tmp_path)
    site_packages = tmp_path / "venv" / "lib"
    assert Path(found["attn"]).is_relative_to(site_packages), found
    assert Path(found["csrc"]) == Path(found["attn"]).parent / "_csrc"
    assert Path(found["library"]).is_relative_to(tmp_path / "cache")
    assert Path(found["library"]).is_file()
    assert found["error"] <= 1e-5


EDITABLE = """
import json
from attn import custom_ops
print(json.dumps({"csrc": str(custom_ops.CSRC), "problem": custom_ops.build_problem()}))
"""


@pytest.mark.slow
@needs_cpu_build
def test_editable_install_finds_the_sources_of_its_tree(tmp_path):
    pytest.importorskip("setuptools", reason="installs without build isolation")
    project = _copy_project(tmp_path / "project")
    python = _venv_with_this_torch(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-deps", "--no-index", "--no-build-isolation",
         "-e", str(project))  # fmt: skip
    found = _run_outside_the_checkout(python, EDITABLE, tmp_path)
    assert found == {"csrc": str(project / "csrc"), "problem": None}


# ---- a CUDA build that fails leaves the CPU op alone ------------------------------------------


def _qkv(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=gen).to(dtype) for _ in range(3))


@pytest.fixture
def fresh_build_state(monkeypatch):
    """custom_ops as at the start of a process, restored after the test (loaded libraries stay)."""
    monkeypatch.setattr(custom_ops, "_failed", {})
    monkeypatch.setattr(custom_ops, "_loaded", set(custom_ops._loaded))


NVCC_ERROR = (
    "Error building extension 'attn_ops_cuda': [1/3] /usr/local/cuda/bin/nvcc -c flash_fwd.cu\n"
    "FAILED: flash_fwd.cuda.o\n"
    'flash_fwd.cu(83): error: identifier "__nv_bfloat162" is undefined\n'
    "ninja: build stopped: subcommand failed."
)


@needs_cpu_build
def test_failed_cuda_build_is_a_reason_and_leaves_the_cpu_op_working(
    monkeypatch, fresh_build_state
):
    from torch.utils import cpp_extension

    real_load, tried = cpp_extension.load, []

    def load(*, name, **kwargs):
        tried.append(name)
        if name == custom_ops.CUDA_LIBRARY:
            raise RuntimeError(NVCC_ERROR)
        return real_load(name=name, **kwargs)

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.setattr(custom_ops, "_cuda_toolkit_problem", lambda: None)  # nvcc matches torch
    assert custom_ops.cuda_build_problem() is None  # nothing says it will fail before it is tried
    with pytest.raises(RuntimeError, match="__nv_bfloat162"):
        custom_ops.load_cuda_ops()

    reason = custom_ops.cuda_build_problem()
    assert (
        reason
        == 'building the CUDA ops failed: flash_fwd.cu(83): error: identifier "__nv_bfloat162" is undefined'
    )
    with pytest.raises(RuntimeError, match="__nv_bfloat162"):
        custom_ops.load_cuda_ops()  # remembered: not compiled again
    assert tried.count(custom_ops.CUDA_LIBRARY) == 1

    # custom_cuda reports it where it would otherwise run (an sm_90 GPU) ...
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert CustomCudaVariant()._why_unavailable(torch.device("cuda"), torch.bfloat16) == reason
    # ... and the CPU op, a library of its own, still works.
    assert custom_ops.build_problem() is None
    assert CustomCpuVariant().why_unavailable("cpu") is None
    q, k, v = _qkv(1, 2, 9, 16)
    out = CustomCpuVariant().forward(q, k, v)
    assert (out.double() - reference_attention(q, k, v)).abs().max().item() <= 1e-5


@needs_cpu_build
def test_loading_again_loads_the_same_library(fresh_build_state):
    # torch names a library anew (name_v1) when it is loaded with other flags than before, and a
    # second copy of ops.cpp would register the attn namespace twice, which aborts the process.
    custom_ops.load_ops()
    custom_ops._loaded.clear()  # as after a test that restored an older state
    custom_ops.load_ops()
    assert custom_ops.OPENMP in ([], ["-fopenmp"])  # torch got copies of the flags
    q, k, v = _qkv(1, 1, 5, 16)
    out = CustomCpuVariant().forward(q, k, v)
    assert (out.double() - reference_attention(q, k, v)).abs().max().item() <= 1e-5


@needs_cpu_build
def test_failed_cpu_build_is_a_reason(monkeypatch, fresh_build_state):
    from torch.utils import cpp_extension

    def load(**kwargs):
        raise RuntimeError(
            "Error building extension\nops.cpp:3:10: fatal error: torch/x.h: No such file"
        )

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.setattr(custom_ops, "_loaded", set())  # as before the first build
    monkeypatch.setattr(custom_ops, "_is_stale", lambda library: True)  # nothing built yet
    variant = CustomCpuVariant()
    q, k, v = _qkv(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match="torch/x.h"):
        variant.forward(q, k, v)
    # From then on the variant says so up front, and forward raises with that reason.
    reason = variant.why_unavailable("cpu")
    assert (
        reason == "building the C++ ops failed: ops.cpp:3:10: fatal error: torch/x.h: No such file"
    )
    with pytest.raises(RuntimeError, match="custom_cpu: building the C"):
        variant.forward(q, k, v)
    assert custom_ops.cuda_build_problem() == reason  # the CUDA op needs the CPU library's schema


def test_cuda_toolkit_of_another_major_version_is_named(monkeypatch):
    # torch.utils.cpp_extension refuses such a build; the reason is given before trying it.
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(custom_ops, "_nvcc", lambda: "/opt/cuda-12.8/bin/nvcc")
    monkeypatch.setattr(custom_ops, "_nvcc_version", lambda nvcc: "12.8")
    reason = custom_ops._cuda_toolkit_problem()
    assert "/opt/cuda-12.8/bin/nvcc is CUDA 12.8" in reason and "CUDA 13.0" in reason
    monkeypatch.setattr(custom_ops, "_nvcc_version", lambda nvcc: "13.1")
    assert custom_ops._cuda_toolkit_problem() is None  # a minor difference only warns


def test_cuda_toolkit_problems_without_a_cuda_torch_or_nvcc(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU-only" in custom_ops._cuda_toolkit_problem()
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(custom_ops, "_nvcc", lambda: None)
    assert "CUDA_HOME" in custom_ops._cuda_toolkit_problem()


# ---- the backward ------------------------------------------------------------------------------


@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(("seq_q", "seq_k"), [(7, 7), (5, 11), (11, 5)])
def test_attention_backward_is_the_gradient_of_attention(seq_q, seq_k, is_causal):
    # In float64 against autograd through SDPA's math: the formulas, free of float32 rounding.
    gen = torch.Generator().manual_seed(5)
    q, k, v = (
        torch.randn(2, 3, s, 8, generator=gen, dtype=torch.float64) for s in (seq_q, seq_k, seq_k)
    )
    grad_out = torch.randn(2, 3, seq_q, 8, generator=gen, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=is_causal, scale=0.3).backward(grad_out)
    ours = custom_ops.attention_backward(q, k, v, grad_out, is_causal=is_causal, scale=0.3)
    for name, mine, theirs in zip("qkv", ours, leaves, strict=True):
        torch.testing.assert_close(mine, theirs.grad, atol=1e-12, rtol=1e-10, msg=f"d{name}")


def test_sources_build_as_cpp17():
    """torch before 2.13 builds extensions as C++17 (a GPU machine's torch 2.11 found
    atomic<double>::fetch_add, a C++20 member): every C++ source must compile as C++17 too."""
    from torch.utils.cpp_extension import include_paths

    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        pytest.skip("no C++ compiler on PATH")
    includes = [f"-I{path}" for path in [*include_paths(), str(custom_ops.CSRC)]]
    for source in custom_ops.sources(custom_ops.CPU_LIBRARY):
        done = subprocess.run(
            [compiler, "-std=c++17", "-fopenmp", "-fsyntax-only", "-w", *includes, str(source)],
            capture_output=True,
            text=True,
        )
        errors = [line for line in done.stderr.splitlines() if "error" in line]
        assert done.returncode == 0, f"{source.name} is not C++17: {errors[:3]}"
