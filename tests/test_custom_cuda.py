"""The CUDA kernels: compiled with nvcc for sm_80 and sm_90a without a GPU, run where there is one."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from itertools import product
from pathlib import Path

import pytest
import torch

import attn
from attn.custom_cuda import CustomCudaVariant
from attn.reference import reference_attention

CUDA_DIR = Path(__file__).resolve().parent.parent / "csrc" / "cuda"
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc is not on PATH: the CUDA sources cannot be compile-checked here"
)
ARCHS = {
    "sm_80": "arch=compute_80,code=sm_80",  # A100: the oldest GPU the kernel supports
    "sm_90a": "arch=compute_90a,code=sm_90a",  # H100/H200
}
NVCC_TIMEOUT_S = 240


def _torch_nvcc_flags() -> list[str]:
    """The flags torch.utils.cpp_extension gives every .cu file (no implicit half conversions...)."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    return ["-std=c++20", *COMMON_NVCC_FLAGS]


def _nvcc(*args: str) -> str:
    """Run nvcc; return what it printed, or fail the test with its stderr."""
    command = [NVCC, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nvcc took more than {NVCC_TIMEOUT_S} s: {' '.join(command)}")
    if done.returncode != 0:
        pytest.fail(f"nvcc failed ({done.returncode}): {' '.join(command)}\n{done.stderr}")
    return done.stdout + done.stderr


def _ptxas_usage(log: str) -> dict[str, dict[str, int]]:
    """Registers and spill bytes per kernel, from nvcc -Xptxas -v output."""
    usage: dict[str, dict[str, int]] = {}
    kernel = None
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = m.group(1)
        elif kernel and (
            m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        ):
            usage.setdefault(kernel, {})["spill_bytes"] = int(m.group(1)) + int(m.group(2))
        elif kernel and (m := re.search(r"Used (\d+) registers", line)):
            usage.setdefault(kernel, {})["registers"] = int(m.group(1))
    return usage


def _compile_kernel(source: str, arch: str, obj: Path) -> dict[str, dict[str, int]]:
    """Compile one kernel file with torch's own flags; ptxas's registers and spills per kernel."""
    log = _nvcc(
        *_torch_nvcc_flags(), "-O3", "-gencode", ARCHS[arch], "-Xptxas", "-v",
        "-c", str(CUDA_DIR / source), "-o", str(obj),
    )  # fmt: skip
    return _ptxas_usage(log)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_kernels_and_test_programs_compile(arch, tmp_path):
    # The forward and backward with torch's own flags, for the two GPU generations the chapters
    # profile; then the standalone test programs linked against them, ready to run on such a GPU.
    fwd_obj, bwd_obj = tmp_path / "flash_fwd.o", tmp_path / "flash_bwd.o"
    with ThreadPoolExecutor(2) as pool:  # nvcc is single-threaded: two files at once
        fwd, bwd = pool.map(
            _compile_kernel, ("flash_fwd.cu", "flash_bwd.cu"), (arch, arch), (fwd_obj, bwd_obj)
        )
    # One instantiation per dtype and head_dim, each with a register count from ptxas: the
    # forward kernel, and the backward's three (delta, dK/dV, dQ).
    for usage, kernels in ((fwd, ["flash_fwd_kernel"]), (bwd, ["delta", "dkdv", "dq"])):
        names = sorted(usage)
        assert len(names) == 4 * len(kernels), f"expected {4 * len(kernels)} kernels, got {names}"
        for kernel, dtype, head_dim in product(kernels, ("13__nv_bfloat16", "6__half"), (64, 128)):
            wanted = f"I{dtype}Li{head_dim}E"
            assert any(kernel in n and wanted in n for n in names), (kernel, wanted, names)
    for name, info in {**fwd, **bwd}.items():
        print(f"{arch} {name}: {info}")  # shown with pytest -s: what the report quotes

    def link(program: str) -> None:
        objects = [str(bwd_obj)] if program == "test_flash_bwd" else []
        objects.append(str(fwd_obj))  # the backward's test runs the forward first
        source = str(CUDA_DIR / f"{program}.cu")
        _nvcc("-std=c++20", "-O2", "-gencode", ARCHS[arch], source, *objects, "-o",
              str(tmp_path / program))  # fmt: skip

    programs = ("test_flash_fwd", "test_flash_bwd")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(link, programs))
    for binary in programs:
        assert (tmp_path / binary).stat().st_size > 0


def _torch_cuda_headers() -> tuple[Path, Path | None] | None:
    """torch's include dir and, for CPU-only wheels, a stand-in for the one header they lack."""
    from torch.utils.cpp_extension import include_paths

    include = Path(include_paths()[0])
    if not (include / "c10" / "cuda" / "CUDAGuard.h").is_file():
        return None
    generated = include / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    return include, None if generated.is_file() else generated


@needs_nvcc
@pytest.mark.slow
def test_binding_compiles_against_torch_headers(tmp_path):
    # binding.cu needs torch's CUDA headers. CPU-only wheels ship them except one file that CUDA
    # builds generate (it defines one macro); we write that one into tmp_path so the glue is at
    # least compile-checked here. Nothing is linked: this only proves the C++ is well-formed.
    found = _torch_cuda_headers()
    if found is None:
        pytest.skip("this torch ships no c10/cuda headers: binding.cu cannot be compile-checked")
    include, missing = found
    extra = []
    if missing is not None:
        stand_in = tmp_path / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        stand_in.parent.mkdir(parents=True)
        stand_in.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        extra = ["-isystem", str(tmp_path / "include")]
    _nvcc(
        *_torch_nvcc_flags(), "-O0", "-gencode", ARCHS["sm_80"], "--compiler-options", "-fPIC",
        "-isystem", str(include), "-isystem", str(include / "torch" / "csrc" / "api" / "include"),
        *extra, "-DTORCH_EXTENSION_NAME=attn_ops",
        "-c", str(CUDA_DIR / "binding.cu"), "-o", str(tmp_path / "binding.o"),
    )  # fmt: skip
    assert (tmp_path / "binding.o").stat().st_size > 0


# ---- without a GPU: the variant's contract -----------------------------------------------------


def test_names_and_supported_inputs():
    variant = attn.get_variant("custom_cuda")
    assert isinstance(variant, CustomCudaVariant)
    assert (variant.name, variant.title) == ("custom_cuda", "Custom CUDA kernel")
    assert variant.head_dims == (64, 128)
    assert variant.dtypes == (torch.bfloat16, torch.float16)


def test_cpu_is_unavailable_with_a_reason():
    variant = CustomCudaVariant()
    reason = variant.why_unavailable("cpu")
    assert isinstance(reason, str) and "NVIDIA GPUs only" in reason and "C++ op" in reason
    q = torch.zeros(1, 1, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="C\\+\\+ op"):
        variant.forward(q, q, q)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a CUDA GPU")
def test_cuda_is_unavailable_with_a_reason_on_this_machine():
    reason = CustomCudaVariant().why_unavailable("cuda")
    assert isinstance(reason, str) and len(reason.split()) >= 5  # a sentence, not a code


def test_float32_is_refused_with_a_reason():
    # The dtype test comes before any question to the GPU, so it is answered on any machine.
    reason = CustomCudaVariant()._why_unavailable(torch.device("cuda"), torch.float32)
    assert isinstance(reason, str) and "float32" in reason


def test_unavailable_when_the_cpu_library_it_extends_cannot_build(monkeypatch):
    # The op's schema comes with the CPU library, so a missing C++ compiler is custom_cuda's problem.
    from attn import custom_ops

    monkeypatch.setattr(custom_ops, "_loaded", set())  # as before the first build
    monkeypatch.setenv("CXX", "no-such-compiler-x")
    monkeypatch.setattr(custom_ops, "_cuda_toolkit_problem", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    reason = CustomCudaVariant()._why_unavailable(torch.device("cuda"), torch.bfloat16)
    assert "no-such-compiler-x" in reason


def test_unavailable_with_a_toolkit_torch_would_refuse(monkeypatch):
    from attn import custom_ops

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(custom_ops, "_nvcc", lambda: "/usr/local/cuda-12.8/bin/nvcc")
    monkeypatch.setattr(custom_ops, "_nvcc_version", lambda nvcc: "12.8")
    monkeypatch.setattr(custom_ops, "build_problem", lambda: None)  # a compiler and ninja are there
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    reason = CustomCudaVariant()._why_unavailable(torch.device("cuda"), torch.float16)
    assert "CUDA 12.8" in reason and "CUDA 13.0" in reason


def test_rejects_head_dim_96():
    q = torch.zeros(1, 1, 4, 96, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="96"):
        CustomCudaVariant().forward(q, q, q)


# ---- on a GPU ----------------------------------------------------------------------------------

# Error against the float64 reference for inputs ~N(0, 1): P is rounded to the input dtype before
# P @ V and the output is rounded once, so a few ulps of a value near 1.
TOLERANCE = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
# (seq_q, seq_k): one token, lengths that are no multiple of the 64-row tiles, one past a tile,
# exact tiles, more queries than keys (causal rows past seq_k see every key) and fewer.
SHAPES = [(1, 1), (37, 37), (200, 200), (257, 257), (128, 128), (37, 200), (200, 37), (257, 100)]


def _qkv(batch, heads, seq_q, seq_k, head_dim, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(batch, heads, s, head_dim) for s in (seq_q, seq_k, seq_k)]
    return [torch.randn(s, generator=gen).to("cuda", dtype) for s in shapes]


def _assert_close(out, q, k, v, *, is_causal):
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    expected = reference_attention(q, k, v, is_causal=is_causal)
    tol = TOLERANCE[q.dtype]
    torch.testing.assert_close(out.double().cpu(), expected, atol=tol, rtol=tol)


def _runnable(dtype=torch.bfloat16):
    variant = CustomCudaVariant()
    reason = variant.why_unavailable("cuda", dtype)
    if reason is not None:
        pytest.skip(reason)
    return variant


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(("seq_q", "seq_k"), SHAPES, ids=[f"{q}x{k}" for q, k in SHAPES])
def test_matches_reference(seq_q, seq_k, is_causal, head_dim, dtype):
    variant = _runnable(dtype)
    q, k, v = _qkv(2, 3, seq_q, seq_k, head_dim, dtype)
    out = variant.forward(q, k, v, is_causal=is_causal)
    _assert_close(out, q, k, v, is_causal=is_causal)


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
def test_strided_and_misaligned_inputs(is_causal):
    variant = _runnable()
    gen = torch.Generator().manual_seed(1)
    # Views into one packed [batch, seq, 3, heads, head_dim] projection: the kernel reads the
    # strides as they are ...
    qkv = torch.randn(2, 45, 3, 4, 64, generator=gen).to("cuda", torch.bfloat16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    _assert_close(variant.forward(q, k, v, is_causal=is_causal), q, k, v, is_causal=is_causal)
    # ... and a view starting one element in, which 16-byte loads cannot read, is copied first.
    wide = torch.randn(1, 2, 45, 65, generator=gen).to("cuda", torch.bfloat16)
    q = wide[..., 1:]
    _assert_close(variant.forward(q, q, q, is_causal=is_causal), q, q, q, is_causal=is_causal)


@pytest.mark.gpu
def test_causal_never_loads_tiles_above_the_diagonal():
    # 20 queries fit in one 64-row block, so key tiles from 64 on are skipped. NaN there must not
    # reach the output: loaded and masked, 0 * NaN would.
    variant = _runnable()
    q, k, v = _qkv(1, 2, 20, 200, 64, torch.bfloat16, seed=3)
    k_poisoned, v_poisoned = k.clone(), v.clone()
    k_poisoned[:, :, 64:] = float("nan")
    v_poisoned[:, :, 64:] = float("nan")
    out = variant.forward(q, k_poisoned, v_poisoned, is_causal=True)
    assert not out.isnan().any()
    _assert_close(out, q, k, v, is_causal=True)


@pytest.mark.gpu
def test_bad_input_raises_value_error():
    variant = _runnable()
    q32 = torch.zeros(1, 1, 8, 64, device="cuda")
    with pytest.raises(ValueError, match="float32"):
        variant.forward(q32, q32, q32)
    q96 = torch.zeros(1, 1, 8, 96, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="96"):
        variant.forward(q96, q96, q96)
    # The op itself checks too (TORCH_CHECK_VALUE in binding.cu), for callers that skip the variant.
    from attn.custom_ops import load_cuda_ops

    with pytest.raises(ValueError, match="head_dim 96"):
        load_cuda_ops().flash_attention_forward(q96, q96, q96, True, 0.1)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("program", ["test_flash_fwd", "test_flash_bwd"])
def test_standalone_program_passes(program, tmp_path):
    # The same programs someone can build and run by hand (see the top of each file).
    _runnable()
    major, minor = torch.cuda.get_device_capability()
    arch = f"arch=compute_{major}{minor},code=sm_{major}{minor}"
    binary = tmp_path / program
    kernels = ["flash_fwd.cu"] if program == "test_flash_fwd" else ["flash_bwd.cu", "flash_fwd.cu"]
    _nvcc("-std=c++20", "-O3", "-gencode", arch, "-o", str(binary),
          str(CUDA_DIR / f"{program}.cu"), *(str(CUDA_DIR / k) for k in kernels))  # fmt: skip
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b\d+ passed, 0 failed", done.stdout), done.stdout


# ---- the backward, on a GPU --------------------------------------------------------------------


def _float64_grads(q, k, v, grad_out, *, is_causal):
    """Gradients of float64 attention on the CPU (autograd through SDPA's math, in float64)."""
    leaves = [t.detach().to("cpu", torch.float64).requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=is_causal)
    out.backward(grad_out.to("cpu", torch.float64))
    return [t.grad for t in leaves]


def _rel_err(got, want):
    """||got - want|| / ||want||, with a floor for a gradient that is exactly 0 (1 query, 1 key)."""
    diff = (got.double().cpu() - want).norm()
    return (diff / want.norm().clamp_min(1e-3 * want.numel() ** 0.5)).item()


def _sdpa_grads(q, k, v, grad_out, *, is_causal):
    """SDPA's own gradients in q's dtype on the GPU: the error our backward is held to."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=is_causal).backward(
        grad_out
    )
    return [t.grad for t in leaves]


def _flash_backward(q, k, v, grad_out, *, is_causal):
    """Our forward with lse, then our backward, straight through the ops."""
    from attn.custom_ops import load_cuda_ops

    ops, scale = load_cuda_ops(), 1.0 / math.sqrt(q.shape[-1])
    out, lse = ops.flash_attention_forward_lse(q, k, v, is_causal, scale)
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    return out, lse, ops.flash_attention_backward(grad_out, q, k, v, out, lse, is_causal, scale)


# Our backward rounds each gradient once (fp32 in between); SDPA's flash kernel also rounds P and
# dS to 16 bits on the way into its tensor cores, so ours is expected at or under its error.
SDPA_FACTOR = 2.0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(("seq_q", "seq_k"), SHAPES, ids=[f"{q}x{k}" for q, k in SHAPES])
def test_backward_matches_reference(seq_q, seq_k, is_causal, head_dim, dtype):
    _runnable(dtype)
    q, k, v = _qkv(2, 3, seq_q, seq_k, head_dim, dtype)
    grad_out = _qkv(2, 3, seq_q, seq_q, head_dim, dtype, seed=5)[0]  # dO has q's shape
    out, lse, grads = _flash_backward(q, k, v, grad_out, is_causal=is_causal)
    # lse: fp32 arithmetic on the same inputs, next to exact.
    scores = q.double().cpu() @ k.double().cpu().transpose(-2, -1) / math.sqrt(head_dim)
    if is_causal:
        scores = scores.masked_fill(torch.ones(seq_q, seq_k, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(lse.double().cpu(), scores.logsumexp(-1), atol=1e-3, rtol=0)
    want = _float64_grads(q, k, v, grad_out, is_causal=is_causal)
    sdpa = _sdpa_grads(q, k, v, grad_out, is_causal=is_causal)
    for name, got, ref, theirs, x in zip("qkv", grads, want, sdpa, (q, k, v), strict=True):
        assert got.shape == x.shape and got.dtype == x.dtype and got.device == x.device
        ours, bound = _rel_err(got, ref), SDPA_FACTOR * _rel_err(theirs, ref) + 1e-4
        assert ours <= bound, f"d{name}: relative error {ours:.2e} > {bound:.2e} (2x SDPA's)"


@pytest.mark.gpu
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
def test_backward_of_strided_views_is_deterministic(is_causal):
    _runnable()
    gen = torch.Generator().manual_seed(2)
    # Views into one packed [batch, seq, 3, heads, head_dim] projection, and a strided dO.
    qkv = torch.randn(2, 77, 3, 4, 128, generator=gen).to("cuda", torch.bfloat16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    grad_out = torch.randn(2, 77, 4, 128, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2)
    _, _, grads = _flash_backward(q, k, v, grad_out, is_causal=is_causal)
    want = _float64_grads(q, k, v, grad_out, is_causal=is_causal)
    for got, ref in zip(grads, want, strict=True):
        assert _rel_err(got, ref) < 1e-2
    # dQ has a kernel of its own instead of atomics: the same inputs give the same bits.
    _, _, again = _flash_backward(q, k, v, grad_out, is_causal=is_causal)
    assert all(torch.equal(a, b) for a, b in zip(grads, again, strict=True))


@pytest.mark.gpu
def test_backward_bad_input_raises_value_error():
    _runnable()
    from attn.custom_ops import load_cuda_ops

    ops = load_cuda_ops()
    q = torch.zeros(1, 2, 8, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = ops.flash_attention_forward_lse(q, q, q, True, 0.125)
    with pytest.raises(ValueError, match="lse must be float32"):
        ops.flash_attention_backward(q, q, q, q, out, lse.half(), True, 0.125)
    with pytest.raises(ValueError, match="grad_out must match q"):
        ops.flash_attention_backward(q[:, :1], q, q, q, out, lse, True, 0.125)
    q96 = torch.zeros(1, 1, 8, 96, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim 96"):
        ops.flash_attention_backward(q96, q96, q96, q96, q96, lse[:, :1], True, 0.1)
