// bf16 tile products on the CPU's bf16 instructions. Both products of a tile take bf16 operands
// and accumulate in fp32:
//  - AMX: tdpbf16ps on 16 x 16 tiles, through ATen's cpublas::brgemm (oneDNN's brgemm, as torch's
//    own flash attention uses it);
//  - AVX512-BF16: vdpbf16ps, in a small micro-kernel of our own (bf16_tiles.h; where there is no
//    AMX, cpublas's bf16 GEMM is the BLAS's, which converts and repacks both operands on every
//    call).
// Both read K^T and V packed once per head in the layout both instructions want, pairs of rows
// interleaved ("VNNI"), so one packing serves both. The softmax between the products is AVX-512:
// 2^x from an exponent (vscalefps) and a polynomial, P converted to bf16 by vcvtne2ps2bf16, 16
// rows at a time.
//
// Everything here is compiled for AVX-512 with BF16 by target attributes; which path runs is
// decided at run time (see bf16_path_offered), so the build needs no -march flag.

#include "bf16_products.h"

#include "bf16_tiles.h"
#include "cpu_features.h"

#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace attn {

using tiles::kBlockKV;
using tiles::kBlockQ;
using tiles::Problem;
using tiles::round_up;
using bf16 = c10::BFloat16;

const char* bf16_path_name(Bf16Path path) {
  switch (path) {
    case Bf16Path::kAmx: return "amx";
    case Bf16Path::kAvx512Bf16: return "avx512_bf16";
    case Bf16Path::kFp32: return "fp32";
  }
  return "fp32";
}

bool bf16_path_offered(Bf16Path path) {
#ifdef ATTN_BF16_PRODUCTS
  // The softmax is AVX-512: a process that torch keeps below AVX-512 (ATEN_CPU_CAPABILITY) stays
  // there, with fp32 products.
  const bool avx512_bf16 = torch_isa() == "AVX512" && cpu_has_avx512_bf16();
  switch (path) {
    case Bf16Path::kAmx:  // and torch's brgemm runs bf16 on AMX (ONEDNN_MAX_CPU_ISA can stop it)
      return avx512_bf16 && cpu_has_amx_bf16() && at::native::cpublas::could_pack(at::kBFloat16);
    case Bf16Path::kAvx512Bf16: return avx512_bf16;
    case Bf16Path::kFp32: return true;
  }
#endif
  return path == Bf16Path::kFp32;
}

#ifdef ATTN_BF16_PRODUCTS
namespace {

using namespace bf16_tiles;

// Keys are packed, and products run, in blocks of this many: partial tiles are padded to it, so
// brgemm JITs a few GEMM shapes instead of one per tile width.
constexpr int64_t kKeyBlock = 64;
// Scores are computed kStrip rows at a time and turned into probabilities at once: 16 rows of
// kBlockKV fp32 scores (32 KB) stay in L1 between the two. (Timed alone on our AMX CPU, oneDNN's
// brgemm wrote a whole 128 x 512 tile of scores, 256 KB, at about half the rate of 16-row strips.)
constexpr int64_t kStrip = 16;  // one lane per row in softmax_rows' vectors

// One thread's scratch: the head's K^T and V packed, a strip's scores S (fp32), a tile's
// probabilities P (bf16), the output accumulator, and per row the running max and sum and the
// factor of the last update. At most about 4 MB.
struct Scratch {
  explicit Scratch(const Problem<bf16>& p)
      : keys(round_up(p.seq_k, kKeyBlock)),
        // Packed K^T rows (one per pair of head_dim) are 4 * keys bytes apart: at a power-of-two
        // seq_k they would fall into the same few L1 sets, so each row gets one line more.
        ld_kt(keys + 16),
        kt(tiles::buffer<bf16>(p.head_dim * ld_kt)),
        v(tiles::buffer<bf16>(keys * p.head_dim)),
        s(tiles::buffer<float>(kStrip * kBlockKV)),
        probs(tiles::buffer<bf16>(kBlockQ * kBlockKV)),
        acc(tiles::buffer<float>(kBlockQ * p.head_dim)),
        m(tiles::buffer<float>(kBlockQ)),
        l(tiles::buffer<float>(kBlockQ)),
        alpha(tiles::buffer<float>(kBlockQ)) {}
  int64_t keys, ld_kt;  // keys padded to kKeyBlock; K^T's leading dimension, in pairs
  tiles::Buffer<bf16> kt, v;
  tiles::Buffer<float> s;
  tiles::Buffer<bf16> probs;
  tiles::Buffer<float> acc, m, l, alpha;
  int64_t head = -1;  // which (batch, head) kt and v hold
};


// Lane-wise max, min and sum, as functions of the target ISA (a lambda would not inherit it).
struct Max {
  ATTN_BF16_INLINE __m512 operator()(__m512 a, __m512 b) const { return _mm512_max_ps(a, b); }
};
struct Min {
  ATTN_BF16_INLINE __m512 operator()(__m512 a, __m512 b) const { return _mm512_min_ps(a, b); }
};
struct Add {
  ATTN_BF16_INLINE __m512 operator()(__m512 a, __m512 b) const { return _mm512_add_ps(a, b); }
};

// Lane r: x[r]'s 16 lanes combined by op (max, min or add), for 16 vectors at once: a tree of
// shuffles, about 3 instructions a row where a horizontal reduction per row takes 8 in a chain.
template <typename Op>
ATTN_BF16_INLINE __m512 reduce_rows(const __m512 x[16], Op op) {
  __m512 w[8], u[4], y[2];
  for (int i = 0; i < 8; ++i)  // 256-bit halves: w[i] = rows 2i, 2i + 1, 8 lanes each
    w[i] = op(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
              _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xee));
  for (int i = 0; i < 4; ++i)  // 128-bit blocks: u[i] = rows 4i .. 4i + 3, 4 lanes each
    u[i] = op(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
              _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xdd));
  for (int i = 0; i < 2; ++i)  // within blocks: block k of y[i] = rows 8i + k, 8i + 4 + k
    y[i] = op(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x88),
              _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xdd));
  // Lane 4k + q now holds row 4q + k: put row r in lane r.
  const __m512 z = op(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xdd));
  const __m512i order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, z);
}

// Lane by lane, the max (Pick = Max) or min (Min) of s[0, visible): its horizontal reduction is
// left to reduce_rows. For a negative scale the row's largest scale * s is scale times its min.
template <typename Pick>
ATTN_BF16_INLINE __m512 row_extreme(const float* s, int64_t visible, __m512 start) {
  const Pick pick;
  const int64_t full = visible - visible % 16;
  __m512 x0 = start, x1 = start;
  int64_t j = 0;
  for (; j + 32 <= full; j += 32) {  // two chains: compares in flight while loads arrive
    x0 = pick(x0, _mm512_loadu_ps(s + j));
    x1 = pick(x1, _mm512_loadu_ps(s + j + 16));
  }
  if (j < full) x0 = pick(x0, _mm512_loadu_ps(s + j));
  const auto tail = static_cast<__mmask16>((1u << (visible - full)) - 1);
  return pick(pick(x0, x1), _mm512_mask_loadu_ps(start, tail, s + full));
}

// p[from, width) = 0, from and width multiples of 16: vector stores, no call (and its spills).
ATTN_BF16_INLINE void zero_tail(bf16* p, int64_t from, int64_t width) {
  for (int64_t j = from; j < width; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + j), _mm256_setzero_si256());
}

// p[j] = 2^(s[j] * scale2 - m2) in bf16 for j < visible, zeros up to width; returns the sums of
// the values written, lane by lane.
ATTN_BF16_INLINE __m512 exp_row(const float* s, bf16* p, int64_t width, int64_t visible,
                                __m512 scale2, __m512 m2) {
  __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
  const int64_t full = visible - visible % 16;
  auto* out = reinterpret_cast<__m256i*>(p);
  int64_t j = 0;
  for (; j + 32 <= full; j += 32) {
    const __m512 e0 = exp2_lanes(_mm512_fmsub_ps(_mm512_loadu_ps(s + j), scale2, m2));
    const __m512 e1 = exp2_lanes(_mm512_fmsub_ps(_mm512_loadu_ps(s + j + 16), scale2, m2));
    sum0 = _mm512_add_ps(sum0, e0);
    sum1 = _mm512_add_ps(sum1, e1);
    // One conversion of 32 lanes, e0's in the low half: half the conversions and stores.
    _mm512_storeu_si512(p + j, (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
  }
  for (; j < visible; j += 16) {  // the last full vector, then the tail under a mask
    const __mmask16 lanes =
        visible - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (visible - j)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, s + j);
    const __m512 e = _mm512_maskz_mov_ps(lanes, exp2_lanes(_mm512_fmsub_ps(x, scale2, m2)));
    sum0 = _mm512_add_ps(sum0, e);
    _mm256_storeu_si256(out + j / 16, (__m256i)_mm512_cvtneps_pbh(e));  // zeros past visible
  }
  zero_tail(p, j, width);  // hidden keys and padding weigh nothing in P @ V
  return _mm512_add_ps(sum0, sum1);
}

// The online softmax of up to 16 rows of the score tile, as online_softmax_row in
// flash_attention_cpu.cpp does one row: row r's scores s + r * kBlockKV, of which the first
// visible[r] count, become p + r * kBlockKV = exp(scale * s - m_new) in bf16 (zeros past visible,
// up to width). m and l, the rows' running max and sum, are updated, and alpha[r] = exp(m_old -
// m_new) is what row r's accumulated output must be scaled by. The rows' maxima, sums and alphas
// are vectors of 16 lanes, one per row, rather than a scalar chain per row.
ATTN_BF16_INLINE void softmax_rows(const float* s, bf16* p, int64_t rows, int64_t width,
                                   const int64_t* visible, float scale, float* m, float* l,
                                   float* alpha) {
  const bool up = scale >= 0.f;
  const __m512 start = _mm512_set1_ps(up ? -tiles::kInf : tiles::kInf);
  __mmask16 live = 0;  // rows that exist and see at least one key
  __m512 part[16];
  for (int64_t r = 0; r < 16; ++r) {
    const bool seen = r < rows && visible[r] > 0;
    live |= static_cast<__mmask16>(seen ? 1u << r : 0u);
    const float* row = s + r * kBlockKV;
    part[r] = !seen ? start
              : up  ? row_extreme<Max>(row, visible[r], start)
                    : row_extreme<Min>(row, visible[r], start);
  }
  const __m512 extreme = up ? reduce_rows(part, Max()) : reduce_rows(part, Min());
  const auto in_strip = static_cast<__mmask16>((1u << rows) - 1);
  const __m512 m_old = _mm512_mask_loadu_ps(_mm512_set1_ps(-tiles::kInf), in_strip, m);
  const __m512 log2e = _mm512_set1_ps(tiles::kLog2e);
  // Rows that see nothing keep their max (and get alpha 1 below).
  const __m512 row_max = _mm512_mul_ps(extreme, _mm512_set1_ps(scale));
  const __m512 m_new = _mm512_mask_max_ps(m_old, live, m_old, row_max);
  const __m512 m2 = _mm512_mul_ps(m_new, log2e), scale2 = _mm512_set1_ps(scale * tiles::kLog2e);
  for (int64_t r = 0; r < rows; ++r) {
    if (visible[r] > 0) {
      const __m512 m2_row = _mm512_permutexvar_ps(_mm512_set1_epi32(static_cast<int>(r)), m2);
      part[r] = exp_row(s + r * kBlockKV, p + r * kBlockKV, width, visible[r], scale2, m2_row);
    } else {
      zero_tail(p + r * kBlockKV, 0, width);
      part[r] = _mm512_setzero_ps();
    }
  }
  for (int64_t r = rows; r < 16; ++r) part[r] = _mm512_setzero_ps();
  const __m512 sums = reduce_rows(part, Add());
  // exp(m_old - m_new): about 0 (2^-125) on a row's first keys, where m_old = -inf.
  const __m512 factor = _mm512_mask_mov_ps(
      _mm512_set1_ps(1.f), live, exp2_lanes(_mm512_mul_ps(_mm512_sub_ps(m_old, m_new), log2e)));
  const __m512 l_old = _mm512_maskz_loadu_ps(in_strip, l);
  _mm512_mask_storeu_ps(m, in_strip, m_new);
  _mm512_mask_storeu_ps(l, in_strip, _mm512_fmadd_ps(l_old, factor, sums));
  _mm512_mask_storeu_ps(alpha, in_strip, factor);
}

// x[0, d) *= factor, d a multiple of 16.
ATTN_BF16_INLINE void scale_row(float* x, int64_t d, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t c = 0; c < d; c += 16)
    _mm512_storeu_ps(x + c, _mm512_mul_ps(_mm512_loadu_ps(x + c), f));
}

// One Q tile of one head with bf16 products: rows [i0, i0 + kBlockQ) of the output.
template <Bf16Path kPath>
ATTN_BF16_ISA void attend_tile(const Problem<bf16>& p, int64_t bh, int64_t i0, Scratch& w) {
  const int64_t d = p.head_dim, b = bh / p.heads, h = bh % p.heads;
  const bf16* q = p.q + b * p.q_sb + h * p.q_sh + i0 * p.q_ss;  // read in place
  bf16* out = p.out + (bh * p.seq_q + i0) * d;
  float *s = w.s.get(), *acc = w.acc.get(), *m = w.m.get(), *l = w.l.get();
  float* alpha = w.alpha.get();
  bf16* probs = w.probs.get();
  const int64_t rows = std::min(kBlockQ, p.seq_q - i0);
  const int64_t kv_end = p.causal ? std::min(p.seq_k, i0 + rows) : p.seq_k;
  std::fill(m, m + rows, -tiles::kInf);
  std::fill(l, l + rows, 0.f);

  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockKV) {
    const int64_t cols = std::min(kBlockKV, kv_end - j0);
    const int64_t width = round_up(cols, kKeyBlock);  // within the packed keys, and S's rows
    // S = Q_tile @ K_tile^T, kStrip rows at a time: [strip, d] x [d, width], and each strip's
    // softmax at once, while its scores are still in L1; columns past cols are never read.
    for (int64_t r0 = 0; r0 < rows; r0 += kStrip) {
      const int64_t strip = std::min(kStrip, rows - r0);
      gemm<kPath>(strip, width, d, q + r0 * p.q_ss, p.q_ss, w.kt.get() + 2 * j0, w.ld_kt, s,
                  kBlockKV, false);
      int64_t visible[kStrip];
      for (int64_t r = 0; r < strip; ++r)  // keys row r0 + r may see in this tile
        visible[r] = p.causal ? std::clamp<int64_t>(i0 + r0 + r + 1 - j0, 0, cols) : cols;
      softmax_rows(s, probs + r0 * kBlockKV, strip, width, visible, p.scale, m + r0, l + r0,
                   alpha + r0);
    }
    if (j0 > 0) {  // a larger max means what was accumulated so far is too big by alpha
      for (int64_t r = 0; r < rows; ++r)
        if (alpha[r] != 1.f) scale_row(acc + r * d, d, alpha[r]);
    }
    // acc (+)= P @ V_tile: [rows, width] x [width, d]; the first KV tile overwrites acc.
    gemm<kPath>(rows, d, width, probs, kBlockKV, w.v.get() + j0 * d, d, acc, d, j0 > 0);
  }
  for (int64_t r = 0; r < rows; ++r) {  // softmax's denominator, once at the end
    const __m512 inv = _mm512_set1_ps(1.f / l[r]);
    for (int64_t c = 0; c < d; c += 16) {
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(acc + r * d + c), inv);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * d + c),
                          (__m256i)_mm512_cvtneps_pbh(x));
    }
  }
  if (p.lse != nullptr)  // the backward's statistic, as in flash_attention_cpu.cpp
    for (int64_t r = 0; r < rows; ++r) p.lse[bh * p.seq_q + i0 + r] = m[r] + std::log(l[r]);
}

// Items (a head's Q tiles, in tiles::tile_order) are handed out in chunks from a shared counter
// rather than in one contiguous run per thread: on a machine shared with other work, a thread
// that gets less of its core takes fewer chunks instead of holding the others up at the end.
// Chunks are whole heads where there are enough of them, so each head is packed by one thread.
int64_t chunk_size(int64_t items, int64_t tiles, int64_t threads) {
  const int64_t chunk = std::max<int64_t>(1, items / (4 * threads));
  return chunk >= tiles ? chunk / tiles * tiles : chunk;
}

template <Bf16Path kPath>
void run(const Problem<bf16>& p, int64_t batch_heads) {
  const int64_t tiles = (p.seq_q + kBlockQ - 1) / kBlockQ, items = batch_heads * tiles;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), items));
  const int64_t chunk = chunk_size(items, tiles, threads);
  std::atomic<int64_t> next{0};
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    Scratch w(p);
    for (int64_t begin; (begin = next.fetch_add(chunk)) < items;) {
      for (int64_t item = begin; item < std::min(begin + chunk, items); ++item) {
        const int64_t bh = item / tiles, tile = tiles::tile_order(item % tiles, tiles, p.causal);
        if (w.head != bh) {  // a new head: its K^T and V packed once for its tiles here
          const int64_t b = bh / p.heads, h = bh % p.heads;
          pack_transposed_pairs(p.k + b * p.k_sb + h * p.k_sh, p.k_ss, p.seq_k, w.keys,
                                p.head_dim, w.kt.get(), w.ld_kt);
          pack_row_pairs(p.v + b * p.v_sb + h * p.v_sh, p.v_ss, p.seq_k, w.keys, p.head_dim,
                         w.v.get());
          w.head = bh;
        }
        attend_tile<kPath>(p, bh, tile * kBlockQ, w);
      }
    }
    // AMX keeps its tile configuration per thread until released.
    if constexpr (kPath == Bf16Path::kAmx) at::native::cpublas::brgemm_release();
  });
}

}  // namespace
#endif  // ATTN_BF16_PRODUCTS

void run_bf16_products(const Problem<bf16>& p, int64_t batch_heads, Bf16Path path) {
  TORCH_CHECK(bf16_path_offered(path) && path != Bf16Path::kFp32, "bf16 path ",
              bf16_path_name(path), " cannot run here");
  TORCH_CHECK(p.head_dim % 16 == 0 && p.keep_kt, "bf16 products need head_dim % 16 == 0");
#ifdef ATTN_BF16_PRODUCTS
  if (path == Bf16Path::kAmx) {
    run<Bf16Path::kAmx>(p, batch_heads);
  } else {
    run<Bf16Path::kAvx512Bf16>(p, batch_heads);
  }
#endif
}

}  // namespace attn
