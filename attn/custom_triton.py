"""A FlashAttention-2-style forward kernel in Triton, in the spirit of Triton's 06-fused-attention.

One program owns a block of BLOCK_M queries of one (batch, head) and walks over the keys in blocks of
BLOCK_N. The scores of a block never leave the chip: an online softmax keeps a running row max `m_i`
and row sum `l_i`, rescales the fp32 accumulator whenever the max grows, and divides once at the end.
The scale is folded into log2(e) so the kernel can use exp2. With `is_causal` the loop stops at the
diagonal: blocks above it are never loaded, and only the blocks on it are masked element-wise.

Read in order: the inner loop, the kernel, the launch wrapper, and the Variant the chapters use.
"""

# Annotations stay strings, so `tl.constexpr` below needs no triton at import time.
from __future__ import annotations

import functools
import math

import torch

from attn.variant import Variant, older_than_ampere

try:
    import triton
    import triton.language as tl

    jit = triton.jit
except ImportError:
    # `import attn` must work with torch alone; the variant then says why it cannot run.
    triton = tl = None

    def jit(fn):
        return fn  # never launched: CustomTritonVariant reports that triton is missing


LOG2E = 1.4426950408889634  # exp(x) == exp2(x * log2(e)); exp2 is the cheaper instruction


@jit
def _attn_fwd_inner(
    acc, l_i, m_i, q,  # running state of this program's BLOCK_M query rows, and the rows themselves
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, lo, hi, SEQ_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, ON_DIAGONAL: tl.constexpr,
):  # fmt: skip
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    # --8<-- [start:core]
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = (start_n + tl.arange(0, BLOCK_N)).to(tl.int64)  # int64: key * stride may pass 2^31
        in_bounds = offs_n < SEQ_K  # the last block may run past the keys; those load as 0
        # K is read transposed ([HEAD_DIM, BLOCK_N]) straight from its strides: no copy, no .T
        k = tl.load(
            k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
            mask=in_bounds[None, :], other=0.0,
        )  # fmt: skip
        qk = tl.dot(q, k) * qk_scale  # fp32 scores, already in log2 units
        if ON_DIAGONAL:  # SDPA's convention: query i sees key j only when j <= i
            keep = in_bounds[None, :] & (offs_m[:, None] >= offs_n[None, :])
        else:
            keep = in_bounds[None, :]
        qk = tl.where(keep, qk, float("-inf"))
        # Online softmax: a larger max shrinks everything summed so far by alpha = 2^(m_old - m_new)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        # A row that has seen no key yet keeps max -inf; subtract 0 then, so that -inf - -inf gives
        # no NaN: p and alpha come out 0 (as in the CUDA kernel).
        base = tl.where(m_ij == float("-inf"), 0.0, m_ij)
        p = tl.math.exp2(qk - base[:, None])  # masked scores give exactly 0
        alpha = tl.math.exp2(m_i - base)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=in_bounds[:, None], other=0.0,
        )  # fmt: skip
        # P @ V with P rounded to the inputs' 16 bits (tensor cores), accumulated in fp32
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    # --8<-- [end:core]
    return acc, l_i, m_i


@jit
def _attn_fwd(
    Q, K, V, Out,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    HEADS, SEQ_Q, SEQ_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):  # fmt: skip
    tl.static_assert(BLOCK_M % BLOCK_N == 0)  # the diagonal starts on a key-block boundary
    start_m = tl.program_id(0)  # which block of queries
    off_bh = tl.program_id(1)  # which (batch, head)
    off_b = (off_bh // HEADS).to(tl.int64)  # int64: batch * stride can pass 2^31 elements
    off_h = (off_bh % HEADS).to(tl.int64)
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    o_base = Out + off_b * stride_ob + off_h * stride_oh

    # int64 row and column indices: row * stride can pass 2^31 elements in one (batch, head) too
    offs_m = (start_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    row_ok = offs_m[:, None] < SEQ_Q  # rows past the queries compute on zeros and are not stored
    q = tl.load(
        q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=row_ok, other=0.0
    )

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if IS_CAUSAL:
        # Key blocks left of this query block are fully visible: no mask. Those on the diagonal are
        # masked element-wise. Those right of it are never loaded (the loop ends at the diagonal).
        diagonal = start_m * BLOCK_M
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, 0, tl.minimum(diagonal, SEQ_K), SEQ_K, qk_scale, HEAD_DIM, BLOCK_N, False,
        )  # fmt: skip
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, diagonal, tl.minimum(diagonal + BLOCK_M, SEQ_K), SEQ_K, qk_scale,
            HEAD_DIM, BLOCK_N, True,
        )  # fmt: skip
    else:
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, 0, SEQ_K, SEQ_K, qk_scale, HEAD_DIM, BLOCK_N, False,
        )  # fmt: skip
    # Every stored row saw key 0 (top-left causal alignment), so l_i >= 1 here; a row that saw no
    # key at all (other masks can do that) would have l_i = 0 and acc = 0, and stays 0, as in CUDA.
    acc = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=row_ok)


# `@triton.jit` chose above whether to compile or interpret, from TRITON_INTERPRET; so did every jit
# function of triton's own library (tl.zeros, tl.sum) at `import triton`. The variable must therefore
# be set before triton is first imported in the process. Ask the kernel what it became.
_INTERPRETED = triton is not None and not isinstance(_attn_fwd, triton.runtime.JITFunction)
# The interpreter runs every block op in numpy: small blocks keep it fast; BLOCK_M = 2 * BLOCK_N as on
# the GPU, so the diagonal spans two key blocks there too. tl.dot needs every side >= 16.
INTERPRETER_BLOCKS = (32, 16)


@functools.cache
def _tuned_kernel():
    """The kernel autotuned over a few GPU configs; the first call per shape compiles all of them."""
    configs = [
        # BLOCK_M 128 x BLOCK_N 64 is the tutorial's choice on A100/H100; 64 x 64 with two stages
        # fits the ~100 KB of shared memory of consumer Ampere/Ada cards at head_dim 128.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=2),
    ]
    return triton.autotune(configs, key=["SEQ_Q", "SEQ_K", "HEAD_DIM", "IS_CAUSAL"])(_attn_fwd)


# The launch grid is (query blocks, batch * heads): CUDA caps a grid's second dimension at 65535.
MAX_GRID_Y = 65535
INTERPRETER_BF16 = (
    "Triton's interpreter (TRITON_INTERPRET=1) stores bf16 as uint16 and its tl.dot multiplies "
    "those bit patterns (triton-lang/triton#11584), so bf16 runs only compiled, on a GPU; "
    "use float16 under the interpreter"
)


def _refuse_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """ValueError when autograd would need a backward: the kernel has none (out has no grad_fn)."""
    needs = [name for name, t in (("q", q), ("k", k), ("v", v)) if t.requires_grad]
    if needs and torch.is_grad_enabled():
        raise ValueError(
            f"the Triton kernel computes the forward only, but {', '.join(needs)} requires grad; "
            "run it under torch.no_grad() or pass detached tensors (our C++ and CUDA kernels "
            "have a backward)"
        )


def triton_flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = True,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Launch the kernel on [batch, heads, seq, head_dim] tensors of any strides; returns q's shape."""
    batch, heads, seq_q, head_dim = q.shape
    if head_dim < 16 or head_dim & (head_dim - 1):
        raise ValueError(f"head_dim {head_dim} must be a power of two >= 16 (tl.arange, tl.dot)")
    if batch * heads > MAX_GRID_Y:
        raise ValueError(
            f"batch {batch} x heads {heads} = {batch * heads} programs per query block; the launch "
            f"grid's second dimension holds at most {MAX_GRID_Y}"
        )
    _refuse_autograd(q, k, v)
    if _INTERPRETED and q.dtype == torch.bfloat16:
        raise RuntimeError(INTERPRETER_BF16)
    return _launch(q, k, v, is_causal=is_causal, scale=scale, block_m=block_m, block_n=block_n)


def _launch(q, k, v, *, is_causal, scale, block_m, block_n):
    """The launch itself, without triton_flash_attention's checks."""
    batch, heads, seq_q, head_dim = q.shape
    seq_k = k.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    args = (q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride())
    args += (heads, seq_q, seq_k, scale * LOG2E)
    if block_m is None and block_n is None and not _INTERPRETED:

        def grid(meta):
            return (triton.cdiv(seq_q, meta["BLOCK_M"]), batch * heads)

        _tuned_kernel()[grid](*args, HEAD_DIM=head_dim, IS_CAUSAL=is_causal)
    else:  # fixed blocks: the interpreter, or a caller pinning them
        block_m = block_m or (INTERPRETER_BLOCKS[0] if _INTERPRETED else 128)
        block_n = block_n or (INTERPRETER_BLOCKS[1] if _INTERPRETED else 64)
        grid = (triton.cdiv(seq_q, block_m), batch * heads)
        _attn_fwd[grid](
            *args, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, IS_CAUSAL=is_causal
        )
    return out


class CustomTritonVariant(Variant):
    """The Triton kernel above as a chapter variant: CUDA only, bf16/fp16, head_dim 64 or 128."""

    name = "custom_triton"
    head_dims = (64, 128)
    dtypes = (torch.bfloat16, torch.float16)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = True
    ) -> torch.Tensor:
        """Attention of q over k, v; refuses inputs that require grad (there is no backward)."""
        _refuse_autograd(q, k, v)  # before the device checks: the answer is the same everywhere
        return super().forward(q, k, v, is_causal=is_causal)

    def _attention(self, q, k, v, *, is_causal):
        with torch.cuda.device(q.device):  # triton launches on the current device
            return triton_flash_attention(q, k, v, is_causal=is_causal)

    def _why_unavailable(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if device.type != "cuda":
            return (
                f"a Triton kernel compiled for NVIDIA GPUs cannot run on {device.type.upper()}; "
                "there it runs only under Triton's interpreter (TRITON_INTERPRET=1), which the tests use"
            )
        if triton is None:
            return "triton is not installed (it comes with CUDA builds of torch, or `pip install triton`)"
        if problem := self._dtype_problem(dtype):
            return problem
        if _INTERPRETED:  # the kernel runs on the host: no GPU generation to check
            return INTERPRETER_BF16 if dtype == torch.bfloat16 else None
        return older_than_ampere(device, "bf16 tensor cores and async copies")
