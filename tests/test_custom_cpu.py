"""custom_cpu: our C++ FlashAttention kernel against the float64 reference, its forward
(csrc/cpu/flash_attention_cpu.cpp) and its fused backward (csrc/cpu/flash_attention_backward_cpu.cpp)."""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function

from attn.custom_cpu import CustomCpuVariant
from attn.custom_ops import build_problem, library_path, load_ops
from attn.reference import reference_attention

pytestmark = pytest.mark.skipif(
    build_problem() is not None, reason=f"custom ops cannot be built here: {build_problem()}"
)

# Errors measured against outputs of magnitude ~1; bf16 keeps 8 bits of mantissa.
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


@pytest.fixture(scope="module")
def variant():
    return CustomCpuVariant()


def qkv(batch, heads, seq_q, seq_k, head_dim, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, generator=gen)
    k = torch.randn(batch, heads, seq_k, head_dim, generator=gen)
    v = torch.randn(batch, heads, seq_k, head_dim, generator=gen)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def assert_matches_reference(variant, q, k, v, is_causal):
    out = variant.forward(q, k, v, is_causal=is_causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    expected = reference_attention(q, k, v, is_causal=is_causal)
    error = (out.double() - expected).abs().max().item()
    assert error <= TOLERANCE[q.dtype], f"max error {error:.2e} for shape {tuple(q.shape)}"


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize(
    ("batch", "heads", "seq_q", "seq_k", "head_dim"),
    [
        (1, 1, 1, 1, 64),  # a single query and key
        (1, 1, 1, 9, 32),  # one query, several keys
        (2, 3, 37, 37, 32),  # odd lengths, below one tile
        (1, 2, 129, 129, 64),  # one row past a Q tile
        (2, 2, 300, 700, 64),  # seq_q < seq_k, KV tail
        (1, 2, 700, 300, 128),  # seq_q > seq_k: late queries see every key
        (1, 1, 517, 1030, 128),  # several KV tiles with a tail
        (1, 1, 70, 90, 256),  # the largest head_dim
        (1, 1, 200, 4500, 256),  # K^T of a head past 4 MB: packed per KV tile, not per head
        (1, 2, 130, 17000, 64),  # the same at head_dim 64
        (1, 2, 33, 45, 5),  # head_dim below one vector
    ],
)
def test_float32_matches_reference(variant, batch, heads, seq_q, seq_k, head_dim, is_causal):
    q, k, v = qkv(batch, heads, seq_q, seq_k, head_dim)
    assert_matches_reference(variant, q, k, v, is_causal)


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize(
    ("seq_q", "seq_k", "head_dim"),
    [
        (1, 1, 64),
        (200, 150, 64),
        (77, 600, 32),  # head_dim 32: bf16 products over a short inner dimension
        (129, 1031, 128),  # odd seq_k: packed keys padded; KV tiles with a tail
        (40, 17000, 64),  # K^T of a head past 4 MB: widened and packed per KV tile
    ],
)
def test_bfloat16_matches_reference(variant, seq_q, seq_k, head_dim, is_causal):
    q, k, v = qkv(2, 2, seq_q, seq_k, head_dim, dtype=torch.bfloat16)
    assert_matches_reference(variant, q, k, v, is_causal)


# ---- bf16 paths ------------------------------------------------------------------------------
# bf16 tiles are multiplied on AMX (through oneDNN's brgemm), with AVX512-BF16 dot products, or in
# fp32 after widening, chosen at run time from the CPU; ATTN_CPU_BF16_PATH forces one this CPU
# offers, so that every path it has is tested here (on a CPU with AMX, all three).
BF16_GRID = [(1, 1, 64), (200, 150, 64), (77, 600, 32), (129, 1031, 128), (40, 17000, 64)]
OFFERED = load_ops().cpu_bf16_paths() if build_problem() is None else []


def max_errors(variant, dtype, grid=BF16_GRID):
    """The largest error against float64 over the grid (causal and full), ours and SDPA's."""
    ours = sdpa = 0.0
    for (seq_q, seq_k, head_dim), is_causal in [(g, c) for g in grid for c in (True, False)]:
        q, k, v = qkv(2, 2, seq_q, seq_k, head_dim, dtype=dtype)
        expected = reference_attention(q, k, v, is_causal=is_causal)
        out = variant.forward(q, k, v, is_causal=is_causal)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        ours = max(ours, (out.double() - expected).abs().max().item())
        sdpa = max(sdpa, (theirs.double() - expected).abs().max().item())
    return ours, sdpa


def test_the_fp32_path_is_always_offered_and_listed_last():
    assert OFFERED[-1] == "fp32"
    assert set(OFFERED) <= {"amx", "avx512_bf16", "fp32"}
    if "amx" in OFFERED:  # AMX comes with AVX512-BF16 (and is preferred to it)
        assert OFFERED == ["amx", "avx512_bf16", "fp32"]


def test_bf16_takes_the_best_path_the_cpu_offers_where_the_shape_fits(monkeypatch):
    monkeypatch.delenv("ATTN_CPU_BF16_PATH", raising=False)
    ops = load_ops()
    assert ops.cpu_bf16_path(64, 2048) == OFFERED[0]
    assert ops.cpu_bf16_path(40, 2048) == "fp32"  # head_dim not a multiple of 16
    assert ops.cpu_bf16_path(64, 17000) == "fp32"  # a head's K and V too large to keep packed


def test_the_variant_says_how_it_multiplies_its_tiles(variant, monkeypatch):
    monkeypatch.delenv("ATTN_CPU_BF16_PATH", raising=False)
    assert variant.tile_products(torch.float32, 64, 2048) == "fp32"
    assert variant.tile_products(torch.bfloat16, 64, 2048) == OFFERED[0]


@pytest.mark.parametrize("path", ["amx", "avx512_bf16", "fp32"])
def test_each_bf16_path_is_as_accurate_as_sdpa(variant, monkeypatch, path):
    """Max error against float64 over the grid no worse than SDPA's, on each path."""
    if path not in OFFERED:
        pytest.skip(f"this CPU offers {OFFERED}")
    monkeypatch.setenv("ATTN_CPU_BF16_PATH", path)
    assert load_ops().cpu_bf16_path(64, 2048) == path
    ours, sdpa = max_errors(variant, torch.bfloat16)
    assert ours <= sdpa, f"{path}: max error {ours:.2e}, SDPA's {sdpa:.2e}"
    assert ours <= TOLERANCE[torch.bfloat16]


def test_float32_is_as_accurate_as_sdpa(variant):
    grid = [(1, 1, 64), (200, 150, 64), (77, 600, 32), (129, 1031, 128), (70, 90, 256)]
    ours, sdpa = max_errors(variant, torch.float32, grid)
    assert ours <= max(sdpa, TOLERANCE[torch.float32]), f"max error {ours:.2e}, SDPA's {sdpa:.2e}"


def test_a_forced_path_that_is_unknown_is_refused(monkeypatch):
    monkeypatch.setenv("ATTN_CPU_BF16_PATH", "avx1024")
    q = torch.zeros(1, 1, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="avx1024 is none of amx, avx512_bf16, fp32"):
        load_ops().flash_attention_forward(q, q, q, True, 1.0)


@pytest.mark.skipif("amx" in OFFERED, reason="this CPU offers every path")
def test_a_forced_path_this_cpu_lacks_names_the_ones_it_has(monkeypatch):
    missing = "amx" if "avx512_bf16" in OFFERED else "avx512_bf16"
    monkeypatch.setenv("ATTN_CPU_BF16_PATH", missing)
    with pytest.raises(ValueError, match=f"this CPU offers {', '.join(OFFERED)}"):
        load_ops().cpu_bf16_path(64, 2048)


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_non_contiguous_inputs(variant, dtype, is_causal):
    """[batch, seq, heads, head_dim] storage seen through transpose(1, 2), and a strided head_dim
    (bf16 rows are read with their strides where they are widened for fp32 products)."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(2, n, 3, 64, generator=gen).to(dtype).transpose(1, 2) for n in (90, 140, 140)
    )
    assert not q.is_contiguous()
    assert_matches_reference(variant, q, k, v, is_causal)
    wide = torch.randn(2, 3, 90, 128, generator=gen).to(dtype)
    q_strided = wide[..., ::2]  # last-dim stride 2: the kernel must copy it
    assert q_strided.stride(-1) == 2
    assert_matches_reference(variant, q_strided, k, v, is_causal)


def test_causal_matches_scaled_dot_product_attention(variant):
    """Same masking convention as SDPA, also when seq_q != seq_k."""
    q, k, v = qkv(1, 2, 150, 260, 64, seed=2)
    ours = variant.forward(q, k, v, is_causal=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_calls_the_op_with_the_head_dim_scale():
    """The op itself takes the scale; the variant passes 1/sqrt(head_dim)."""
    from attn.custom_ops import load_ops

    q, k, v = qkv(1, 1, 20, 20, 16, seed=3)
    scaled = load_ops().flash_attention_forward(q, k, v, False, 0.5)
    expected = reference_attention(q * (0.5 * math.sqrt(16)), k, v, is_causal=False)
    assert (scaled.double() - expected).abs().max().item() <= 1e-5


@pytest.mark.parametrize(
    ("shapes", "dtype", "match"),
    [
        (((1, 1, 8, 300),) * 3, torch.float32, "head_dim 300"),
        (((1, 1, 8, 64),) * 3, torch.float16, "float16"),
        (((1, 1, 8, 64), (1, 1, 8, 32), (1, 1, 8, 32)), torch.float32, "head_dim differs"),
        (((1, 1, 8, 64), (1, 1, 8, 64), (1, 1, 9, 64)), torch.float32, "sequence lengths"),
        (((1, 2, 8, 64), (1, 1, 8, 64), (1, 1, 8, 64)), torch.float32, "head counts"),
        (((8, 64),) * 3, torch.float32, "4 dims"),
    ],
)
def test_bad_input_raises_value_error(variant, shapes, dtype, match):
    q, k, v = (torch.zeros(shape, dtype=dtype) for shape in shapes)
    with pytest.raises(ValueError, match=match):
        variant.forward(q, k, v)


def test_op_checks_its_inputs_too():
    """Called directly, the C++ op raises ValueError itself (TORCH_CHECK_VALUE)."""
    from attn.custom_ops import load_ops

    q = torch.zeros(1, 1, 4, 300)
    with pytest.raises(ValueError, match="head_dim 300"):
        load_ops().flash_attention_forward(q, q, q, True, 1.0)


def test_why_unavailable(variant):
    assert variant.why_unavailable("cpu") is None
    assert variant.why_unavailable("cpu", torch.bfloat16) is None
    reason = variant.why_unavailable(
        "cuda"
    )  # on a CPU-only torch: "this torch build has no CUDA..."
    assert isinstance(reason, str) and len(reason.split()) >= 5
    # With a usable GPU, the reason is ours: it points to our GPU kernels.
    ours = variant._why_unavailable(torch.device("cuda"), torch.bfloat16)
    assert "CPU" in ours and "CUDA and Triton kernels" in ours
    assert "float16" in variant.why_unavailable("cpu", torch.float16)


def test_forward_off_the_cpu_raises_runtime_error(variant):
    q = torch.zeros(1, 1, 4, 64, device="meta")  # any non-CPU device; meta needs no GPU
    with pytest.raises(RuntimeError, match="custom_cpu: .*CPU"):
        variant.forward(q, q, q)


def test_missing_compiler_or_ninja_is_named(monkeypatch):
    from attn import custom_ops

    monkeypatch.setattr(custom_ops, "_loaded", set())  # as before the first build
    monkeypatch.setenv("CXX", "no-such-compiler-x")
    assert "no-such-compiler-x" in custom_ops.build_problem()
    with pytest.raises(RuntimeError, match="no-such-compiler-x"):
        custom_ops.load_ops()
    monkeypatch.delenv("CXX")
    monkeypatch.setattr(custom_ops, "_find_ninja", lambda: False)
    assert "ninja" in custom_ops.build_problem()


def test_build_directory_is_a_user_cache(monkeypatch, tmp_path):
    from attn import custom_ops

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = custom_ops.build_directory()
    assert directory.is_relative_to(tmp_path / "attention-profiled")
    assert torch.__version__ in directory.parent.name
    assert not directory.is_relative_to(custom_ops.CSRC.parent)


def test_profiler_shows_one_op_under_attn_fwd(variant):
    q, k, v = qkv(1, 2, 64, 64, 32, seed=4)
    variant.forward(q, k, v)  # build and load outside the profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("attn_fwd"):
            variant.forward(q, k, v)
    ours = [e for e in prof.events() if e.name == "attn::flash_attention_forward"]
    assert len(ours) == 1
    parent = ours[0].cpu_parent
    while parent is not None and parent.name != "attn_fwd":
        parent = parent.cpu_parent
    assert parent is not None, "attn::flash_attention_forward is not under attn_fwd"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("nm") is None,
    reason="reads the built library's dynamic symbols with nm (Linux, binutils)",
)
def test_parallel_for_is_compiled_as_an_openmp_region():
    # at::parallel_for is a header template: built without -fopenmp it silently runs on one thread.
    # With OpenMP the library calls into libgomp's GOMP_parallel.
    load_ops()
    library = library_path()
    symbols = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "GOMP_parallel" in symbols


# ---- vector ISA ----------------------------------------------------------------------------------
# The softmax is compiled once per x86-64 vector ISA and runs the copy for the ISA torch's own
# kernels run (torch.backends.cpu.get_cpu_capability()). torch reads the variables below once, when
# a process starts using it, so a forced ISA is tested in a child process. oneDNN's and MKL's
# limits move the GEMMs too (on a CPU with AMX: bf16 off AMX, onto the BLAS's GEMM).
FORCED = {
    "AVX2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
    "DEFAULT": {"ATEN_CPU_CAPABILITY": "default"},
}
CHILD = """
import json, torch
from attn.custom_ops import load_ops
from attn.reference import reference_attention
ops, gen, errors, bounds = load_ops(), torch.Generator().manual_seed(5), {}, {}
def sdpa_grads(q, k, v, do, causal):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal).backward(do)
    return [t.grad for t in leaves]
def grad_error(grads, reference):
    return max((g.double() - r).abs().max().item() for g, r in zip(grads, reference))
def bf16_bound(q, k, v, do, causal, reference):
    # 1.5x SDPA's own bf16 error, as in the tests below; where torch's bf16 backward does not run
    # at this ISA (DEFAULT: "pack_vnni2 is only supported when avx512 is supported"), one bf16 ulp
    # of the largest gradient, twice the rounding of the gradients themselves.
    try:
        return 1.5 * grad_error(sdpa_grads(q, k, v, do, causal), reference) + 1e-6
    except RuntimeError:
        return max(r.abs().max().item() for r in reference) / 128
for dtype in (torch.float32, torch.bfloat16):
    for seq_q, seq_k, d in ((37, 37, 5), (129, 1031, 64), (300, 200, 128)):
        q = torch.randn(1, 2, seq_q, d, generator=gen).to(dtype)
        k, v = (torch.randn(1, 2, seq_k, d, generator=gen).to(dtype) for _ in range(2))
        for causal in (True, False):
            out = ops.flash_attention_forward(q, k, v, causal, d**-0.5)
            error = (out.double() - reference_attention(q, k, v, is_causal=causal)).abs().max()
            errors[f"{dtype} {seq_q}x{seq_k}x{d} causal={causal}"] = error.item()
            # The backward's copy of this ISA too (bf16: widened, beside SDPA's own bf16 error).
            out, lse = ops.flash_attention_forward_lse(q, k, v, causal, d**-0.5)
            do = torch.randn(q.shape, generator=gen).to(dtype)
            grads = ops.flash_attention_backward(do, q, k, v, out, lse, causal, d**-0.5)
            case = f"{dtype} {seq_q}x{seq_k}x{d} causal={causal} grads"
            reference = sdpa_grads(q.double(), k.double(), v.double(), do.double(), causal)
            errors[case] = grad_error(grads, reference)
            if dtype == torch.bfloat16:
                bounds[case] = bf16_bound(q, k, v, do, causal, reference)
print(json.dumps({"ours": ops.cpu_isa(), "torch": torch.backends.cpu.get_cpu_capability(),
                  "bf16_path": ops.cpu_bf16_path(64, 1031), "errors": errors, "bounds": bounds}))
"""
X86_GCC = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")


@pytest.mark.skipif(not X86_GCC, reason="per-ISA copies are built on x86-64 Linux (GCC)")
def test_runs_the_vector_isa_torch_runs():
    assert load_ops().cpu_isa() == torch.backends.cpu.get_cpu_capability()


@pytest.mark.skipif(not X86_GCC, reason="per-ISA copies are built on x86-64 Linux (GCC)")
@pytest.mark.parametrize("isa", FORCED)
def test_a_forced_isa_runs_its_copy_and_matches_reference(isa):
    if isa == "AVX2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this CPU has no AVX2")
    load_ops()  # built here, so that the child only loads it
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env={**os.environ, **FORCED[isa]},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ours"] == result["torch"] == isa
    assert result["bf16_path"] == "fp32"  # bf16 instructions are AVX-512 ones: none below it
    for case, error in result["errors"].items():
        limit = TOLERANCE[torch.bfloat16 if "bfloat16" in case else torch.float32]
        limit = result["bounds"].get(case, limit)  # bf16 gradients: the child's bound
        assert error <= limit, f"{case}: max error {error:.2e}"


# ---- gradients ---------------------------------------------------------------------------------


def _reference_grads(q, k, v, grad_out, is_causal):
    """dq, dk, dv of attention in float64, by autograd through SDPA's math."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, is_causal=is_causal).backward(grad_out.double())
    return [t.grad for t in leaves]


@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_backward_matches_float64_reference(variant, dtype, tol, is_causal):
    # The op has no float64 kernel, so no gradcheck: its gradients are compared with float64 ones.
    q, k, v = (t.requires_grad_() for t in qkv(2, 3, 37, 53, 32, dtype=dtype, seed=6))
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    out = variant.forward(q, k, v, is_causal=is_causal)
    assert out.grad_fn is not None
    out.backward(grad_out)
    expected = _reference_grads(q, k, v, grad_out, is_causal)
    for name, t, reference in zip("qkv", (q, k, v), expected, strict=True):
        assert t.grad is not None and t.grad.dtype == dtype, name
        error = (t.grad.double() - reference).abs().max().item()
        assert error <= tol, f"d{name}: max error {error:.2e}"


def test_op_called_directly_has_a_backward_too():
    q, k, v = (t.requires_grad_() for t in qkv(1, 1, 9, 9, 16, seed=8))
    load_ops().flash_attention_forward(q, k, v, True, 0.25).sum().backward()
    assert all(t.grad is not None for t in (q, k, v))


def test_no_grad_forward_keeps_no_graph(variant):
    q, k, v = (t.requires_grad_() for t in qkv(1, 1, 9, 9, 16, seed=9))
    with torch.no_grad():
        assert variant.forward(q, k, v).grad_fn is None


# ---- scratch memory ----------------------------------------------------------------------------


def _peak_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="resets the peak RSS through Linux's /proc"
)
def test_scratch_does_not_grow_with_seq_k():
    # One query over 2^19 keys: a K^T copy of the whole head would be 128 MB. Per-thread scratch is
    # bounded instead (a few MB), so the peak resident memory of the call barely moves.
    q, k, v = qkv(1, 1, 1, 2**19, 64, seed=10)
    load_ops()  # the build and load are not what is measured
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS starts again from the current RSS
    before = _peak_rss_bytes()
    out = load_ops().flash_attention_forward(q, k, v, False, 0.125)
    grown = _peak_rss_bytes() - before
    assert grown < 32 * 2**20, f"peak RSS grew by {grown / 2**20:.0f} MB for one query"
    expected = reference_attention(q, k, v, is_causal=False)
    assert (out.double() - expected).abs().max().item() <= 1e-5


# ---- the fused backward ------------------------------------------------------------------------
# attn::flash_attention_backward against float64, next to SDPA's own backward in the same dtype:
# in fp32 ours may be at most 1.5x SDPA's error (bf16: FACTORS below), plus a floor of four float32
# ulps of the largest gradient (the rounding of fp32 accumulation, which both share; 1e-6 of 4
# where SDPA happens to be lucky).
GRAD_GRID = [
    (1, 2, 1, 1, 32),  # one query, one key: dq and dk are zero
    (2, 2, 7, 33, 64),  # seq_q < seq_k, one partial key block
    (2, 1, 33, 7, 80),  # seq_q > seq_k: late queries see every key
    (1, 2, 129, 65, 128),  # query tiles and key blocks with tails of one
    (1, 1, 65, 129, 256),  # the largest head_dim
    (1, 3, 129, 129, 64),  # 9 key blocks over 2 threads: a head's dQ summed from two
]


def _grads(attention, q, k, v, grad_out):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    attention(*leaves).backward(grad_out)
    return [t.grad for t in leaves]


def _sdpa_flash(is_causal):
    def run(q, k, v):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    return run


# bf16: our products round P and dS to bf16 before multiplying, as SDPA's own bf16 backward does,
# but not the same values (another forward's output, another order of tiles). A dK entry of seven
# queries sums seven rounded dS, so the largest error over a few hundred entries is a draw: over 12
# seeds of four shapes of GRAD_GRID, ours over SDPA's went from 0.25x to 1.8x (median 0.7x), and
# 2.1x at the seed (2, 2, 7, 33, 64) gets here, where the root mean square error, an average over
# every entry, stayed within 0.59x to 1.09x. So bf16 is held to 2.5x SDPA's largest error, and to
# 1.25x its root mean square error, which catches an error spread over every entry.
FACTORS = {torch.float32: (1.5, None), torch.bfloat16: (2.5, 1.25)}  # (largest, root mean square)


def assert_as_accurate_as_sdpa(variant, shape, dtype, is_causal):
    """Our gradients' error against float64 within FACTORS of SDPA's in the same dtype."""
    batch, heads, seq_q, seq_k, head_dim = shape
    q, k, v = qkv(batch, heads, seq_q, seq_k, head_dim, dtype=dtype, seed=seq_q * seq_k + head_dim)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(11)).to(dtype)
    expected = _reference_grads(q, k, v, grad_out, is_causal)
    ours = _grads(lambda *t: variant.forward(*t, is_causal=is_causal), q, k, v, grad_out)
    theirs = _grads(_sdpa_flash(is_causal), q, k, v, grad_out)
    largest, rms = FACTORS[dtype]
    for name, mine, sdpa, reference in zip("qkv", ours, theirs, expected, strict=True):
        assert mine.dtype == dtype and mine.shape == reference.shape, name
        floor = 4 * torch.finfo(torch.float32).eps * max(1.0, reference.abs().max().item())
        errors, sdpa_errors = mine.double() - reference, sdpa.double() - reference
        error, sdpa_error = errors.abs().max().item(), sdpa_errors.abs().max().item()
        where = f"{shape} causal={is_causal} d{name}"
        assert error <= largest * sdpa_error + floor, (
            f"{where}: max error {error:.2e}, SDPA's {sdpa_error:.2e}"
        )
        if rms is not None:
            error, sdpa_error = (e.pow(2).mean().sqrt().item() for e in (errors, sdpa_errors))
            assert error <= rms * sdpa_error + floor, (
                f"{where}: rms error {error:.2e}, SDPA's {sdpa_error:.2e}"
            )


@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape", GRAD_GRID, ids=lambda s: "x".join(map(str, s)))
def test_fused_gradients_are_as_accurate_as_sdpa(variant, shape, dtype, is_causal):
    assert_as_accurate_as_sdpa(variant, shape, dtype, is_causal)


# bf16 gradients on each path the CPU offers (ATTN_CPU_BF16_PATH, as for the forward): on amx and
# avx512_bf16 the backward's products take bf16 operands, P and dS rounded to bf16 first, and sum
# in fp32; the widened fp32 path rounds only the gradients.
BF16_GRAD_GRID = [shape for shape in GRAD_GRID if shape[-1] % 16 == 0]  # what the bf16 units take


@pytest.mark.parametrize("path", ["amx", "avx512_bf16", "fp32"])
def test_each_bf16_path_of_the_backward_is_as_accurate_as_sdpa(variant, monkeypatch, path):
    if path not in OFFERED:
        pytest.skip(f"this CPU offers {OFFERED}")
    monkeypatch.setenv("ATTN_CPU_BF16_PATH", path)
    for shape in BF16_GRAD_GRID:
        for is_causal in (True, False):
            assert_as_accurate_as_sdpa(variant, shape, torch.bfloat16, is_causal)


def _bf16_backward(path, monkeypatch, threads=None):
    """Gradients of one bf16 call, its backward on `path` (its forward on the default one)."""
    q, k, v = qkv(2, 3, 129, 200, 64, dtype=torch.bfloat16, seed=22)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(23)).to(q.dtype)
    ops = load_ops()
    monkeypatch.delenv("ATTN_CPU_BF16_PATH", raising=False)
    out, lse = ops.flash_attention_forward_lse(q, k, v, True, 0.125)
    monkeypatch.setenv("ATTN_CPU_BF16_PATH", path)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        return ops.flash_attention_backward(grad_out, q, k, v, out, lse, True, 0.125)
    finally:
        torch.set_num_threads(before)


def test_the_bf16_backward_runs_on_the_bf16_units_where_the_cpu_has_them(monkeypatch):
    # Rounding P and dS to bf16 moves the gradients off the widened path's: the path is taken.
    units = [path for path in OFFERED if path != "fp32"]
    if not units:
        pytest.skip(f"this CPU offers {OFFERED}")
    widened = _bf16_backward("fp32", monkeypatch)
    for path in units:
        grads = _bf16_backward(path, monkeypatch)
        assert not all(torch.equal(a, b) for a, b in zip(grads, widened, strict=True)), path


@pytest.mark.parametrize("path", ["amx", "avx512_bf16", "fp32"])
def test_bf16_gradients_are_the_same_on_every_run(monkeypatch, path):
    # Three threads over six heads of four key blocks: heads split between threads, dQ summed from
    # partials in a fixed order, never in the order threads finish.
    if path not in OFFERED:
        pytest.skip(f"this CPU offers {OFFERED}")
    first = _bf16_backward(path, monkeypatch, threads=3)
    again = _bf16_backward(path, monkeypatch, threads=3)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("threads", [1, 3])
def test_fused_gradients_do_not_depend_on_how_heads_split_over_threads(threads):
    # One head over 1 or 3 threads: its key blocks split, and dQ summed from per-thread partials.
    q, k, v = qkv(1, 1, 200, 300, 64, seed=12)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(13))
    ops = load_ops()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out, lse = ops.flash_attention_forward_lse(q, k, v, True, 0.125)
        grads = ops.flash_attention_backward(grad_out, q, k, v, out, lse, True, 0.125)
    finally:
        torch.set_num_threads(before)
    expected = _grads(
        lambda *t: F.scaled_dot_product_attention(*t, is_causal=True, scale=0.125),
        *(t.double() for t in (q, k, v)), grad_out.double(),
    )  # fmt: skip
    for name, mine, reference in zip("qkv", grads, expected, strict=True):
        assert (mine.double() - reference).abs().max().item() <= 1e-5, name


def test_forward_lse_is_the_log_sum_exp_of_the_scaled_scores():
    q, k, v = qkv(2, 2, 70, 90, 32, seed=14)
    ops = load_ops()
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
        for is_causal in (True, False):
            out, lse = ops.flash_attention_forward_lse(*(t.to(dtype) for t in (q, k, v)),
                                                       is_causal, 0.2)  # fmt: skip
            assert lse.dtype == torch.float32 and lse.shape == (2, 2, 70)
            plain = ops.flash_attention_forward(*(t.to(dtype) for t in (q, k, v)), is_causal, 0.2)
            assert torch.equal(out, plain)  # the same kernel, lse written beside
            scores = (q.double() @ k.double().transpose(-2, -1)) * 0.2
            if is_causal:
                hidden = torch.ones(70, 90, dtype=torch.bool).triu(1)
                scores = scores.masked_fill(hidden, -math.inf)
            error = (lse.double() - scores.logsumexp(-1)).abs().max().item()
            assert error <= tol, f"{dtype} causal={is_causal}: lse error {error:.2e}"


def _saved(run):
    """Shapes and dtypes of what autograd saves during run()."""
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return saved


def test_training_saves_out_and_lse_and_the_recompute_backward_only_q_k_v(monkeypatch):
    from attn import custom_ops

    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 9, 11, 16, seed=15))
    qkv_saved = [((1, 2, 9, 16), torch.float32), *[((1, 2, 11, 16), torch.float32)] * 2]
    fused = _saved(lambda: CustomCpuVariant().forward(q, k, v))
    assert fused == [*qkv_saved, ((1, 2, 9, 16), torch.float32), ((1, 2, 9), torch.float32)]
    assert _saved(lambda: CustomCpuVariant(backward="recompute").forward(q, k, v)) == qkv_saved
    # A device whose library has no fused backward (a CUDA build without one) falls back.
    monkeypatch.setattr(custom_ops, "has_fused_backward", lambda device: False)
    assert _saved(lambda: CustomCpuVariant().forward(q, k, v)) == qkv_saved


def test_the_recompute_backward_is_as_right_as_the_fused_one():
    q, k, v = qkv(1, 2, 40, 50, 32, seed=16)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(17))
    fused = _grads(lambda *t: CustomCpuVariant().forward(*t), q, k, v, grad_out)
    recompute = _grads(
        lambda *t: CustomCpuVariant(backward="recompute").forward(*t), q, k, v, grad_out
    )
    for a, b in zip(fused, recompute, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_fused_backward_is_only_where_the_library_has_it():
    from attn.custom_ops import has_fused_backward

    load_ops()
    assert has_fused_backward("cpu")
    assert not has_fused_backward("meta")  # no kernel of ours there
    with pytest.raises(ValueError, match="backward='tiles'"):
        CustomCpuVariant(backward="tiles")


def test_no_grad_takes_the_plain_forward():
    q, k, v = (t.requires_grad_() for t in qkv(1, 1, 9, 9, 16, seed=18))
    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():
        CustomCpuVariant().forward(q, k, v)
    names = {e.key for e in prof.key_averages()}
    assert "attn::flash_attention_forward" in names
    assert "attn::flash_attention_forward_lse" not in names


def test_fused_backward_never_holds_a_score_matrix():
    # B1 H1 S4096 D64: a [seq_q, seq_k] fp32 matrix is 64 MiB, everything else about 1 MiB a
    # tensor. The backward's peak (its outputs, per-thread scratch, partial dQ) stays far under.
    from attn.profiling.memory import peak_memory

    q, k, v = qkv(1, 1, 4096, 4096, 64, seed=19)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(20))
    ops = load_ops()
    out, lse = ops.flash_attention_forward_lse(q, k, v, True, 0.125)
    peak = peak_memory(
        lambda: ops.flash_attention_backward(grad_out, q, k, v, out, lse, True, 0.125), q.device
    )
    score_matrix = 4096 * 4096 * 4
    assert 3 * q.numel() * 4 <= peak < score_matrix / 4, f"peak {peak / 2**20:.1f} MiB"


def _backward_args(**changes):
    q, k, v = qkv(1, 2, 8, 8, 16, seed=21)
    args = {"grad_out": q.clone(), "q": q, "k": k, "v": v, "out": q.clone(),
            "lse": torch.zeros(1, 2, 8), "is_causal": True, "scale": 0.25}  # fmt: skip
    return {**args, **changes}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"grad_out": torch.zeros(1, 2, 9, 16)}, r"grad_out must have q's shape.*\[1, 2, 9, 16\]"),
        ({"out": torch.zeros(1, 2, 8, 16, dtype=torch.bfloat16)}, "out must have.*BFloat16"),
        (
            {"lse": torch.zeros(1, 2, 9)},
            r"lse must be float32 \[batch, heads, seq_q\].*\[1, 2, 9\]",
        ),
        ({"lse": torch.zeros(1, 2, 8, dtype=torch.bfloat16)}, "lse must be float32.*BFloat16"),
        ({"k": torch.zeros(1, 2, 8, 32)}, "shapes do not fit"),
        (
            {name: torch.zeros(1, 2, 8, 300) for name in ("grad_out", "q", "k", "v", "out")},
            "head_dim 300",
        ),
    ],
)
def test_backward_op_names_bad_input(changes, match):
    args = _backward_args(**changes)
    with pytest.raises(ValueError, match=match):
        load_ops().flash_attention_backward(*args.values())


def test_forward_lse_op_checks_its_inputs():
    q = torch.zeros(1, 1, 4, 300)
    with pytest.raises(ValueError, match="head_dim 300"):
        load_ops().flash_attention_forward_lse(q, q, q, True, 1.0)
    with pytest.raises(ValueError, match="float16"):
        load_ops().flash_attention_forward_lse(*(torch.zeros(1, 1, 4, 8, dtype=torch.half),) * 3,
                                               True, 1.0)  # fmt: skip
