"""A FlashAttention-2-style forward kernel in Triton, in the spirit of Triton's 06-fused-attention.

One program owns a block of BLOCK_M queries of one (batch, head) and walks over the keys in blocks of
BLOCK_N. The scores of a block never leave the chip: an online softmax keeps a running row max `m_i`
and row sum `l_i`, rescales the fp32 accumulator whenever the max grows, and divides once at the end.
The scale is folded into log2(e) so the kernel can use exp2. With `is_causal` the loop stops at the
diagonal: blocks above it are never loaded, and only the blocks on it are masked element-wise.

The backward is FlashAttention-2's, in the shape of the tutorial's: the forward also stores each
query row's log-sum-exp, so the backward recomputes every probability tile from it (never a
[seq_q, seq_k] tensor); a preprocess kernel takes D = rowsum(dO * O), one kernel walks the queries
for each block of keys (dK, dV) and another the keys for each block of queries (dQ).

Read in order: the inner loop, the kernel, the launch wrapper, the backward, and the Variant the
chapters use.
"""

# Annotations stay strings, so `tl.constexpr` below needs no triton at import time.
from __future__ import annotations

import contextlib
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
# The same two constants inside kernels, which may read a global only when it is a tl.constexpr.
_LOG2E = tl.constexpr(LOG2E) if tl else LOG2E
_LN2 = tl.constexpr(math.log(2.0)) if tl else math.log(2.0)


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
    Q, K, V, Out, LSE,  # LSE: fp32 [batch, heads, seq_q], written only with STORE_LSE
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    HEADS, SEQ_Q, SEQ_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
    STORE_LSE: tl.constexpr,
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
    if STORE_LSE:  # what the backward needs to rebuild P: log(sum_j exp(s_ij)), natural log
        # m_i is the row max in log2 units, so log2 of the row's sum is m_i + log2(l_i)
        lse = (m_i + tl.math.log2(l_i)) * _LN2
        tl.store(LSE + off_bh.to(tl.int64) * SEQ_Q + offs_m, lse, mask=offs_m < SEQ_Q)


@jit
def _attn_bwd_preprocess(
    Out, DO, Delta,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    HEADS, SEQ_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    # D_i = sum_d dO_id * O_id, which equals sum_j P_ij * dP_ij: the softmax backward's row term,
    # once per row here rather than once per key block in both kernels below.
    off_bh = tl.program_id(1)
    off_b, off_h = (off_bh // HEADS).to(tl.int64), (off_bh % HEADS).to(tl.int64)
    offs_m = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    row_ok = offs_m < SEQ_Q
    o_ptrs = Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_om
    do_ptrs = DO + off_b * stride_dob + off_h * stride_doh + offs_m[:, None] * stride_dom
    o = tl.load(o_ptrs + offs_d[None, :] * stride_od, mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptrs + offs_d[None, :] * stride_dod, mask=row_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(Delta + off_bh.to(tl.int64) * SEQ_Q + offs_m, delta, mask=row_ok)


@jit
def _bwd_dkdv_inner(
    dk, dv, k, v,  # this program's BLOCK_N keys and values, and their fp32 gradients so far
    q_base, do_base, lse_base, delta_base, stride_qm, stride_qd, stride_dom, stride_dod,
    offs_n, lo, hi, SEQ_Q, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, ON_DIAGONAL: tl.constexpr,
):  # fmt: skip
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    # --8<-- [start:backward]
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = (start_m + tl.arange(0, BLOCK_M)).to(tl.int64)
        in_bounds = offs_m < SEQ_Q
        # Q read transposed ([HEAD_DIM, BLOCK_M]): the tile comes out as S^T, one key per row, so
        # P^T feeds dV = P^T dO and dK = dS^T Q without a transpose of the tile.
        q_t = tl.load(
            q_base + offs_m[None, :] * stride_qm + offs_d[:, None] * stride_qd,
            mask=in_bounds[None, :], other=0.0,
        )  # fmt: skip
        # An lse of +inf for rows past the queries makes their probabilities exactly 0.
        lse = tl.load(lse_base + offs_m, mask=in_bounds, other=float("inf")) * _LOG2E
        p_t = tl.math.exp2(tl.dot(k, q_t) * qk_scale - lse[None, :])  # P^T, [BLOCK_N, BLOCK_M]
        if ON_DIAGONAL:  # query i saw key j only when j <= i
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        do = tl.load(
            do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
            mask=in_bounds[:, None], other=0.0,
        )  # fmt: skip
        dv = tl.dot(p_t.to(do.dtype), do, dv)  # dV += P^T dO, P rounded as the forward's
        dp_t = tl.dot(v, tl.trans(do))  # dP^T = V dO^T
        delta = tl.load(delta_base + offs_m, mask=in_bounds, other=0.0)
        ds_t = p_t * (dp_t - delta[None, :])  # the softmax backward: dS = P * (dP - D)
        dk = tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t), dk)  # dK += dS^T Q (scale applied once)
    # --8<-- [end:backward]
    return dk, dv


@jit
def _attn_bwd_dkdv(
    Q, K, V, DO, LSE, Delta, DK, DV,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_gb, stride_gh, stride_gn, stride_gd,  # dK's and dV's: both allocated contiguous
    HEADS, SEQ_Q, SEQ_K, qk_scale, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):  # fmt: skip
    # One program owns BLOCK_N keys and sums over every query into their dK and dV: no other
    # program writes them, so no atomics, and the sum's order is fixed (deterministic).
    tl.static_assert(BLOCK_N % BLOCK_M == 0)  # the diagonal ends on a query-block boundary
    start_n = tl.program_id(0) * BLOCK_N
    off_bh = tl.program_id(1)
    off_b, off_h = (off_bh // HEADS).to(tl.int64), (off_bh % HEADS).to(tl.int64)
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    do_base = DO + off_b * stride_dob + off_h * stride_doh
    lse_base = LSE + off_bh.to(tl.int64) * SEQ_Q
    delta_base = Delta + off_bh.to(tl.int64) * SEQ_Q
    offs_n = (start_n + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    key_ok = offs_n[:, None] < SEQ_K  # keys past SEQ_K load as 0 and are not stored
    k_ptrs = K + off_b * stride_kb + off_h * stride_kh + offs_n[:, None] * stride_kn
    v_ptrs = V + off_b * stride_vb + off_h * stride_vh + offs_n[:, None] * stride_vn
    k = tl.load(k_ptrs + offs_d[None, :] * stride_kd, mask=key_ok, other=0.0)
    v = tl.load(v_ptrs + offs_d[None, :] * stride_vd, mask=key_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    if IS_CAUSAL:
        # Queries before start_n see none of these keys: never loaded. The BLOCK_N queries from
        # start_n are on the diagonal (masked); every later query sees all of them (no mask).
        dk, dv = _bwd_dkdv_inner(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qm, stride_qd, stride_dom, stride_dod,
            offs_n, start_n, tl.minimum(start_n + BLOCK_N, SEQ_Q), SEQ_Q, qk_scale,
            HEAD_DIM, BLOCK_M, True,
        )  # fmt: skip
        dk, dv = _bwd_dkdv_inner(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qm, stride_qd, stride_dom, stride_dod,
            offs_n, start_n + BLOCK_N, SEQ_Q, SEQ_Q, qk_scale, HEAD_DIM, BLOCK_M, False,
        )  # fmt: skip
    else:
        dk, dv = _bwd_dkdv_inner(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qm, stride_qd, stride_dom, stride_dod,
            offs_n, 0, SEQ_Q, SEQ_Q, qk_scale, HEAD_DIM, BLOCK_M, False,
        )  # fmt: skip
    # Keys no query saw (causal, seq_k > seq_q) get zeros: the loops above did not run for them.
    g_ptrs = offs_n[:, None] * stride_gn + offs_d[None, :] * stride_gd
    g_ptrs += off_b * stride_gb + off_h * stride_gh
    tl.store(DV + g_ptrs, dv.to(DV.dtype.element_ty), mask=key_ok)
    tl.store(DK + g_ptrs, (dk * sm_scale).to(DK.dtype.element_ty), mask=key_ok)


@jit
def _bwd_dq_inner(
    dq, q, do, lse, delta,  # this program's BLOCK_M query rows: dQ so far, inputs, row statistics
    k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, lo, hi, SEQ_K, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, ON_DIAGONAL: tl.constexpr,
):  # fmt: skip
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = (start_n + tl.arange(0, BLOCK_N)).to(tl.int64)
        in_bounds = offs_n < SEQ_K
        # K and V read transposed ([HEAD_DIM, BLOCK_N]), as the forward reads K
        k_t = tl.load(
            k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
            mask=in_bounds[None, :], other=0.0,
        )  # fmt: skip
        v_t = tl.load(
            v_base + offs_n[None, :] * stride_vn + offs_d[:, None] * stride_vd,
            mask=in_bounds[None, :], other=0.0,
        )  # fmt: skip
        p = tl.math.exp2(tl.dot(q, k_t) * qk_scale - lse[:, None])  # P rebuilt from the lse
        if ON_DIAGONAL:
            keep = in_bounds[None, :] & (offs_m[:, None] >= offs_n[None, :])
        else:
            keep = in_bounds[None, :]
        p = tl.where(keep, p, 0.0)  # keys past SEQ_K load as 0 but would get exp2(-lse) > 0
        ds = p * (tl.dot(do, v_t) - delta[:, None])  # dS = P * (dO V^T - D)
        dq = tl.dot(ds.to(k_t.dtype), tl.trans(k_t), dq)  # dQ += dS K (scale applied once)
    return dq


@jit
def _attn_bwd_dq(
    Q, K, V, DO, LSE, Delta, DQ,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_gb, stride_gh, stride_gm, stride_gd,  # dQ's
    HEADS, SEQ_Q, SEQ_K, qk_scale, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
):  # fmt: skip
    # The forward's loop again, for one block of queries: it recomputes P (and dP) rather than
    # share them with _attn_bwd_dkdv, the price of no atomics on dQ.
    tl.static_assert(BLOCK_M % BLOCK_N == 0)  # the diagonal starts on a key-block boundary
    start_m = tl.program_id(0) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b, off_h = (off_bh // HEADS).to(tl.int64), (off_bh % HEADS).to(tl.int64)
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    offs_m = (start_m + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    row_ok = offs_m[:, None] < SEQ_Q
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qm
    do_ptrs = DO + off_b * stride_dob + off_h * stride_doh + offs_m[:, None] * stride_dom
    q = tl.load(q_ptrs + offs_d[None, :] * stride_qd, mask=row_ok, other=0.0)
    do = tl.load(do_ptrs + offs_d[None, :] * stride_dod, mask=row_ok, other=0.0)
    rows = off_bh.to(tl.int64) * SEQ_Q + offs_m
    lse = tl.load(LSE + rows, mask=offs_m < SEQ_Q, other=float("inf")) * _LOG2E
    delta = tl.load(Delta + rows, mask=offs_m < SEQ_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if IS_CAUSAL:  # as the forward: no mask left of the diagonal, masked on it, nothing past it
        dq = _bwd_dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, 0, tl.minimum(start_m, SEQ_K), SEQ_K, qk_scale, HEAD_DIM, BLOCK_N, False,
        )  # fmt: skip
        dq = _bwd_dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, start_m, tl.minimum(start_m + BLOCK_M, SEQ_K), SEQ_K, qk_scale,
            HEAD_DIM, BLOCK_N, True,
        )  # fmt: skip
    else:
        dq = _bwd_dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, 0, SEQ_K, SEQ_K, qk_scale, HEAD_DIM, BLOCK_N, False,
        )  # fmt: skip
    dq_ptrs = DQ + off_b * stride_gb + off_h * stride_gh + offs_m[:, None] * stride_gm
    tl.store(
        dq_ptrs + offs_d[None, :] * stride_gd, (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok
    )


# `@triton.jit` chose above whether to compile or interpret, from TRITON_INTERPRET; so did every jit
# function of triton's own library (tl.zeros, tl.sum) at `import triton`. The variable must therefore
# be set before triton is first imported in the process. Ask the kernel what it became.
_INTERPRETED = triton is not None and not isinstance(_attn_fwd, triton.runtime.JITFunction)
# The interpreter runs every block op in numpy: small blocks keep it fast; BLOCK_M = 2 * BLOCK_N as on
# the GPU, so the diagonal spans two key blocks there too. tl.dot needs every side >= 16. The dK/dV
# kernel's diagonal spans two query blocks the same way (its BLOCK_N = 2 * BLOCK_M).
INTERPRETER_BLOCKS = (32, 16)
INTERPRETER_DKDV_BLOCKS = (16, 32)
PREPROCESS_BLOCK = 64  # rows per program of the D = rowsum(dO * O) kernel: it only streams memory
KERNELS = {"fwd": _attn_fwd, "dkdv": _attn_bwd_dkdv, "dq": _attn_bwd_dq}  # by _launch_kernel


# (BLOCK_M, BLOCK_N, num_warps, num_stages) each kernel is autotuned over on a GPU.
CONFIGS = {
    # BLOCK_M 128 x BLOCK_N 64 is the tutorial's choice on A100/H100; 64 x 64 with two stages fits
    # the ~100 KB of shared memory of consumer Ampere/Ada cards at head_dim 128.
    "fwd": [(128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 2)],
    # dK/dV keep a key block and two fp32 accumulators of it for the whole loop and stream small
    # query blocks past them (the tutorial's 32 x 128); dQ is the mirror image. Each config
    # compiles for sm_80 and sm_90 at head_dim 64 and 128 in under 132 KB of shared memory, and
    # none spills registers on sm_90 (ptxas -v). With 4 warps a 128-row accumulator at head_dim
    # 128 spills, so the big blocks get 8 warps; the last of each list still spills on sm_80 at
    # head_dim 128, where the autotuner passes over it.
    "dkdv": [(32, 128, 8, 2), (32, 64, 4, 3), (64, 128, 8, 2)],
    "dq": [(128, 32, 8, 2), (64, 32, 4, 3), (128, 64, 8, 2)],
}


@functools.cache
def _tuned(kernel_name: str):
    """A kernel autotuned over its CONFIGS; the first call per shape compiles all of them."""
    configs = [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=warps, num_stages=stages)
        for m, n, warps, stages in CONFIGS[kernel_name]
    ]
    key = ["SEQ_Q", "SEQ_K", "HEAD_DIM", "IS_CAUSAL"]
    return triton.autotune(configs, key=key + (["STORE_LSE"] if kernel_name == "fwd" else []))(
        KERNELS[kernel_name]
    )


def _launch_kernel(
    name: str, args: tuple, consts: dict, *, seq: int, along: str, programs: int, blocks
):
    """Launch kernel `name` on the grid (blocks of `seq` cut by its `along` block size, programs):
    with `blocks` (BLOCK_M, BLOCK_N) pinned, else autotuned over its CONFIGS."""
    if blocks is None:
        _tuned(name)[lambda meta: (triton.cdiv(seq, meta[along]), programs)](*args, **consts)
        return
    sizes = dict(zip(("BLOCK_M", "BLOCK_N"), blocks, strict=True))
    KERNELS[name][(triton.cdiv(seq, sizes[along]), programs)](*args, **consts, **sizes)


def _strides(*tensors: torch.Tensor) -> tuple[int, ...]:
    """Each tensor's four strides, one after another: the kernels take them as arguments."""
    return tuple(s for t in tensors for s in t.stride())


# The launch grid is (query blocks, batch * heads): CUDA caps a grid's second dimension at 65535.
MAX_GRID_Y = 65535
INTERPRETER_BF16 = (
    "Triton's interpreter (TRITON_INTERPRET=1) stores bf16 as uint16 and its tl.dot multiplies "
    "those bit patterns (triton-lang/triton#11584), so bf16 runs only compiled, on a GPU; "
    "use float16 under the interpreter"
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
    """Attention of q over k, v ([batch, heads, seq, head_dim], any strides); differentiable."""
    batch, heads, seq_q, head_dim = q.shape
    if head_dim < 16 or head_dim & (head_dim - 1):
        raise ValueError(f"head_dim {head_dim} must be a power of two >= 16 (tl.arange, tl.dot)")
    if batch * heads > MAX_GRID_Y:
        raise ValueError(
            f"batch {batch} x heads {heads} = {batch * heads} programs per query block; the launch "
            f"grid's second dimension holds at most {MAX_GRID_Y}"
        )
    if _INTERPRETED and q.dtype == torch.bfloat16:
        raise RuntimeError(INTERPRETER_BF16)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _FlashAttention.apply(q, k, v, is_causal, scale, block_m, block_n)
    # Without autograd the launch is the bare forward: no lse is stored and no Function recorded.
    return _launch(q, k, v, is_causal=is_causal, scale=scale, block_m=block_m, block_n=block_n)[0]


def _launch(q, k, v, *, is_causal, scale, block_m, block_n, store_lse=False):
    """The forward's launch, without triton_flash_attention's checks: (out, lse or None)."""
    batch, heads, seq_q, head_dim = q.shape
    seq_k = k.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    # fp32 [batch, heads, seq_q]; without STORE_LSE the kernel never touches it, so `out` stands in
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if store_lse else None
    args = (q, k, v, out, out if lse is None else lse)
    args += (*_strides(q, k, v, out), heads, seq_q, seq_k, scale * LOG2E)
    consts = {"HEAD_DIM": head_dim, "IS_CAUSAL": is_causal, "STORE_LSE": store_lse}
    blocks = None  # autotuned, unless the interpreter runs it or a caller pins a block size
    if block_m is not None or block_n is not None or _INTERPRETED:
        blocks = (
            block_m or (INTERPRETER_BLOCKS[0] if _INTERPRETED else 128),
            block_n or (INTERPRETER_BLOCKS[1] if _INTERPRETED else 64),
        )
    _launch_kernel(
        "fwd", args, consts, seq=seq_q, along="BLOCK_M", programs=batch * heads, blocks=blocks
    )
    return out, lse


def _launch_backward(q, k, v, out, lse, dout, *, is_causal, scale, blocks=None):
    """dq, dk, dv from the saved forward: the preprocess, then the dK/dV and the dQ kernels.

    `blocks` pins ((BLOCK_M, BLOCK_N) of dK/dV, (BLOCK_M, BLOCK_N) of dQ); None autotunes on a GPU.
    """
    batch, heads, seq_q, head_dim = q.shape
    seq_k = k.shape[2]
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(k.shape, dtype=v.dtype, device=v.device)  # dk's strides serve for both
    delta = torch.empty_like(lse)
    pre_grid = (triton.cdiv(seq_q, PREPROCESS_BLOCK), batch * heads)
    _attn_bwd_preprocess[pre_grid](
        out, dout, delta, *_strides(out, dout), heads, seq_q, head_dim, PREPROCESS_BLOCK
    )
    inputs = (q, k, v, dout, lse, delta)
    strides = _strides(q, k, v, dout)
    tail = (heads, seq_q, seq_k, scale * LOG2E, scale)
    consts = {"HEAD_DIM": head_dim, "IS_CAUSAL": is_causal}
    if _INTERPRETED and blocks is None:
        blocks = (INTERPRETER_DKDV_BLOCKS, INTERPRETER_BLOCKS)
    dkdv_blocks, dq_blocks = blocks or (None, None)
    dkdv_args = (*inputs, dk, dv, *strides, *_strides(dk), *tail)
    dq_args = (*inputs, dq, *strides, *_strides(dq), *tail)
    programs = batch * heads
    _launch_kernel("dkdv", dkdv_args, consts, seq=seq_k, along="BLOCK_N", programs=programs,
                   blocks=dkdv_blocks)  # fmt: skip
    _launch_kernel("dq", dq_args, consts, seq=seq_q, along="BLOCK_M", programs=programs,
                   blocks=dq_blocks)  # fmt: skip
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    """The forward kernel, saving q, k, v, out and the lse, with the fused backward above."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, scale, block_m, block_n):
        out, lse = _launch(
            q, k, v, is_causal=is_causal, scale=scale, block_m=block_m, block_n=block_n,
            store_lse=True,
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, out, lse)  # O(seq) beyond the inputs: no [seq_q, seq_k]
        ctx.is_causal, ctx.scale = is_causal, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        # Autograd may run this on a thread of its own: launch on the tensors' GPU, not the current.
        on_device = torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext()
        with on_device:
            grads = _launch_backward(
                q, k, v, out, lse, dout, is_causal=ctx.is_causal, scale=ctx.scale
            )
        return (*grads, None, None, None, None)


class CustomTritonVariant(Variant):
    """The Triton kernel above as a chapter variant: CUDA only, bf16/fp16, head_dim 64 or 128."""

    name = "custom_triton"
    head_dims = (64, 128)
    dtypes = (torch.bfloat16, torch.float16)

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
