// FlashAttention-style forward on the CPU: Q tiles x KV tiles, online softmax, fp32 accumulation.
//
// Work is split over (batch, head, Q tile) with at::parallel_for. Each thread owns its scratch: the
// score tile S, the output accumulator, the running max m and sum l per row, and K^T, of its head
// while that fits 4 MB, else of one KV tile. So scratch stays bounded however long the sequences.
// The two tile products go to BLAS (cpublas::brgemm, which calls MKL/oneDNN sgemm); the softmax in
// between uses GCC vector extensions, compiled for AVX-512, AVX2 and baseline x86-64 and picked at
// run time (target_clones), so the build needs no -march flag and runs on any x86-64 CPU.

#include "flash_attention_cpu.h"

#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

namespace attn {
namespace {

constexpr int64_t kBlockQ = 128;   // query rows per tile
constexpr int64_t kBlockKV = 512;  // keys per tile
// K^T of a whole head is packed once and reused by all of its Q tiles while it fits in this many
// floats (4 MB: 16K keys at head_dim 64). Longer heads are packed one KV tile at a time, again for
// every Q tile: d * cols copies beside the 4 * rows * cols * d flops of the tile's two GEMMs. On our
// CPU at head_dim 64, packing every head that way cost 5-15% at seq 2048, about 1% at seq_k 32K.
constexpr int64_t kMaxKeptKt = int64_t{1} << 20;
constexpr float kInf = std::numeric_limits<float>::infinity();

// One clone per x86-64 level, chosen by the loader from the CPU it runs on (GCC's ifunc dispatch).
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTN_MULTIVERSION
#endif

// Helpers are force-inlined so that they are compiled into each clone of the caller.
#define ATTN_INLINE inline __attribute__((always_inline))

// 16 floats: one AVX-512 register, two AVX2 ones or four SSE ones, whichever the clone has.
// (GCC warns that passing them by value is ABI-dependent; they never cross a non-inlined call.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

ATTN_INLINE f32x16 load(const float* p) {
  f32x16 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
ATTN_INLINE void store(float* p, f32x16 x) { std::memcpy(p, &x, sizeof x); }
ATTN_INLINE f32x16 splat(float x) { return f32x16{} + x; }
ATTN_INLINE float hmax(f32x16 x) {
  float r = x[0];
  for (int i = 1; i < kLanes; ++i) r = std::max(r, x[i]);
  return r;
}
ATTN_INLINE float hsum(f32x16 x) {
  float r = 0.f;
  for (int i = 0; i < kLanes; ++i) r += x[i];
  return r;
}

// exp(x) for 16 lanes: x = n*ln2 + r with |r| <= ln2/2; exp(r) by its degree-6 Taylor polynomial
// (relative error about 2e-7), times 2^n made from exponent bits.
ATTN_INLINE f32x16 exp16(f32x16 x) {
  const f32x16 lo = splat(-87.0f);  // exp underflows below this; keeps 2^n a normal float
  x = x < lo ? lo : x;
  const f32x16 shifter = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const f32x16 n = (x * 1.44269504f + shifter) - shifter;
  const f32x16 r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts, for accuracy
  f32x16 p = splat(1.0f / 720);
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const i32x16 two_n = (__builtin_convertvector(n, i32x16) + 127) << 23;
  return p * (f32x16)two_n;  // same-size vector cast: reinterprets the bits
}

// C[m, n] = A[m, k] @ B[k, n] (+ C when accumulate); row-major, with leading dimensions.
ATTN_INLINE void gemm(
    int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
    float* c, int64_t ldc, bool accumulate) {
#ifdef CPUBLAS_BRGEMM_F32F32F32
  at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, /*is_vnni=*/false);
#else  // torch without the fp32 brgemm: plain loops, correct but slower
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (!accumulate) std::fill(ci, ci + n, 0.f);
    for (int64_t p = 0; p < k; ++p) {
      const float aip = a[i * lda + p];
      const float* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
#endif
}

// Pointers and strides of one call. Rows (the head_dim axis) have unit stride.
struct Problem {
  const float *q, *k, *v;
  float* out;  // contiguous [batch, heads, seq_q, head_dim]
  int64_t heads, seq_q, seq_k, head_dim;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss;  // batch, head, seq strides
  float scale;
  bool causal;
  bool keep_kt;  // K^T of a whole head fits kMaxKeptKt: packed once per head, not per tile
};

// One thread's working memory, allocated once per call (never inside the loops); at most about
// 5 MB (4 MB of K^T), whatever the sequence lengths.
struct Scratch {
  Scratch(int64_t head_dim, int64_t kt_keys)
      : kt(new float[head_dim * kt_keys]),
        s(new float[kBlockQ * kBlockKV]),
        acc(new float[kBlockQ * head_dim]),
        m(new float[kBlockQ]),
        l(new float[kBlockQ]) {}
  std::unique_ptr<float[]> kt, s, acc, m, l;
  int64_t kt_head = -1;  // which (batch, head) kt holds, when it holds whole heads
};

// K^T of `cols` keys, [d, cols] with leading dimension ld_kt, so that S = Q @ K^T is a plain
// row-major GEMM. Blocked for cache reuse.
ATTN_INLINE void pack_kt(
    const float* k, int64_t ld_k, int64_t cols, int64_t d, float* kt, int64_t ld_kt) {
  constexpr int64_t kBlock = 32;
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    const int64_t j1 = std::min(j0 + kBlock, cols);
    for (int64_t c = 0; c < d; ++c)
      for (int64_t j = j0; j < j1; ++j) kt[c * ld_kt + j] = k[j * ld_k + c];
  }
}

// --8<-- [start:core]
// One row of the score tile: s[0, visible) are the scores this row may see, s[visible, cols) are
// future keys (causal). Updates the row's running max m and sum l, overwrites s with
// p = exp(scale * s - m_new) (0 where hidden) and returns alpha = exp(m_old - m_new), the factor
// by which what the row accumulated so far must shrink.
ATTN_INLINE float online_softmax_row(
    float* s, int64_t cols, int64_t visible, float scale, float& m, float& l) {
  if (visible <= 0) {  // the whole tile is in this row's future
    std::fill(s, s + cols, 0.f);
    return 1.f;
  }
  // Pass 1: the row's max, 16 lanes at a time, then the tail one by one.
  const int64_t vec_end = visible - visible % kLanes;
  f32x16 vmax = splat(-kInf);
  for (int64_t j = 0; j < vec_end; j += kLanes) {
    const f32x16 x = load(s + j) * scale;
    vmax = x > vmax ? x : vmax;
  }
  float row_max = hmax(vmax);
  for (int64_t j = vec_end; j < visible; ++j) row_max = std::max(row_max, s[j] * scale);
  const float m_new = std::max(m, row_max);

  // Pass 2: p = exp(scale * s - m_new) in place, and the row's sum of them. Subtracting the max
  // keeps exp <= 1, so nothing overflows.
  const f32x16 vm = splat(m_new);
  f32x16 vsum = splat(0.f);
  for (int64_t j = 0; j < vec_end; j += kLanes) {
    const f32x16 p = exp16(load(s + j) * scale - vm);
    vsum += p;
    store(s + j, p);
  }
  float row_sum = hsum(vsum);
  for (int64_t j = vec_end; j < visible; ++j) {
    s[j] = std::exp(s[j] * scale - m_new);
    row_sum += s[j];
  }
  std::fill(s + visible, s + cols, 0.f);  // hidden keys weigh nothing in P @ V

  const float alpha = std::exp(m - m_new);  // 0 on the first tile (m = -inf)
  m = m_new;
  l = l * alpha + row_sum;
  return alpha;
}

// One Q tile of one head: rows [i0, i0 + kBlockQ) of the output.
ATTN_MULTIVERSION void attend_tile(const Problem& p, int64_t bh, int64_t i0, Scratch& w) {
  const int64_t d = p.head_dim, b = bh / p.heads, h = bh % p.heads;
  const float* q = p.q + b * p.q_sb + h * p.q_sh + i0 * p.q_ss;
  const float* k = p.k + b * p.k_sb + h * p.k_sh;
  const float* v = p.v + b * p.v_sb + h * p.v_sh;
  float* out = p.out + (bh * p.seq_q + i0) * d;
  float *s = w.s.get(), *acc = w.acc.get(), *m = w.m.get(), *l = w.l.get();
  const int64_t rows = std::min(kBlockQ, p.seq_q - i0);
  // Causal: query i sees keys j <= i, so this tile needs no key past its last row; the KV tiles
  // entirely above the diagonal are never visited.
  const int64_t kv_end = p.causal ? std::min(p.seq_k, i0 + rows) : p.seq_k;
  std::fill(m, m + rows, -kInf);  // running max per row
  std::fill(l, l + rows, 0.f);    // running sum of exp per row

  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockKV) {
    const int64_t cols = std::min(kBlockKV, kv_end - j0);

    // S = Q_tile @ K_tile^T: [rows, d] x [d, cols]. K_tile^T is a slice of the head's K^T, packed
    // once per head by run(), or, for long heads, packed here.
    const float* kt = w.kt.get() + j0;
    int64_t ld_kt = p.seq_k;
    if (!p.keep_kt) {
      pack_kt(k + j0 * p.k_ss, p.k_ss, cols, d, w.kt.get(), cols);
      kt = w.kt.get(), ld_kt = cols;
    }
    gemm(rows, cols, d, q, p.q_ss, kt, ld_kt, s, cols, /*accumulate=*/false);

    for (int64_t r = 0; r < rows; ++r) {
      // Keys this row may see in the tile: all of them, or those up to its own position.
      const int64_t visible = p.causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
      // S row -> P row = exp(scale * S - new max), and the running max and sum updated.
      const float alpha = online_softmax_row(s + r * cols, cols, visible, p.scale, m[r], l[r]);
      // A larger max means what was accumulated so far is too big by alpha: rescale it now.
      if (j0 > 0 && alpha != 1.f) {
        float* acc_row = acc + r * d;
        for (int64_t c = 0; c < d; ++c) acc_row[c] *= alpha;
      }
    }

    // acc += P @ V_tile: [rows, cols] x [cols, d]; the first KV tile overwrites acc.
    gemm(rows, d, cols, s, cols, v + j0 * p.v_ss, p.v_ss, acc, d, /*accumulate=*/j0 > 0);
  }

  // Softmax denominator, applied once at the end instead of on every tile.
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.f / l[r];
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = acc[r * d + c] * inv;
  }
}
// --8<-- [end:core]

void run(const Problem& p, int64_t batch_heads) {
  const int64_t tiles = (p.seq_q + kBlockQ - 1) / kBlockQ;
  at::parallel_for(0, batch_heads * tiles, 1, [&](int64_t begin, int64_t end) {
    Scratch w(p.head_dim, p.keep_kt ? p.seq_k : kBlockKV);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / tiles, t = item % tiles;
      // Causal tiles lower down cost more. Visiting them as 0, n-1, 1, n-2, ... keeps the
      // contiguous chunks at::parallel_for hands each thread about equally heavy.
      const int64_t tile = p.causal ? (t % 2 == 0 ? t / 2 : tiles - 1 - t / 2) : t;
      if (p.keep_kt && w.kt_head != bh) {
        const float* k = p.k + (bh / p.heads) * p.k_sb + (bh % p.heads) * p.k_sh;
        pack_kt(k, p.k_ss, p.seq_k, p.head_dim, w.kt.get(), p.seq_k);
        w.kt_head = bh;
      }
      attend_tile(p, bh, tile * kBlockQ, w);
    }
  });
}

// fp32 with unit-stride rows that BLAS can read: bf16 is widened once (the kernel accumulates in
// fp32 anyway); views such as transposes keep their strides, odd layouts are copied.
at::Tensor as_fp32_rows(const at::Tensor& t) {
  at::Tensor f = t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
  const bool rows_ok = (f.stride(3) == 1 || f.size(3) == 1) && f.stride(2) >= f.size(3);
  return rows_ok ? f : f.contiguous();
}

}  // namespace

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

  const at::Tensor qf = as_fp32_rows(q), kf = as_fp32_rows(k), vf = as_fp32_rows(v);
  // empty_cpu allocates without going through the dispatcher: the profiler shows our op alone.
  at::Tensor out(at::detail::empty_cpu({batch, heads, seq_q, d}, at::kFloat));
  if (out.numel() == 0) return out.to(q.scalar_type());

  const Problem p{
      qf.const_data_ptr<float>(), kf.const_data_ptr<float>(), vf.const_data_ptr<float>(),
      out.data_ptr<float>(), heads, seq_q, seq_k, d,
      qf.stride(0), qf.stride(1), qf.stride(2), kf.stride(0), kf.stride(1), kf.stride(2),
      vf.stride(0), vf.stride(1), vf.stride(2), static_cast<float>(scale), is_causal,
      /*keep_kt=*/seq_k * d <= kMaxKeptKt};
  run(p, batch * heads);
  return q.scalar_type() == at::kFloat ? out : out.to(q.scalar_type());
}

}  // namespace attn
