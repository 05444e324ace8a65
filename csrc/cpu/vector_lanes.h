// What the CPU kernels' per-ISA copies share: float vectors one register wide (GCC vector
// extensions), their loads, stores and reductions, 2^x lane by lane, and the fp32 tile GEMM. Used
// by the forward (flash_attention_cpu.cpp) and the backward (flash_attention_backward_cpu.cpp);
// everything is force-inlined, so each ISA's copy of a caller compiles its own.
#pragma once

#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention_tiles.h"

namespace attn::lanes {

// x86-64 builds with GCC get one copy of the tile loop per vector ISA (see tile_kernel in each).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_X86_COPIES 1
#endif

// Helpers are force-inlined so that they are compiled into each ISA's copy of a tile loop.
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

// C[m, n] = A[m, k] @ B[k, n] (+ C when accumulate); fp32, row-major, with leading dimensions.
ATTN_INLINE void gemm(
    int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
    float* c, int64_t ldc, bool accumulate) {
  at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, /*is_vnni=*/false);
}

}  // namespace attn::lanes
