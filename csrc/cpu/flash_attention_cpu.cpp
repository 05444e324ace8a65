// FlashAttention-style forward on the CPU: Q tiles x KV tiles, online softmax, fp32 accumulation.
//
// Work is split over (batch, head, Q tile) with at::parallel_for. Each thread owns its scratch: the
// score tile S, the probabilities P, the output accumulator, the running max m and sum l per row,
// and the head's K^T packed for the GEMMs while that fits 4 MB, else K^T of one KV tile. So scratch
// stays bounded however long the sequences. This file multiplies tiles in fp32, through ATen's CPU
// BLAS, cpublas::brgemm (oneDNN's fp32 brgemm). bf16 inputs take the CPU's bf16 instructions where
// it has them, AMX tiles or AVX512-BF16 dot products (bf16_products.cpp; see choose_bf16_path),
// else they are widened to fp32 here. The softmax uses GCC vector extensions, compiled once per
// x86-64 vector ISA (AVX-512, AVX2, baseline); the copy that runs is the one for the ISA torch
// runs its own kernels with, so the build needs no -march flag and ATEN_CPU_CAPABILITY=avx2 moves
// both kernels.

#include "flash_attention_cpu.h"

#include "attention_tiles.h"
#include "bf16_products.h"
#include "cpu_features.h"
#include "vector_lanes.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace attn {
namespace {

using tiles::Buffer;
using tiles::buffer;
using tiles::kBlockKV;
using tiles::kBlockQ;
using tiles::kInf;
using tiles::kLog2e;
using tiles::Problem;
using tiles::round_up;
using namespace lanes;  // f32x16 and friends, exp2_lanes, gemm

// K^T of a whole head is packed once and reused by all of its Q tiles while it fits in this many
// elements (4 MB of fp32, 2 MB of bf16: 16K keys at head_dim 64). Longer heads are packed one KV
// tile at a time, again for every Q tile: d * cols copies beside the 4 * rows * cols * d flops of
// the tile's two GEMMs. On our CPU at head_dim 64, packing every head that way cost 5-15% at seq
// 2048, about 1% at seq_k 32K.
constexpr int64_t kMaxKeptKt = int64_t{1} << 20;

// The tile products here multiply fp32 operands (G = float): K^T, [d, seq_k] row-major, packed by
// us (once per head while it fits kMaxKeptKt, else per KV tile); the GEMM is oneDNN's fp32
// brgemm. bf16 inputs that take this path (a CPU without bf16 instructions, or a head_dim they do
// not fit) are widened on their way into scratch: K as it is packed, each Q tile and V tile before
// their products. cpublas's own bf16 GEMM is no better there: without AMX it is the BLAS's, which
// widens and repacks both operands on every call (on an AMD EPYC, Zen 4, 1.1-1.35x the time of
// fp32 through oneDNN).
template <typename T, typename G>
constexpr bool kWiden = !std::is_same_v<T, G>;  // bf16 inputs, fp32 products

// Leading dimension of a packed fp32 K^T of `cols` keys: the row length rounded up to a cache
// line, plus one line. The S GEMM reads K^T's 64 rows together; at a power-of-two seq_k their
// starts lie a multiple of 4 KB apart and fall into the same few L1 sets, which evict each other.
// On an AMD EPYC (Zen 4) run with AVX2, the unpadded stride made custom_cpu about 20% slower.
int64_t kt_stride(int64_t cols) {
  constexpr int64_t line = 64 / sizeof(float);
  return round_up(cols, line) + line;
}

// One thread's working memory for inputs of type T and products in G, allocated once per call
// (never inside the loops); at most about 5 MB (K^T), whatever the sequence lengths. S has rows of
// kBlockKV floats; P is S itself.
template <typename T, typename G>
struct Scratch {
  explicit Scratch(const Problem<T>& p)
      : kt(buffer<G>(p.head_dim * p.ld_kt)),
        v(buffer<G>(kWiden<T, G> ? kBlockKV * p.head_dim : 0)),
        q(buffer<G>(kWiden<T, G> ? kBlockQ * p.head_dim : 0)),
        s(buffer<float>(kBlockQ * kBlockKV)),
        acc(buffer<float>(kBlockQ * p.head_dim)),
        m(buffer<float>(kBlockQ)),
        l(buffer<float>(kBlockQ)) {}
  Buffer<G> kt;  // K^T
  Buffer<G> v;   // widening: one V tile in fp32
  Buffer<G> q;   // widening: the Q tile in fp32
  Buffer<float> s;
  Buffer<float> acc, m, l;
  int64_t head = -1;  // which (batch, head) kt holds, when it holds whole heads

  G* probabilities() { return s.get(); }
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

// S = Q_tile @ K^T of keys [j0, j0 + cols): [rows, d] x [d, cols], S with rows of kBlockKV floats.
// q: the tile's rows in G, leading dimension ld_q.
template <typename T, typename G>
ATTN_INLINE void tile_scores(const Problem<T>& p, Scratch<T, G>& w, const G* q, int64_t ld_q,
                             const T* k, int64_t rows, int64_t j0, int64_t cols, float* s) {
  const int64_t d = p.head_dim;
  const G* kt = w.kt.get() + j0;
  if (!p.keep_kt) {  // a long head: K^T of this tile only
    pack_kt(k + j0 * p.k_ss, p.k_ss, cols, d, w.kt.get(), p.ld_kt, cols);
    kt = w.kt.get();
  }
  gemm(rows, cols, d, q, ld_q, kt, p.ld_kt, s, kBlockKV, /*accumulate=*/false);
}

// acc (+)= P @ V of keys [j0, j0 + cols): [rows, cols] x [cols, d]; the first KV tile (j0 == 0)
// overwrites acc. P has rows of kBlockKV, with a zero column past cols when cols is odd.
template <typename T, typename G>
ATTN_INLINE void tile_accumulate(const Problem<T>& p, Scratch<T, G>& w, const G* probs,
                                 const T* v, int64_t rows, int64_t j0, int64_t cols, float* acc) {
  const int64_t d = p.head_dim;
  if constexpr (kWiden<T, G>) {
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

  // --8<-- [start:kv-loop]
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
  // --8<-- [end:kv-loop]

  // Softmax denominator, applied once at the end instead of on every tile.
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.f / l[r];
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = T(acc[r * d + c] * inv);
  }  // The backward's statistic: log(sum_j exp(scale * s_j)) = m + log(l), the row max having been
  // taken out of every exp.
  if (p.lse != nullptr)
    for (int64_t r = 0; r < rows; ++r) p.lse[bh * p.seq_q + i0 + r] = m[r] + std::log(l[r]);
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

template <typename T, typename G>
TileKernel<T, G> tile_kernel() {
#ifdef ATTN_X86_COPIES
  if (torch_isa() == "AVX512") return &attend_tile_avx512<T, G>;
  if (torch_isa() == "AVX2") return &attend_tile_avx2<T, G>;
#endif
  return &attend_tile_baseline<T, G>;
}

// Inputs in T, tile products in G (see kWiden).
template <typename T, typename G>
void run(const Problem<T>& p, int64_t batch_heads) {
  const int64_t tiles = (p.seq_q + kBlockQ - 1) / kBlockQ;
  const TileKernel<T, G> attend = tile_kernel<T, G>();
  at::parallel_for(0, batch_heads * tiles, 1, [&](int64_t begin, int64_t end) {
    Scratch<T, G> w(p);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / tiles, tile = tiles::tile_order(item % tiles, tiles, p.causal);
      if (p.keep_kt && w.head != bh) {  // a new head: its K^T packed once for its tiles
        const int64_t b = bh / p.heads, h = bh % p.heads;
        pack_kt(p.k + b * p.k_sb + h * p.k_sh, p.k_ss, p.seq_k, p.head_dim, w.kt.get(), p.ld_kt,
                p.seq_k);
        w.head = bh;
      }
      attend(p, bh, tile * kBlockQ, w);
    }
  });
}

// How bf16 inputs of this head_dim and seq_k are multiplied: on the CPU's bf16 instructions where
// it has them and the shape fits them (head_dim a multiple of 16, a head's packed K and V within
// scratch), AMX first; else in fp32.
Bf16Path choose_bf16_path(int64_t head_dim, int64_t seq_k) {
  return pick_bf16_path(head_dim % 16 == 0 && seq_k * head_dim <= kMaxKeptKt);
}

template <typename T>
void forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
             bool is_causal, double scale, float* lse) {
  const int64_t seq_k = k.size(2), d = q.size(3);
  Problem<T> p{
      q.const_data_ptr<T>(), k.const_data_ptr<T>(), v.const_data_ptr<T>(), out.data_ptr<T>(),
      q.size(1), q.size(2), seq_k, d,
      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
      v.stride(0), v.stride(1), v.stride(2), static_cast<float>(scale), is_causal,
      /*keep_kt=*/seq_k * d <= kMaxKeptKt};
  p.lse = lse;
  const int64_t batch_heads = q.size(0) * q.size(1);
  if constexpr (std::is_same_v<T, c10::BFloat16>) {  // on the CPU's bf16 instructions if it can
    if (const Bf16Path path = choose_bf16_path(d, seq_k); path != Bf16Path::kFp32) {
      run_bf16_products(p, batch_heads, path);
      return;
    }
  }
  p.ld_kt = kt_stride(p.keep_kt ? seq_k : kBlockKV);
  run<T, float>(p, batch_heads);
}

}  // namespace

Bf16Path pick_bf16_path(bool fits) {
  if (const char* forced = std::getenv("ATTN_CPU_BF16_PATH"); forced && *forced) {
    for (Bf16Path path : {Bf16Path::kAmx, Bf16Path::kAvx512Bf16, Bf16Path::kFp32}) {
      if (std::string(forced) != bf16_path_name(path)) continue;
      TORCH_CHECK_VALUE(bf16_path_offered(path), "ATTN_CPU_BF16_PATH=", forced,
                        ": this CPU offers ", c10::Join(", ", cpu_bf16_paths()));
      return fits ? path : Bf16Path::kFp32;
    }
    TORCH_CHECK_VALUE(false, "ATTN_CPU_BF16_PATH=", forced, " is none of amx, avx512_bf16, fp32");
  }
  for (Bf16Path path : {Bf16Path::kAmx, Bf16Path::kAvx512Bf16})
    if (fits && bf16_path_offered(path)) return path;
  return Bf16Path::kFp32;
}

std::vector<std::string> cpu_bf16_paths() {
  std::vector<std::string> paths;
  for (Bf16Path path : {Bf16Path::kAmx, Bf16Path::kAvx512Bf16, Bf16Path::kFp32})
    if (bf16_path_offered(path)) paths.push_back(bf16_path_name(path));
  return paths;
}

std::string cpu_bf16_path(int64_t head_dim, int64_t seq_k) {
  return bf16_path_name(choose_bf16_path(head_dim, seq_k));
}

std::string cpu_isa() {
#ifdef ATTN_X86_COPIES
  if (torch_isa() == "AVX512" || torch_isa() == "AVX2") return torch_isa();
#endif
  return "DEFAULT";
}

void check_qkv(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK_VALUE(
      q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
      "q, k, v must be [batch, heads, seq, head_dim]; got ", q.sizes(), ", ", k.sizes(), ", ",
      v.sizes());
  TORCH_CHECK_VALUE(
      q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu(),
      op, " (CPU) needs CPU tensors; got ", q.device(), ", ", k.device(), ", ", v.device());
  TORCH_CHECK_VALUE(
      q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
      "dtypes differ: ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK_VALUE(
      q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16,
      "dtype ", q.scalar_type(), " is not supported; use float32 or bfloat16");
  const int64_t batch = q.size(0), heads = q.size(1), d = q.size(3), seq_k = k.size(2);
  TORCH_CHECK_VALUE(
      k.size(0) == batch && v.size(0) == batch && k.size(1) == heads && v.size(1) == heads &&
          k.size(3) == d && v.size(3) == d && v.size(2) == seq_k,
      "shapes do not fit: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK_VALUE(
      d >= 1 && d <= kMaxHeadDim, "head_dim ", d, " is not supported; use 1 to ", kMaxHeadDim);
  TORCH_CHECK_VALUE(seq_k >= 1, "k and v need at least one key; got seq_k ", seq_k);
}

at::Tensor with_unit_rows(const at::Tensor& t) {
  const bool rows_ok = (t.stride(3) == 1 || t.size(3) == 1) && t.stride(2) >= t.size(3);
  return rows_ok ? t : t.contiguous();
}

namespace {

// The forward of both ops: the output, and where asked (lse defined) each row's log-sum-exp.
void checked_forward(const char* op, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v, bool is_causal, double scale, at::Tensor& out,
                     float* lse) {
  check_qkv(op, q, k, v);
  // empty_cpu allocates without going through the dispatcher: the profiler shows our op alone.
  out = at::detail::empty_cpu(q.sizes(), q.scalar_type());
  if (out.numel() == 0) return;
  const at::Tensor qr = with_unit_rows(q), kr = with_unit_rows(k), vr = with_unit_rows(v);
  if (q.scalar_type() == at::kFloat) {
    forward<float>(qr, kr, vr, out, is_causal, scale, lse);
  } else {
    forward<c10::BFloat16>(qr, kr, vr, out, is_causal, scale, lse);
  }
}

}  // namespace

at::Tensor flash_attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale) {
  at::Tensor out;
  checked_forward("attn::flash_attention_forward", q, k, v, is_causal, scale, out, nullptr);
  return out;
}

std::tuple<at::Tensor, at::Tensor> flash_attention_forward_lse_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale) {
  check_qkv("attn::flash_attention_forward_lse", q, k, v);
  at::Tensor lse(at::detail::empty_cpu({q.size(0), q.size(1), q.size(2)}, at::kFloat));
  at::Tensor out;
  checked_forward("attn::flash_attention_forward_lse", q, k, v, is_causal, scale, out,
                  lse.data_ptr<float>());
  return {out, lse};
}

}  // namespace attn
