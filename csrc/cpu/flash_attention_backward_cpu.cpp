// FlashAttention-2 backward on the CPU: gradients of q, k, v without a [seq_q, seq_k] tensor.
//
// The forward saved each query row's log-sum-exp (lse). For a tile of keys [j0, j0 + cols) and
// queries [i0, i0 + rows), the backward recomputes the probabilities from it and takes every
// gradient from the tile alone:
//   S^T  = K_j Q_i^T                  P^T  = exp(scale S^T - lse_i)   (no running max: lse is final)
//   dP^T = V_j dO_i^T                 dS^T = P^T * (dP^T - D_i) * scale, D = rowsum(dO * O)
//   dV_j += P^T dO_i                  dK_j += dS^T Q_i                dQ_i^T += K_j^T dS^T
// Tiles are computed transposed (keys down, queries across) so that all five products are plain
// row-major GEMMs reading their operands where they lie: no tile is ever transposed, only Q^T and
// dO^T once per head and K^T once per key block.
//
// Threads share the (batch, head, key block) items (backward_tiles.h): a key block's dK and dV
// belong to one thread and need no atomics; dQ^T of a head is accumulated per thread and summed
// from per-thread partials, in a fixed order, where a head is split between threads. One pass over
// the tiles: five GEMMs each, where a second pass over query blocks for dQ would recompute S and dP
// (seven).
//
// This file multiplies in fp32 (cpublas::brgemm, oneDNN's fp32 brgemm). bf16 inputs take the CPU's
// bf16 instructions where the forward does (bf16_backward.cpp: P and dS rounded to bf16 before
// their products, fp32 accumulation); elsewhere (no AVX512-BF16, or a head_dim not a multiple of
// 16) they are widened to fp32 on their way into scratch and take the products here.

#include "attention_tiles.h"
#include "backward_tiles.h"
#include "bf16_products.h"
#include "cpu_features.h"
#include "flash_attention_cpu.h"
#include "vector_lanes.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace attn {
namespace {

using namespace lanes;
using tiles::kLog2e;
using tiles::round_up;

using backward::Floats;
using backward::Grads;
using backward::kKeys;
using backward::kRows;

// Leading dimension of a transposed fp32 buffer of n columns: a cache line more than n rounded to
// lines, so that the rows a GEMM reads together do not fall into the same L1 sets (as the
// forward's kt_stride).
int64_t packed_stride(int64_t n) { return round_up(n, 16) + 16; }

// One thread's working memory, allocated once per call: the head's Q^T, dO^T and dQ^T (and Q and
// dO widened, for bf16), its rows' lse (times log2 e) and D, one key block's K^T (and K and V
// widened), a tile's S^T and dP^T, and the key block's dK and dV.
template <typename T>
struct Scratch {
  static constexpr bool kWiden = !std::is_same_v<T, float>;
  explicit Scratch(const Grads<T>& g)
      : qt(g.d * g.ld_q), dot(g.d * g.ld_q), dqt(g.d * g.ld_q),
        qw(kWiden ? g.seq_q * g.d : 0), dow(kWiden ? g.seq_q * g.d : 0),
        lse2(g.seq_q), delta(g.seq_q), kt(g.d * packed_stride(kKeys)),
        kw(kWiden ? kKeys * g.d : 0), vw(kWiden ? kKeys * g.d : 0),
        s(kKeys * kRows), dp(kKeys * kRows), dk(kKeys * g.d), dv(kKeys * g.d) {}
  Floats qt, dot, dqt, qw, dow, lse2, delta, kt, kw, vw, s, dp, dk, dv;
  const float *q = nullptr, *dout = nullptr;  // the head's Q and dO in fp32: in place, or qw, dow
};

// x[rows, d] (row-major) as fp32 x^T [d, ld]: blocks of 32 rows, so each read line is used whole.
template <typename T>
void pack_transposed(const T* x, int64_t rows, int64_t d, float* xt, int64_t ld) {
  constexpr int64_t kBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = std::min(r0 + kBlock, rows);
    for (int64_t c = 0; c < d; ++c)
      for (int64_t r = r0; r < r1; ++r) xt[c * ld + r] = static_cast<float>(x[r * d + c]);
  }
}

template <typename T>
void widen(const T* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
}

// A new head for this thread: its Q^T and dO^T packed, each row's lse in base 2 and D = rowsum(dO
// * O), and dQ^T zeroed for the key blocks to accumulate into.
template <typename T>
void begin_head(const Grads<T>& g, int64_t bh, Scratch<T>& w) {
  const int64_t n = g.seq_q * g.d, offset = bh * n;
  pack_transposed(g.q + offset, g.seq_q, g.d, w.qt.get(), g.ld_q);
  pack_transposed(g.dout + offset, g.seq_q, g.d, w.dot.get(), g.ld_q);
  if constexpr (Scratch<T>::kWiden) {
    widen(g.q + offset, n, w.qw.get());
    widen(g.dout + offset, n, w.dow.get());
    w.q = w.qw.get(), w.dout = w.dow.get();
  } else {
    w.q = g.q + offset, w.dout = g.dout + offset;
  }
  const T* o = g.out + offset;
  for (int64_t i = 0; i < g.seq_q; ++i) {
    float sum = 0.f;
    for (int64_t c = 0; c < g.d; ++c)
      sum += static_cast<float>(o[i * g.d + c]) * w.dout[i * g.d + c];
    w.delta.get()[i] = sum;
    w.lse2.get()[i] = g.lse[bh * g.seq_q + i] * kLog2e;
  }
  std::fill(w.dqt.get(), w.dqt.get() + g.d * g.ld_q, 0.f);
}

// --8<-- [start:backward-tile]
// One row of a tile, transposed: key j0 + c against `rows` queries. s (S^T's row) becomes P^T's,
// dp (dP^T's) becomes dS^T's times scale. lse2 and delta are the queries' lse * log2(e) and D.
// Queries before `first` do not see this key (causal): zeros.
template <typename V>
ATTN_INLINE void probs_and_score_grads(float* s, float* dp, int64_t rows, int64_t first,
                                       const float* lse2, const float* delta, float scale) {
  constexpr int64_t W = kLanes<V>;
  const float scale2 = scale * kLog2e;
  int64_t r = 0;
  for (; r + W <= rows; r += W) {
    const V p = exp2_lanes(load<V>(s + r) * scale2 - load<V>(lse2 + r));
    store(s + r, p);
    store(dp + r, p * (load<V>(dp + r) - load<V>(delta + r)) * scale);
  }
  for (; r < rows; ++r) {
    const float p = std::exp2(s[r] * scale2 - lse2[r]);
    s[r] = p;
    dp[r] = p * (dp[r] - delta[r]) * scale;
  }
  // Hidden entries were computed with the rest (exp of whatever they held) and are cleared here.
  std::fill(s, s + first, 0.f);
  std::fill(dp, dp + first, 0.f);
}

// One work item: keys [j0, j0 + kKeys) of head bh against every query that sees them. dK and dV
// are complete at the end and written out; dQ^T of the head gains this block's share.
template <typename V, typename T>
ATTN_INLINE void key_block(const Grads<T>& g, int64_t bh, int64_t j0, Scratch<T>& w) {
  const int64_t d = g.d, cols = std::min(kKeys, g.seq_k - j0);
  const int64_t ld_kt = packed_stride(kKeys);
  const T* k_in = g.k + (bh * g.seq_k + j0) * d;
  const T* v_in = g.v + (bh * g.seq_k + j0) * d;
  const float *k = nullptr, *v = nullptr;  // the block's K and V in fp32
  if constexpr (Scratch<T>::kWiden) {
    widen(k_in, cols * d, w.kw.get());
    widen(v_in, cols * d, w.vw.get());
    k = w.kw.get(), v = w.vw.get();
  } else {
    k = k_in, v = v_in;
  }
  pack_transposed(k_in, cols, d, w.kt.get(), ld_kt);
  float *s = w.s.get(), *dp = w.dp.get(), *dk = w.dk.get(), *dv = w.dv.get();
  // Causal: query i sees keys j <= i, so queries before j0 see none of this block.
  const int64_t i_begin = g.causal ? j0 : 0;
  for (int64_t i0 = i_begin; i0 < g.seq_q; i0 += kRows) {
    const int64_t rows = std::min(kRows, g.seq_q - i0);
    // S^T = K_j @ Q_i^T and dP^T = V_j @ dO_i^T: [cols, d] x [d, rows].
    gemm(cols, rows, d, k, d, w.qt.get() + i0, g.ld_q, s, kRows, false);
    gemm(cols, rows, d, v, d, w.dot.get() + i0, g.ld_q, dp, kRows, false);
    for (int64_t c = 0; c < cols; ++c) {  // query i0 + r sees key j0 + c iff r >= j0 + c - i0
      const int64_t first = g.causal ? std::clamp<int64_t>(j0 + c - i0, 0, rows) : 0;
      probs_and_score_grads<V>(s + c * kRows, dp + c * kRows, rows, first,
                               w.lse2.get() + i0, w.delta.get() + i0, g.scale);
    }
    const bool more = i0 > i_begin;  // the first tile overwrites dK and dV
    // dV_j += P^T @ dO_i and dK_j += dS^T @ Q_i: [cols, rows] x [rows, d].
    gemm(cols, d, rows, s, kRows, w.dout + i0 * d, d, dv, d, more);
    gemm(cols, d, rows, dp, kRows, w.q + i0 * d, d, dk, d, more);
    // dQ_i^T += K_j^T @ dS^T: [d, cols] x [cols, rows].
    gemm(d, rows, cols, w.kt.get(), ld_kt, dp, kRows, w.dqt.get() + i0, g.ld_q, true);
  }
  T* dk_out = g.dk + (bh * g.seq_k + j0) * d;
  T* dv_out = g.dv + (bh * g.seq_k + j0) * d;
  const bool seen = i_begin < g.seq_q;  // else no query sees these keys: zero gradients
  for (int64_t x = 0; x < cols * d; ++x) {
    dk_out[x] = T(seen ? dk[x] : 0.f);
    dv_out[x] = T(seen ? dv[x] : 0.f);
  }
}
// --8<-- [end:backward-tile]

template <typename T>
using BlockKernel = void (*)(const Grads<T>&, int64_t, int64_t, Scratch<T>&);

// key_block compiled once per vector ISA, as the forward's tile loop is.
#define ATTN_KEY_BLOCK_FOR(name, isa, vector)                                                  \
  template <typename T>                                                                        \
  __attribute__((target(isa))) void name(const Grads<T>& g, int64_t bh, int64_t j0,            \
                                         Scratch<T>& w) {                                      \
    key_block<vector>(g, bh, j0, w);                                                           \
  }
ATTN_KEY_BLOCK_FOR(key_block_baseline, "default", f32x4)
#ifdef ATTN_X86_COPIES
ATTN_KEY_BLOCK_FOR(key_block_avx2, "avx2,fma", f32x8)
ATTN_KEY_BLOCK_FOR(key_block_avx512, "avx2,fma,avx512f,avx512bw,avx512dq,avx512vl", f32x16)
#endif

template <typename T>
BlockKernel<T> block_kernel() {
#ifdef ATTN_X86_COPIES
  if (torch_isa() == "AVX512") return &key_block_avx512<T>;
  if (torch_isa() == "AVX2") return &key_block_avx2<T>;
#endif
  return &key_block_baseline<T>;
}

// One thread's share of the work, for backward::over_key_blocks: its scratch, and this ISA's copy
// of key_block.
template <typename T>
struct Fp32Worker {
  explicit Fp32Worker(const Grads<T>& grads) : g(grads), w(grads), run_block(block_kernel<T>()) {}
  void begin_head(int64_t bh) { attn::begin_head(g, bh, w); }
  void key_block(int64_t bh, int64_t j0) { run_block(g, bh, j0, w); }
  void end_head(int64_t bh, float* partial) { backward::write_dq(g, bh, w.dqt.get(), partial); }
  const Grads<T>& g;
  Scratch<T> w;
  BlockKernel<T> run_block;
};

void check_like(const char* name, const at::Tensor& t, const at::Tensor& q) {
  TORCH_CHECK_VALUE(t.device().is_cpu(), "attn::flash_attention_backward (CPU) needs CPU tensors; ",
                    name, " is on ", t.device());
  TORCH_CHECK_VALUE(t.sizes() == q.sizes() && t.scalar_type() == q.scalar_type(), name,
                    " must have q's shape and dtype ", q.sizes(), " ", q.scalar_type(), "; got ",
                    t.sizes(), " ", t.scalar_type());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool is_causal, double scale) {
  check_qkv("attn::flash_attention_backward", q, k, v);
  check_like("grad_out", grad_out, q);
  check_like("out", out, q);
  const int64_t batch = q.size(0), heads = q.size(1), seq_q = q.size(2);
  TORCH_CHECK_VALUE(
      lse.device().is_cpu() && lse.scalar_type() == at::kFloat && lse.dim() == 3 &&
          lse.size(0) == batch && lse.size(1) == heads && lse.size(2) == seq_q,
      "lse must be float32 [batch, heads, seq_q] = [", batch, ", ", heads, ", ", seq_q,
      "] on the CPU; got ", lse.scalar_type(), " ", lse.sizes(), " on ", lse.device());
  // The kernel reads whole contiguous heads; grad_out often arrives as a view (an expanded sum).
  const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const at::Tensor oc = out.contiguous(), doc = grad_out.contiguous(), lc = lse.contiguous();
  at::Tensor dq(at::detail::empty_cpu(q.sizes(), q.scalar_type()));
  at::Tensor dk(at::detail::empty_cpu(k.sizes(), k.scalar_type()));
  at::Tensor dv(at::detail::empty_cpu(v.sizes(), v.scalar_type()));
  if (seq_q == 0 || batch * heads == 0) {  // no query sees any key
    dk.zero_(), dv.zero_();
    return {dq, dk, dv};
  }
  const int64_t d = q.size(3);
  auto grads = [&](auto zero, int64_t ld_q) {
    using T = decltype(zero);
    return Grads<T>{qc.const_data_ptr<T>(), kc.const_data_ptr<T>(), vc.const_data_ptr<T>(),
                    oc.const_data_ptr<T>(), doc.const_data_ptr<T>(), lc.const_data_ptr<float>(),
                    dq.data_ptr<T>(), dk.data_ptr<T>(), dv.data_ptr<T>(),
                    seq_q, k.size(2), d, static_cast<float>(scale), is_causal, ld_q};
  };
  if (q.scalar_type() == at::kFloat) {
    backward::over_key_blocks<Fp32Worker<float>>(grads(float{}, packed_stride(seq_q)),
                                                 batch * heads);
  } else if (const Bf16Path path = pick_bf16_path(d % 16 == 0); path != Bf16Path::kFp32) {
    run_bf16_backward(grads(c10::BFloat16{}, bf16_backward_ld_q(seq_q)), batch * heads, path);
  } else {  // bf16 widened to fp32
    backward::over_key_blocks<Fp32Worker<c10::BFloat16>>(
        grads(c10::BFloat16{}, packed_stride(seq_q)), batch * heads);
  }
  return {dq, dk, dv};
}

}  // namespace attn
