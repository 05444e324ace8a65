"""attn.custom_ops: the CPU and CUDA libraries build apart, and a failed build becomes a reason."""

from __future__ import annotations

import pytest
import torch

from attn import custom_ops
from attn.custom_cpu import custom_cpu_variant
from attn.custom_cuda import custom_cuda_variant
from attn.reference import reference_attention

needs_cpu_build = pytest.mark.skipif(
    custom_ops.build_problem() is not None,
    reason=f"custom ops cannot be built here: {custom_ops.build_problem()}",
)


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
    assert custom_cuda_variant()._why_unavailable(torch.device("cuda"), torch.bfloat16) == reason
    # ... and the CPU op, a library of its own, still works.
    assert custom_ops.build_problem() is None
    assert custom_cpu_variant().why_unavailable("cpu") is None
    q, k, v = _qkv(1, 2, 9, 16)
    out = custom_cpu_variant().forward(q, k, v)
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
    out = custom_cpu_variant().forward(q, k, v)
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
    variant = custom_cpu_variant()
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
