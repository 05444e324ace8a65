// FlashAttention-style forward on the CPU: Q tiles x KV tiles, online softmax, fp32 accumulation.
//
// Work is split over (batch, head, Q tile) with at::parallel_for. Each thread owns its scratch: the
// score tile S, the probabilities P, the output accumulator, the running max m and sum l per row,
// and the head's K^T (and, on AMX, its V) packed for the GEMMs while that fits 4 MB, else K^T of
// one KV tile. So scratch stays bounded however long the sequences. The two tile products go to
// ATen's CPU BLAS, cpublas::brgemm, with fp32 results; they multiply fp32, or bf16 on CPUs with
// AMX (see kVnni). The softmax in between uses GCC vector extensions, compiled once per x86-64
// vector ISA (AVX-512, AVX2, baseline); the copy that runs is the one for the ISA torch
// runs its own kernels with, so the build needs no -march flag and ATEN_CPU_CAPABILITY=avx2 moves
// both kernels.

#include "flash_attention_cpu.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

namespace attn {
namespace {

constexpr int64_t kBlockQ = 128;   // query rows per tile
constexpr int64_t kBlockKV = 512;  // keys per tile
// K^T of a whole head is packed once and reused by all of its Q tiles while it fits in this many
// elements (4 MB of fp32, 2 MB of bf16: 16K keys at head_dim 64). Longer heads are packed one KV
// tile at a time, again for every Q tile: d * cols copies beside the 4 * rows * cols * d flops of
// the tile's two GEMMs. On our CPU at head_dim 64, packing every head that way cost 5-15% at seq
// 2048, about 1% at seq_k 32K.
constexpr int64_t kMaxKeptKt = int64_t{1} << 20;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504f;

// x86-64 builds with GCC get one copy of the tile loop per vector ISA (see tile_kernel below).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_X86_COPIES 1
#endif

// Helpers are force-inlined so that they are compiled into each ISA's copy of the tile loop.
#define ATTN_INLINE inline __attribute__((always_inline))

// (GCC warns that passing vectors by value is ABI-dependent; they never cross a non-inlined call.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Vectors of 16, 8 and 4 floats: one register of AVX-512, AVX2 and SSE. Each ISA's copy of the
// tile loop uses its own width. A vector wider than the ISA's registers is split by GCC, and its
// compares and selects become scalar code: on AVX2, 16 lanes made the softmax about 3x slower.
typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
template <typename V>
constexpr int kLanes = sizeof(V) / sizeof(float);
template <typename V>
using IntsOf = decltype(V{} < V{});  // int32 lanes, as many as V has (what a compare yields)

template <typename V>
ATTN_INLINE V load(const float* p) {
  V x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <typename V>
ATTN_INLINE void store(float* p, V x) {
  std::memcpy(p, &x, sizeof x);
}
// bf16 keeps the top 16 bits of the float, rounded to nearest (ties away from zero, where
// c10::BFloat16 rounds them to even: the values stored here are probabilities, never NaN).
template <typename V>
ATTN_INLINE void store(c10::BFloat16* p, V x) {
  const IntsOf<V> top = ((IntsOf<V>)x + 0x8000) >> 16;  // same-size vector cast: the bits
  uint16_t halves[kLanes<V>];
  for (int i = 0; i < kLanes<V>; ++i) halves[i] = static_cast<uint16_t>(top[i]);
  std::memcpy(p, halves, sizeof halves);
}
template <typename V>
ATTN_INLINE V splat(float x) {
  return V{} + x;
}
template <typename V>
ATTN_INLINE float hmax(V x) {
  float r = x[0];
  for (int i = 1; i < kLanes<V>; ++i) r = std::max(r, x[i]);
  return r;
}
template <typename V>
ATTN_INLINE float hsum(V x) {
  float r = 0.f;
  for (int i = 0; i < kLanes<V>; ++i) r += x[i];
  return r;
}

// 2^t lane by lane, for t <= 0: t = n + f with n = round(t) and |f| <= 1/2; 2^f by a degree-5
// polynomial fitted to it on [-1/2, 1/2] (relative error 1e-7, 2e-7 in float arithmetic), times 2^n
// made from exponent bits. (exp(x) is 2^(x log2(e)): the softmax folds log2(e) into its scale.)
template <typename V>
ATTN_INLINE V exp2_lanes(V t) {
  const V lo = splat<V>(-125.f);  // 2^t underflows below this; keeps 2^n and 2^t normal floats
  t = t < lo ? lo : t;
  // Adding 1.5 * 2^23 rounds to an integer n and leaves n in the low bits of the sum's mantissa.
  const V shifted = t + 12582912.0f;
  const V f = t - (shifted - 12582912.0f);
  V p = splat<V>(1.32764725e-3f);
  p = p * f + 9.67554189e-3f;
  p = p * f + 5.55071309e-2f;
  p = p * f + 2.40221202e-1f;
  p = p * f + 6.93146944e-1f;
  p = p * f + 1.00000012f;
  // 2^n: n + 127 in the exponent bits (the sum's bits are those of 1.5 * 2^23, 0x4b400000, plus n).
  const IntsOf<V> two_n = ((IntsOf<V>)shifted - (0x4b400000 - 127)) << 23;
  return p * (V)two_n;
}

// C[m, n] = A[m, k] @ B[k, n] (+ C when accumulate); row-major, with leading dimensions; A and B
// are float or bf16, C is fp32 either way. vnni: B is in the layout cpublas::pack makes.
template <typename G>
ATTN_INLINE void gemm(
    int64_t m, int64_t n, int64_t k, const G* a, int64_t lda, const G* b, int64_t ldb, float* c,
    int64_t ldc, bool accumulate, bool vnni = false) {
  at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, vnni);
}

// The tile products multiply operands of type G, chosen per call from q's dtype T and the CPU:
//  - G = float (fp32, and bf16 on CPUs without AMX): K^T, [d, seq_k] row-major, packed by us
//    (once per head while it fits kMaxKeptKt, else per KV tile); the GEMM is oneDNN's fp32 brgemm.
//    bf16 inputs are widened on their way into scratch: K as it is packed, each Q tile and V tile
//    before their products. Without AMX, cpublas's bf16 GEMM is the BLAS's, which widens and
//    repacks both operands on every call: on an AMD EPYC (Zen 4), with AVX-512 or held to AVX2,
//    bf16 through it took 1.1-1.35x the time of fp32 through oneDNN.
//  - G = bf16 (bf16 on CPUs with AMX): K^T and V repacked by cpublas::pack, in blocks of 64
//    columns, into the layout AMX's bf16 dot products read (pairs of rows interleaved). oneDNN's
//    brgemm then runs on AMX tiles, as it does inside torch's own flash attention.
template <typename G>
constexpr bool kVnni = !std::is_same_v<G, float>;  // bf16 products: AMX's layout
template <typename T, typename G>
constexpr bool kWiden = !std::is_same_v<T, G>;  // bf16 inputs, fp32 products
constexpr int64_t kPackN = 64;  // columns per packed block (cpublas::pack takes at most 64)

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Leading dimension of a packed fp32 K^T of `cols` keys: the row length rounded up to a cache
// line, plus one line. The S GEMM reads K^T's 64 rows together; at a power-of-two seq_k their
// starts lie a multiple of 4 KB apart and fall into the same few L1 sets, which evict each other.
// On an AMD EPYC (Zen 4) run with AVX2, the unpadded stride made custom_cpu about 20% slower.
int64_t kt_stride(int64_t cols) {
  constexpr int64_t line = 64 / sizeof(float);
  return round_up(cols, line) + line;
}

// Pointers and strides of one call, for q, k, v and out of element type T (float or bf16). Rows
// (the head_dim axis) have unit stride.
template <typename T>
struct Problem {
  const T *q, *k, *v;
  T* out;  // contiguous [batch, heads, seq_q, head_dim]
  int64_t heads, seq_q, seq_k, head_dim;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss;  // batch, head, seq strides
  float scale;
  bool causal;
  bool keep_kt;  // K^T of a whole head fits kMaxKeptKt: packed once per head, not per tile
  int64_t ld_kt = 0;  // fp32 K^T: kt_stride of the head (keep_kt) or of one KV tile
};

// Scratch buffers start on a cache line. AMX and AVX-512 read whole 64-byte lines: with buffers
// only 16-byte aligned, the bf16 tile products took about twice as long on our AMX CPU.
template <typename T>
using Buffer = std::unique_ptr<T[], decltype(&std::free)>;
template <typename T>
Buffer<T> buffer(int64_t n) {
  const size_t bytes = round_up(std::max<int64_t>(n, 1) * sizeof(T), 64);
  return Buffer<T>(static_cast<T*>(std::aligned_alloc(64, bytes)), &std::free);
}

// One thread's working memory for inputs of type T and products in G, allocated once per call
// (never inside the loops); at most about 5 MB (K^T, or K^T and V packed for AMX), whatever the
// sequence lengths. S has rows of kBlockKV floats; P is S itself, or for AMX the same in bf16.
template <typename T, typename G>
struct Scratch {
  explicit Scratch(const Problem<T>& p)
      : kt(buffer<G>(kVnni<G> ? round_up(p.seq_k, kPackN) * p.head_dim : p.head_dim * p.ld_kt)),
        v(buffer<G>(kVnni<G> ? round_up(p.seq_k, 2) * p.head_dim
                             : (kWiden<T, G> ? kBlockKV * p.head_dim : 0))),
        q(buffer<G>(kWiden<T, G> ? kBlockQ * p.head_dim : 0)),
        buf(buffer<G>(kVnni<G> ? kBlockKV * kPackN : 0)),
        s(buffer<float>(kBlockQ * kBlockKV)),
        p(buffer<G>(kVnni<G> ? kBlockQ * kBlockKV : 0)),
        acc(buffer<float>(kBlockQ * p.head_dim)),
        m(buffer<float>(kBlockQ)),
        l(buffer<float>(kBlockQ)) {}
  Buffer<G> kt;  // K^T
  Buffer<G> v;   // AMX: the head's V packed; widening: one V tile in fp32
  Buffer<G> q;   // widening: the Q tile in fp32
  Buffer<G> buf;  // AMX: blocks on their way into kt and v
  Buffer<float> s;
  Buffer<G> p;
  Buffer<float> acc, m, l;
  int64_t head = -1;  // which (batch, head) kt (and v) hold, when they hold whole heads

  G* probabilities() {
    if constexpr (kVnni<G>) {
      return p.get();
    } else {
      return s.get();
    }
  }
};

// K^T of `cols` keys, [d, cols] with leading dimension ld_kt, in the products' type G (so that
// S = Q @ K^T is a plain row-major GEMM); columns past `cols` up to `width` are zeros. Blocked for
// cache reuse.
template <typename T, typename G>
void pack_kt(const T* k, int64_t ld_k, int64_t cols, int64_t d, G* kt, int64_t ld_kt,
             int64_t width) {
  constexpr int64_t kBlock = 32;
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, cols);
    for (int64_t c = 0; c < d; ++c)
      for (int64_t j = j0; j < j1; ++j) kt[c * ld_kt + j] = static_cast<G>(k[j * ld_k + c]);
  }
  for (int64_t c = 0; c < d; ++c) std::fill(kt + c * ld_kt + cols, kt + c * ld_kt + width, G(0));
}

// `rows` rows of d bf16 values (leading dimension ld) as contiguous fp32 rows.
template <typename T>
void widen_rows(const T* x, int64_t ld, int64_t rows, int64_t d, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = static_cast<float>(x[r * ld + c]);
}

// One head's K and V for AMX's layout: K^T in blocks of 64 keys (keys [j, j + 64) at kt + j * d),
// V in blocks of 64 of head_dim's columns (columns [c, c + 64) at v + c * keys, keys being seq_k
// rounded up to even). Keys past seq_k are zeros.
template <typename T>
void pack_head_vnni(const Problem<T>& p, const T* k, const T* v, Scratch<T, T>& w) {
  const int64_t d = p.head_dim, keys = round_up(p.seq_k, 2);
  const auto bf16 = at::ScalarType::BFloat16;
  for (int64_t j0 = 0; j0 < p.seq_k; j0 += kPackN) {  // [d, 64] of K^T at a time
    const int64_t cols = std::min(kPackN, p.seq_k - j0);
    pack_kt(k + j0 * p.k_ss, p.k_ss, cols, d, w.buf.get(), kPackN, kPackN);
    at::native::cpublas::pack(
        d, kPackN, kPackN, kPackN, bf16, bf16, w.buf.get(), w.kt.get() + j0 * d);
  }
  for (int64_t c0 = 0; c0 < d; c0 += kPackN) {
    // [kBlockKV, 64] of V at a time; packed blocks of rows follow each other in the layout.
    for (int64_t j0 = 0; j0 < keys; j0 += kBlockKV) {
      const int64_t rows = std::min(kBlockKV, keys - j0);
      for (int64_t j = 0; j < rows; ++j) {
        T* row = w.buf.get() + j * kPackN;
        if (j0 + j < p.seq_k) std::copy_n(v + (j0 + j) * p.v_ss + c0, kPackN, row);
        else std::fill(row, row + kPackN, T(0));
      }
      at::native::cpublas::pack(rows, kPackN, kPackN, kPackN, bf16, bf16, w.buf.get(),
                                w.v.get() + c0 * keys + j0 * kPackN);
    }
  }
}

// S = Q_tile @ K^T of keys [j0, j0 + cols): [rows, d] x [d, cols], S with rows of kBlockKV floats.
// q: the tile's rows in G, leading dimension ld_q.
template <typename T, typename G>
ATTN_INLINE void tile_scores(const Problem<T>& p, Scratch<T, G>& w, const G* q, int64_t ld_q,
                             const T* k, int64_t rows, int64_t j0, int64_t cols, float* s) {
  const int64_t d = p.head_dim;
  if constexpr (kVnni<G>) {
    for (int64_t j = 0; j < cols; j += kPackN)  // S's rows have room for the last block's width
      gemm(rows, kPackN, d, q, ld_q, w.kt.get() + (j0 + j) * d, kPackN, s + j, kBlockKV, false,
           /*vnni=*/true);
  } else {
    const G* kt = w.kt.get() + j0;
    if (!p.keep_kt) {  // a long head: K^T of this tile only
      pack_kt(k + j0 * p.k_ss, p.k_ss, cols, d, w.kt.get(), p.ld_kt, cols);
      kt = w.kt.get();
    }
    gemm(rows, cols, d, q, ld_q, kt, p.ld_kt, s, kBlockKV, /*accumulate=*/false);
  }
}

// acc (+)= P @ V of keys [j0, j0 + cols): [rows, cols] x [cols, d]; the first KV tile (j0 == 0)
// overwrites acc. P has rows of kBlockKV, with a zero column past cols when cols is odd.
template <typename T, typename G>
ATTN_INLINE void tile_accumulate(const Problem<T>& p, Scratch<T, G>& w, const G* probs,
                                 const T* v, int64_t rows, int64_t j0, int64_t cols, float* acc) {
  const int64_t d = p.head_dim;
  if constexpr (kVnni<G>) {
    const int64_t keys = round_up(p.seq_k, 2), even_cols = round_up(cols, 2);
    for (int64_t c0 = 0; c0 < d; c0 += kPackN)
      gemm(rows, kPackN, even_cols, probs, kBlockKV, w.v.get() + c0 * keys + j0 * kPackN, kPackN,
           acc + c0, d, /*accumulate=*/j0 > 0, /*vnni=*/true);
  } else if constexpr (kWiden<T, G>) {
    widen_rows(v + j0 * p.v_ss, p.v_ss, cols, d, w.v.get());
    gemm(rows, d, cols, probs, kBlockKV, w.v.get(), d, acc, d, /*accumulate=*/j0 > 0);
  } else {
    gemm(rows, d, cols, probs, kBlockKV, v + j0 * p.v_ss, p.v_ss, acc, d, /*accumulate=*/j0 > 0);
  }
}

// --8<-- [start:core]
// One row of the score tile: s[0, visible) are the scores this row may see, s[visible, cols) are
// future keys (causal). Updates the row's running max m and sum l, writes
// p = exp(scale * s - m_new) (0 where hidden; p may be s itself) and returns
// alpha = exp(m_old - m_new), the factor by which what the row accumulated so far must shrink.
// V: the vector type (one register) of this ISA's copy.
template <typename V, typename T>
ATTN_INLINE float online_softmax_row(
    const float* s, T* p, int64_t cols, int64_t visible, float scale, float& m, float& l) {
  constexpr int64_t W = kLanes<V>;
  if (visible <= 0) {  // the whole tile is in this row's future
    std::fill(p, p + cols, T(0));
    return 1.f;
  }
  // Pass 1: the row's max, W lanes at a time, then the tail one by one.
  const int64_t vec_end = visible - visible % W;
  V vmax = splat<V>(-kInf);
  for (int64_t j = 0; j < vec_end; j += W) {
    const V x = load<V>(s + j) * scale;
    vmax = x > vmax ? x : vmax;
  }
  float row_max = hmax(vmax);
  for (int64_t j = vec_end; j < visible; ++j) row_max = std::max(row_max, s[j] * scale);
  const float m_new = std::max(m, row_max);

  // Pass 2: p = exp(scale * s - m_new) = 2^(scale log2(e) s - m_new log2(e)), and the row's sum
  // of them. Subtracting the max keeps exp <= 1, so nothing overflows.
  const float scale2 = scale * kLog2e, m2 = m_new * kLog2e;
  const V vm2 = splat<V>(m2);
  V vsum = splat<V>(0.f);
  for (int64_t j = 0; j < vec_end; j += W) {
    const V e = exp2_lanes(load<V>(s + j) * scale2 - vm2);
    vsum += e;
    store(p + j, e);
  }
  float row_sum = hsum(vsum);
  for (int64_t j = vec_end; j < visible; ++j) {
    const float e = std::exp2(s[j] * scale2 - m2);
    row_sum += e;
    p[j] = T(e);
  }
  std::fill(p + visible, p + cols, T(0));  // hidden keys weigh nothing in P @ V

  const float alpha = std::exp(m - m_new);  // 0 on the first tile (m = -inf)
  m = m_new;
  l = l * alpha + row_sum;
  return alpha;
}

// One Q tile of one head: rows [i0, i0 + kBlockQ) of the output, inputs in T, products in G.
template <typename V, typename T, typename G>
ATTN_INLINE void attend_tile(const Problem<T>& p, int64_t bh, int64_t i0, Scratch<T, G>& w) {
  const int64_t d = p.head_dim, b = bh / p.heads, h = bh % p.heads;
  const T* k = p.k + b * p.k_sb + h * p.k_sh;
  const T* v = p.v + b * p.v_sb + h * p.v_sh;
  T* out = p.out + (bh * p.seq_q + i0) * d;
  float *s = w.s.get(), *acc = w.acc.get(), *m = w.m.get(), *l = w.l.get();
  G* probs = w.probabilities();
  const int64_t rows = std::min(kBlockQ, p.seq_q - i0);
  // The tile's queries as the products read them: in place, or widened to fp32.
  const T* q_in = p.q + b * p.q_sb + h * p.q_sh + i0 * p.q_ss;
  const G* q;
  int64_t ld_q;
  if constexpr (kWiden<T, G>) {
    widen_rows(q_in, p.q_ss, rows, d, w.q.get());
    q = w.q.get();
    ld_q = d;
  } else {
    q = q_in;
    ld_q = p.q_ss;
  }
  // Causal: query i sees keys j <= i, so this tile needs no key past its last row; the KV tiles
  // entirely above the diagonal are never visited.
  const int64_t kv_end = p.causal ? std::min(p.seq_k, i0 + rows) : p.seq_k;
  std::fill(m, m + rows, -kInf);  // running max per row
  std::fill(l, l + rows, 0.f);    // running sum of exp per row

  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockKV) {
    const int64_t cols = std::min(kBlockKV, kv_end - j0);

    // S = Q_tile @ K_tile^T: [rows, d] x [d, cols], from the head's K^T packed by run() (for
    // long heads, the tile's K^T packed here).
    tile_scores(p, w, q, ld_q, k, rows, j0, cols, s);

    for (int64_t r = 0; r < rows; ++r) {
      // Keys this row may see in the tile: all of them, or those up to its own position.
      const int64_t visible = p.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
      // S row -> P row = exp(scale * S - new max), and the running max and sum updated. P is
      // written to an even width: a padding column of zeros where cols is odd.
      const float alpha = online_softmax_row<V>(s + r * kBlockKV, probs + r * kBlockKV,
                                                round_up(cols, 2), visible, p.scale, m[r], l[r]);
      // A larger max means what was accumulated so far is too big by alpha: rescale it now.
      if (j0 > 0 && alpha != 1.f) {
        float* acc_row = acc + r * d;
        for (int64_t c = 0; c < d; ++c) acc_row[c] *= alpha;
      }
    }

    // acc += P @ V_tile: [rows, cols] x [cols, d]; the first KV tile overwrites acc.
    tile_accumulate(p, w, probs, v, rows, j0, cols, acc);
  }

  // Softmax denominator, applied once at the end instead of on every tile.
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.f / l[r];
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = T(acc[r * d + c] * inv);
  }
}
// --8<-- [end:core]

template <typename T, typename G>
using TileKernel = void (*)(const Problem<T>&, int64_t, int64_t, Scratch<T, G>&);

// The tile loop compiled for one vector ISA, with vectors one register wide. The helpers it calls
// are force-inlined, so they are compiled for that ISA too.
#define ATTN_TILE_FOR(name, isa, vector)                                              \
  template <typename T, typename G>                                                   \
  __attribute__((target(isa))) void name(const Problem<T>& p, int64_t bh, int64_t i0, \
                                         Scratch<T, G>& w) {                          \
    attend_tile<vector>(p, bh, i0, w);                                                \
  }
ATTN_TILE_FOR(attend_tile_baseline, "default", f32x4)
#ifdef ATTN_X86_COPIES
ATTN_TILE_FOR(attend_tile_avx2, "avx2,fma", f32x8)
ATTN_TILE_FOR(attend_tile_avx512, "avx2,fma,avx512f,avx512bw,avx512dq,avx512vl", f32x16)
#endif

// The vector ISA torch runs its own CPU kernels with ("AVX512", "AVX2" or "DEFAULT" on x86-64),
// decided once per process from the CPU and ATEN_CPU_CAPABILITY (which can only lower it).
const std::string& torch_isa() {
  static const std::string isa = at::get_cpu_capability();
  return isa;
}

template <typename T, typename G>
TileKernel<T, G> tile_kernel() {
#ifdef ATTN_X86_COPIES
  if (torch_isa() == "AVX512") return &attend_tile_avx512<T, G>;
  if (torch_isa() == "AVX2") return &attend_tile_avx2<T, G>;
#endif
  return &attend_tile_baseline<T, G>;
}

// Inputs in T, tile products in G (see kVnni and kWiden).
template <typename T, typename G>
void run(const Problem<T>& p, int64_t batch_heads) {
  const int64_t tiles = (p.seq_q + kBlockQ - 1) / kBlockQ;
  const TileKernel<T, G> attend = tile_kernel<T, G>();
  at::parallel_for(0, batch_heads * tiles, 1, [&](int64_t begin, int64_t end) {
    Scratch<T, G> w(p);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / tiles, t = item % tiles;
      // Causal tiles lower down cost more. Visiting them as 0, n-1, 1, n-2, ... keeps the
      // contiguous chunks at::parallel_for hands each thread about equally heavy.
      const int64_t tile = p.causal ? (t % 2 == 0 ? t / 2 : tiles - 1 - t / 2) : t;
      if (p.keep_kt && w.head != bh) {  // a new head: its K^T (and V) packed once for its tiles
        const int64_t b = bh / p.heads, h = bh % p.heads;
        const T* k = p.k + b * p.k_sb + h * p.k_sh;
        if constexpr (kVnni<G>) {
          pack_head_vnni(p, k, p.v + b * p.v_sb + h * p.v_sh, w);
        } else {
          pack_kt(k, p.k_ss, p.seq_k, p.head_dim, w.kt.get(), p.ld_kt, p.seq_k);
        }
        w.head = bh;
      }
      attend(p, bh, tile * kBlockQ, w);
    }
    // AMX keeps its tile configuration per thread until released.
    if constexpr (kVnni<G>) at::native::cpublas::brgemm_release();
  });
}

// Unit-stride rows that BLAS can read: views such as transposes keep their strides, odd layouts
// are copied.
at::Tensor with_unit_rows(const at::Tensor& t) {
  const bool rows_ok = (t.stride(3) == 1 || t.size(3) == 1) && t.stride(2) >= t.size(3);
  return rows_ok ? t : t.contiguous();
}

template <typename T>
void forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
             bool is_causal, double scale) {
  const int64_t seq_k = k.size(2), d = q.size(3);
  Problem<T> p{
      q.const_data_ptr<T>(), k.const_data_ptr<T>(), v.const_data_ptr<T>(), out.data_ptr<T>(),
      q.size(1), q.size(2), seq_k, d,
      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
      v.stride(0), v.stride(1), v.stride(2), static_cast<float>(scale), is_causal,
      /*keep_kt=*/seq_k * d <= kMaxKeptKt};
  const int64_t batch_heads = q.size(0) * q.size(1);
  // bf16 products on AMX where cpublas can pack for it, on heads whose packed K and V are kept
  // whole; fp32 products everywhere else.
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (d % kPackN == 0 && p.keep_kt && at::native::cpublas::could_pack(at::kBFloat16)) {
      run<T, T>(p, batch_heads);
      return;
    }
  }
  p.ld_kt = kt_stride(p.keep_kt ? seq_k : kBlockKV);
  run<T, float>(p, batch_heads);
}

}  // namespace

std::string cpu_isa() {
#ifdef ATTN_X86_COPIES
  if (torch_isa() == "AVX512" || torch_isa() == "AVX2") return torch_isa();
#endif
  return "DEFAULT";
}

at::Tensor flash_attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale) {
  TORCH_CHECK_VALUE(
      q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
      "q, k, v must be [batch, heads, seq, head_dim]; got ", q.sizes(), ", ", k.sizes(), ", ",
      v.sizes());
  TORCH_CHECK_VALUE(
      q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu(),
      "attn::flash_attention_forward (CPU) needs CPU tensors; got ", q.device(), ", ", k.device(),
      ", ", v.device());
  TORCH_CHECK_VALUE(
      q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
      "dtypes differ: ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK_VALUE(
      q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16,
      "dtype ", q.scalar_type(), " is not supported; use float32 or bfloat16");
  const int64_t batch = q.size(0), heads = q.size(1), seq_q = q.size(2), d = q.size(3);
  const int64_t seq_k = k.size(2);
  TORCH_CHECK_VALUE(
      k.size(0) == batch && v.size(0) == batch && k.size(1) == heads && v.size(1) == heads &&
          k.size(3) == d && v.size(3) == d && v.size(2) == seq_k,
      "shapes do not fit: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK_VALUE(
      d >= 1 && d <= kMaxHeadDim, "head_dim ", d, " is not supported; use 1 to ", kMaxHeadDim);
  TORCH_CHECK_VALUE(seq_k >= 1, "k and v need at least one key; got seq_k ", seq_k);

  // empty_cpu allocates without going through the dispatcher: the profiler shows our op alone.
  at::Tensor out(at::detail::empty_cpu({batch, heads, seq_q, d}, q.scalar_type()));
  if (out.numel() == 0) return out;
  const at::Tensor qr = with_unit_rows(q), kr = with_unit_rows(k), vr = with_unit_rows(v);
  if (q.scalar_type() == at::kFloat) {
    forward<float>(qr, kr, vr, out, is_causal, scale);
  } else {
    forward<c10::BFloat16>(qr, kr, vr, out, is_causal, scale);
  }
  return out;
}

}  // namespace attn
