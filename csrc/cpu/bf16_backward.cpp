// FlashAttention-2's backward (flash_attention_backward_cpu.cpp gives its algebra) with bf16 tile
// products on the CPU's bf16 instructions, as the forward's (bf16_products.cpp): AMX through
// cpublas::brgemm, or AVX512-BF16 dot products. As in torch's own CPU flash backward, the
// probabilities P and the score gradients dS are rounded to bf16 before the products that read
// them; every product accumulates in fp32 (dK, dV and dQ^T in fp32 scratch), and the gradients are
// rounded to bf16 once, when written.
//
// Tiles are transposed (keys down, queries across) as in the fp32 path, and each product reads bf16
// operands where the instructions want them, B in pairs ("VNNI", bf16_tiles.h):
//   S^T  = K_j  [keys, d] @ Q_i^T  and  dP^T = V_j [keys, d] @ dO_i^T: B in pairs of d
//   dV_j += P^T [keys, rows] @ dO_i  and  dK_j += dS^T [keys, rows] @ Q_i: B in pairs of rows
//   dQ_i^T += K_j^T [d, keys] @ dS^T: B in pairs of keys
// Q and dO are packed both ways once per head, K^T once per key block; dS^T is written in both of
// its layouts as it is made. Tiles are padded with zeros to kKeys x kQueries, so brgemm JITs three
// GEMM shapes (and their accumulating twins) whatever the lengths.

#include "attention_tiles.h"
#include "backward_tiles.h"
#include "bf16_products.h"
#include "bf16_tiles.h"

#include <ATen/native/CPUBlas.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace attn {

using bf16 = c10::BFloat16;
using backward::Grads;
using backward::kKeys;
using tiles::round_up;

namespace {

// Queries per tile: twice the fp32 path's kRows, which halves the brgemm calls per product (each
// with its own setup); on our AMX CPU at B2 H8 S2048 D64 that took about 12% less CPU time than
// 64, and 256 no less than 128.
constexpr int64_t kQueries = 128;

// A head's queries padded for its last tile: tiles start at a key block's first key (a multiple
// of kKeys) or at 0, and span kQueries.
int64_t padded_queries(int64_t seq_q) { return round_up(seq_q, kKeys) + kQueries - kKeys; }

}  // namespace

// Its packed Q^T and dO^T (in words) and its dQ^T (in floats) have a line more, so that their rows
// at a power-of-two length do not share L1 sets.
int64_t bf16_backward_ld_q(int64_t seq_q) { return padded_queries(seq_q) + 16; }

#ifdef ATTN_BF16_PRODUCTS
namespace {

using namespace bf16_tiles;
using backward::Floats;
template <typename E>
using Scratchpad = backward::Scratchpad<E>;

// One thread's working memory, allocated once per call: the head's Q and dO packed both ways, its
// dQ^T, lse (times log2 e) and D per query; a key block's K and V (padded where it is short), its
// K^T, and its dK and dV; a tile's S^T and dP^T (fp32), P^T and dS^T (bf16), and dS^T in pairs.
struct Bf16Scratch {
  explicit Bf16Scratch(const Grads<bf16>& g)
      : width(padded_queries(g.seq_q)),
        qt(g.d * g.ld_q), dot(g.d * g.ld_q), qp(width * g.d), dop(width * g.d),
        dqt(g.d * g.ld_q), lse2(width), delta(width),
        kpad(kKeys * g.d), vpad(kKeys * g.d), kt(g.d * kKeys),
        s(kKeys * kQueries), dp(kKeys * kQueries), pt(kKeys * kQueries),
        dst(kKeys * kQueries), dsp(kKeys * kQueries), dk(kKeys * g.d), dv(kKeys * g.d) {}
  int64_t width;  // padded_queries(seq_q)
  Scratchpad<bf16> qt, dot, qp, dop;
  Floats dqt, lse2, delta;
  Scratchpad<bf16> kpad, vpad, kt;
  Floats s, dp;
  Scratchpad<bf16> pt, dst, dsp;
  Floats dk, dv;
};

// 16 bf16 as 16 floats (bf16 is a float's top half).
ATTN_BF16_INLINE __m512 widen16(const bf16* x) {
  const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}

// A new head for this thread: Q and dO packed both ways (queries past seq_q zeros), each row's lse
// in base 2 and D = rowsum(dO * O) (zeros past seq_q), and dQ^T zeroed for the key blocks.
ATTN_BF16_ISA void begin_head(const Grads<bf16>& g, int64_t bh, Bf16Scratch& w) {
  const int64_t d = g.d, offset = bh * g.seq_q * d;
  const bf16 *q = g.q + offset, *dout = g.dout + offset, *o = g.out + offset;
  pack_transposed_pairs(q, d, g.seq_q, w.width, d, w.qt.get(), g.ld_q);
  pack_transposed_pairs(dout, d, g.seq_q, w.width, d, w.dot.get(), g.ld_q);
  pack_row_pairs(q, d, g.seq_q, w.width, d, w.qp.get());
  pack_row_pairs(dout, d, g.seq_q, w.width, d, w.dop.get());
  float *lse2 = w.lse2.get(), *delta = w.delta.get();
  for (int64_t i = 0; i < g.seq_q; ++i) {
    __m512 sum = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 16)
      sum = _mm512_fmadd_ps(widen16(o + i * d + c), widen16(dout + i * d + c), sum);
    delta[i] = _mm512_reduce_add_ps(sum);
    lse2[i] = g.lse[bh * g.seq_q + i] * tiles::kLog2e;
  }
  std::fill(lse2 + g.seq_q, lse2 + w.width, 0.f);
  std::fill(delta + g.seq_q, delta + w.width, 0.f);
  std::fill(w.dqt.get(), w.dqt.get() + d * g.ld_q, 0.f);
}

// Lanes [lo, hi) of 16, lo and hi clamped to [0, 16].
ATTN_BF16_INLINE __mmask16 lanes_between(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16), hi = std::clamp<int64_t>(hi, 0, 16);
  const uint32_t upto_hi = (1u << hi) - 1, below_lo = (1u << lo) - 1;
  return static_cast<__mmask16>(upto_hi & ~below_lo);
}

// A tile's S^T and dP^T (fp32, kKeys x kQueries) become P^T = exp(scale S^T - lse) and dS^T = P^T *
// (dP^T - D) * scale in bf16, dS^T also in pairs of keys (dsp). Entry (c, r) is key j0 + c against
// query i0 + r; it is zero where the key is past the block (c >= cols), the query past the head
// (r >= rows) or, causal, the key in the query's future (r < j0 + c - i0). Two keys at a time: one
// pair of dS^T rows.
ATTN_BF16_INLINE void score_grads(const Grads<bf16>& g, Bf16Scratch& w, int64_t i0, int64_t rows,
                                  int64_t j0, int64_t cols) {
  const __m512 scale2 = _mm512_set1_ps(g.scale * tiles::kLog2e), scale = _mm512_set1_ps(g.scale);
  const float *s = w.s.get(), *dp = w.dp.get();
  const float *lse2 = w.lse2.get() + i0, *delta = w.delta.get() + i0;
  bf16 *pt = w.pt.get(), *dst = w.dst.get(), *dsp = w.dsp.get();
  for (int64_t c = 0; c < kKeys; c += 2) {
    for (int64_t r = 0; r < kQueries; r += 16) {
      __m256i grads[2];
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t key = c + e, at = key * kQueries + r;
        const int64_t first = g.causal ? j0 + key - i0 : 0;  // the first query that sees the key
        const __mmask16 seen = key < cols ? lanes_between(first - r, rows - r) : 0;
        const __m512 t =
            _mm512_fmsub_ps(_mm512_loadu_ps(s + at), scale2, _mm512_loadu_ps(lse2 + r));
        const __m512 p = _mm512_maskz_mov_ps(seen, exp2_lanes(t));
        const __m512 diff = _mm512_sub_ps(_mm512_loadu_ps(dp + at), _mm512_loadu_ps(delta + r));
        const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(p, diff), scale);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(pt + at), (__m256i)_mm512_cvtneps_pbh(p));
        grads[e] = (__m256i)_mm512_cvtneps_pbh(ds);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at), grads[e]);
      }
      // Word (c / 2, r) of the pairs layout: (dS^T[c][r], dS^T[c + 1][r]).
      _mm512_storeu_si512(dsp + c * kQueries + 2 * r, interleave_rows(grads[0], grads[1]));
    }
  }
}

// One work item: keys [j0, j0 + kKeys) of head bh against every query that sees them. dK and dV
// are complete at the end and written out; dQ^T of the head gains this block's share.
template <Bf16Path kPath>
ATTN_BF16_ISA void key_block(const Grads<bf16>& g, int64_t bh, int64_t j0, Bf16Scratch& w) {
  const int64_t d = g.d, cols = std::min(kKeys, g.seq_k - j0);
  const bf16* k = g.k + (bh * g.seq_k + j0) * d;
  const bf16* v = g.v + (bh * g.seq_k + j0) * d;
  if (cols < kKeys) {  // a short last block: its keys, then zeros, so products read kKeys rows
    auto padded = [&](const bf16* x, bf16* pad) {
      std::copy(x, x + cols * d, pad);
      std::fill(pad + cols * d, pad + kKeys * d, bf16(0.f));
      return pad;
    };
    k = padded(k, w.kpad.get()), v = padded(v, w.vpad.get());
  }
  bf16* kt = w.kt.get();  // K_j^T, [d, kKeys]: A of dQ^T's product
  for (int64_t c = 0; c < d; ++c)
    for (int64_t j = 0; j < kKeys; ++j) kt[c * kKeys + j] = k[j * d + c];
  float *dk = w.dk.get(), *dv = w.dv.get(), *s = w.s.get(), *dp = w.dp.get();
  // Causal: query i sees keys j <= i, so queries before j0 see none of this block.
  const int64_t i_begin = g.causal ? j0 : 0;
  for (int64_t i0 = i_begin; i0 < g.seq_q; i0 += kQueries) {
    const int64_t rows = std::min(kQueries, g.seq_q - i0);
    // S^T = K_j @ Q_i^T and dP^T = V_j @ dO_i^T: [kKeys, d] x [d, kQueries].
    gemm<kPath>(kKeys, kQueries, d, k, d, w.qt.get() + 2 * i0, g.ld_q, s, kQueries, false);
    gemm<kPath>(kKeys, kQueries, d, v, d, w.dot.get() + 2 * i0, g.ld_q, dp, kQueries, false);
    score_grads(g, w, i0, rows, j0, cols);
    const bool more = i0 > i_begin;  // the first tile overwrites dK and dV
    // dV_j += P^T @ dO_i and dK_j += dS^T @ Q_i: [kKeys, kQueries] x [kQueries, d].
    gemm<kPath>(kKeys, d, kQueries, w.pt.get(), kQueries, w.dop.get() + i0 * d, d, dv, d,
                more);
    gemm<kPath>(kKeys, d, kQueries, w.dst.get(), kQueries, w.qp.get() + i0 * d, d, dk, d,
                more);
    // dQ_i^T += K_j^T @ dS^T: [d, kKeys] x [kKeys, kQueries].
    gemm<kPath>(d, kQueries, kKeys, kt, kKeys, w.dsp.get(), kQueries, w.dqt.get() + i0, g.ld_q,
                true);
  }
  bf16* dk_out = g.dk + (bh * g.seq_k + j0) * d;
  bf16* dv_out = g.dv + (bh * g.seq_k + j0) * d;
  const bool seen = i_begin < g.seq_q;  // else no query sees these keys: zero gradients
  for (int64_t x = 0; x < cols * d; x += 16) {
    const __m512 kx = seen ? _mm512_loadu_ps(dk + x) : _mm512_setzero_ps();
    const __m512 vx = seen ? _mm512_loadu_ps(dv + x) : _mm512_setzero_ps();
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dk_out + x), (__m256i)_mm512_cvtneps_pbh(kx));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dv_out + x), (__m256i)_mm512_cvtneps_pbh(vx));
  }
}

// One thread's share of the work, for backward::over_key_blocks.
template <Bf16Path kPath>
struct Bf16Worker {
  explicit Bf16Worker(const Grads<bf16>& grads) : g(grads), w(grads) {}
  // AMX keeps its tile configuration per thread until released: the thread's last use ends here.
  ~Bf16Worker() {
    if constexpr (kPath == Bf16Path::kAmx) at::native::cpublas::brgemm_release();
  }
  void begin_head(int64_t bh) { attn::begin_head(g, bh, w); }
  void key_block(int64_t bh, int64_t j0) { attn::key_block<kPath>(g, bh, j0, w); }
  void end_head(int64_t bh, float* partial) { backward::write_dq(g, bh, w.dqt.get(), partial); }
  const Grads<bf16>& g;
  Bf16Scratch w;
};

}  // namespace
#endif  // ATTN_BF16_PRODUCTS

void run_bf16_backward(const Grads<bf16>& g, int64_t batch_heads, Bf16Path path) {
  TORCH_CHECK(bf16_path_offered(path) && path != Bf16Path::kFp32, "bf16 path ",
              bf16_path_name(path), " cannot run here");
  TORCH_CHECK(g.d % 16 == 0 && g.ld_q == bf16_backward_ld_q(g.seq_q),
              "bf16 backward products need head_dim % 16 == 0; got ", g.d);
#ifdef ATTN_BF16_PRODUCTS
  if (path == Bf16Path::kAmx) {
    backward::over_key_blocks<Bf16Worker<Bf16Path::kAmx>>(g, batch_heads);
  } else {
    backward::over_key_blocks<Bf16Worker<Bf16Path::kAvx512Bf16>>(g, batch_heads);
  }
#endif
}

}  // namespace attn
