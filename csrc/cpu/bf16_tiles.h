// What the bf16 tile products of the forward (bf16_products.cpp) and the backward
// (bf16_backward.cpp) share: the pairs layout ("VNNI") both instructions read, its packing, the
// GEMM on AMX (cpublas::brgemm) or AVX512-BF16 (a micro-kernel of our own), and 2^x lane by lane.
// Everything is compiled for AVX-512 with BF16 by target attributes, and only called where
// bf16_path_offered says the CPU has it.
#pragma once

#include "bf16_products.h"

#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ATTN_BF16_PRODUCTS 1
#endif

#ifdef ATTN_BF16_PRODUCTS
namespace attn::bf16_tiles {

using bf16 = c10::BFloat16;

#define ATTN_BF16_ISA \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define ATTN_BF16_INLINE ATTN_BF16_ISA inline __attribute__((always_inline))

// 16 x 16 32-bit words, transposed in registers: x[r] lane c becomes x[c] lane r.
ATTN_BF16_INLINE void transpose16(__m512i x[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows: words interleaved
    t[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // quads of rows: pairs of words interleaved
    x[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    x[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    x[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    x[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {  // then 128-bit lanes: across quads, then across halves
    t[i] = _mm512_shuffle_i32x4(x[i], x[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(x[i], x[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(x[i + 8], x[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(x[i + 8], x[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    x[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    x[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    x[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

// x^T in pairs, B of a product with x^T in VNNI layout, [d / 2][padded][2]: the 32-bit word
// (i, n) = (x[n][2i], x[n][2i + 1]) at word i * ld_out + n, for n < padded (a multiple of 16);
// rows past `rows` are zeros. Blocks of 16 rows x 16 words, read as rows of x, written as rows of
// x^T. (K^T for S = Q @ K^T in the forward; Q^T and dO^T in the backward.)
inline ATTN_BF16_ISA void pack_transposed_pairs(const bf16* x, int64_t ld_x, int64_t rows,
                                                int64_t padded, int64_t d, bf16* out_pairs,
                                                int64_t ld_out) {
  auto* out = reinterpret_cast<uint32_t*>(out_pairs);
  for (int64_t n0 = 0; n0 < padded; n0 += 16) {
    for (int64_t i0 = 0; i0 < d / 2; i0 += 16) {
      const int64_t words = std::min<int64_t>(16, d / 2 - i0);
      const __mmask16 lanes = static_cast<__mmask16>((1u << words) - 1);
      __m512i x16[16];
      for (int r = 0; r < 16; ++r)
        x16[r] = n0 + r < rows ? _mm512_maskz_loadu_epi32(lanes, x + (n0 + r) * ld_x + 2 * i0)
                               : _mm512_setzero_si512();
      transpose16(x16);
      for (int64_t i = 0; i < words; ++i)
        _mm512_storeu_si512(out + (i0 + i) * ld_out + n0, x16[i]);
    }
  }
}

// Two rows of 16 bf16 as one row of 16 pairs: lane 2c the even row's column c, 2c + 1 the odd's.
ATTN_BF16_INLINE __m512i interleave_rows(__m256i even, __m256i odd) {
  alignas(64) int16_t order[32];  // index c is the even row's column c, 32 + c the odd row's
  for (int c = 0; c < 16; ++c) order[2 * c] = static_cast<int16_t>(c), order[2 * c + 1] = 32 + c;
  return _mm512_permutex2var_epi16(_mm512_castsi256_si512(even), _mm512_load_si512(order),
                                   _mm512_castsi256_si512(odd));
}

// x in pairs of rows, B of a product with x in VNNI layout, [padded / 2][d][2]: (x[2j][c],
// x[2j + 1][c]) at word j * d + c, for rows up to padded (even); rows past `rows` are zeros. 16
// columns of two rows at a time. (V for P @ V in the forward; Q and dO in the backward.)
inline ATTN_BF16_ISA void pack_row_pairs(const bf16* x, int64_t ld_x, int64_t rows,
                                         int64_t padded, int64_t d, bf16* out) {
  for (int64_t j = 0; j < padded; j += 2) {
    for (int64_t c = 0; c < d; c += 16) {
      const __m256i even = j < rows ? _mm256_loadu_si256((const __m256i*)(x + j * ld_x + c))
                                    : _mm256_setzero_si256();
      const __m256i odd = j + 1 < rows
                              ? _mm256_loadu_si256((const __m256i*)(x + (j + 1) * ld_x + c))
                              : _mm256_setzero_si256();
      _mm512_storeu_si512(out + j * d + 2 * c, interleave_rows(even, odd));
    }
  }
}

// C[R rows, 16 * CV columns] (+)= A @ B over `pairs` pairs of the inner dimension: A bf16
// row-major (lda), B in VNNI layout (ldb words per pair), C fp32 (ldc). R x CV accumulators, CV
// rows of B and one broadcast of A stay in zmm registers (at most 6 x 4 + 4 + 1 of 32).
template <int R, int CV>
ATTN_BF16_ISA void micro_kernel(int64_t pairs, const bf16* a, int64_t lda, const bf16* b,
                                int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[R][CV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t i = 0; i < pairs; ++i) {
    __m512bh bv[CV];
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v)
      bv[v] = (__m512bh)_mm512_loadu_si512(b + 2 * (i * ldb + 16 * v));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * i, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

using MicroKernel = void (*)(int64_t, const bf16*, int64_t, const bf16*, int64_t, float*, int64_t,
                             bool);
constexpr int kMicroRows = 6, kVectors = 4;  // the largest block: 6 rows x 64 columns

template <int R>
inline constexpr MicroKernel kByWidth[kVectors] = {&micro_kernel<R, 1>, &micro_kernel<R, 2>,
                                                   &micro_kernel<R, 3>, &micro_kernel<R, 4>};
inline constexpr const MicroKernel* kMicroKernels[kMicroRows] = {
    kByWidth<1>, kByWidth<2>, kByWidth<3>, kByWidth<4>, kByWidth<5>, kByWidth<6>};

// C[m, n] (+)= A[m, k] @ B[k, n] with AVX512-BF16: n a multiple of 16, k even.
inline ATTN_BF16_ISA void gemm_avx512_bf16(int64_t m, int64_t n, int64_t k, const bf16* a,
                                           int64_t lda, const bf16* b, int64_t ldb, float* c,
                                           int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += 16 * kVectors) {  // B's columns stay in L1 across A's rows
    const int64_t vectors = std::min<int64_t>(kVectors, (n - j) / 16);
    for (int64_t i = 0; i < m; i += kMicroRows) {
      const int64_t rows = std::min<int64_t>(kMicroRows, m - i);
      kMicroKernels[rows - 1][vectors - 1](k / 2, a + i * lda, lda, b + 2 * j, ldb,
                                           c + i * ldc + j, ldc, accumulate);
    }
  }
}

// C[m, n] (+)= A[m, k] @ B[k, n], B in VNNI layout with ldb words per pair of rows.
template <Bf16Path kPath>
ATTN_BF16_INLINE void gemm(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda,
                           const bf16* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if constexpr (kPath == Bf16Path::kAmx) {
    at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, /*is_vnni=*/true);
  } else {
    gemm_avx512_bf16(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  }
}

// 2^t for t <= 0, lane by lane: 2^n for n = round(t) from the exponent (vscalefps), times 2^f for
// the remainder |f| <= 1/2 by a degree-3 polynomial fitted to it (relative error 8e-5: P is then
// rounded to bf16, 2e-3). Adding 1.5 * 2^23 rounds t to an integer (two additions, where
// vrndscaleps would be two uops on one port); t is clamped at -125 so that no result is subnormal.
ATTN_BF16_INLINE __m512 exp2_lanes(__m512 t) {
  const __m512 round = _mm512_set1_ps(12582912.0f);
  t = _mm512_max_ps(t, _mm512_set1_ps(-125.f));
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(t, round), round);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(5.517166853e-02f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.426111400e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.932609677e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999280572e-01f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace attn::bf16_tiles
#endif  // ATTN_BF16_PRODUCTS
