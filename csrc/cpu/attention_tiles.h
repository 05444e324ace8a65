// What the CPU kernel's two paths share: tile sizes, the problem's pointers and strides, and
// cache-line-aligned scratch. fp32 products live in flash_attention_cpu.cpp, bf16 ones in
// bf16_products.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>

namespace attn::tiles {

constexpr int64_t kBlockQ = 128;   // query rows per tile
constexpr int64_t kBlockKV = 512;  // keys per tile
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504f;

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

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
  float* lse = nullptr;  // where asked: contiguous [batch, heads, seq_q], each row's m + log(l)
};

// The work item order of both paths: causal tiles lower down cost more, so they are visited as
// 0, n-1, 1, n-2, ..., which keeps the contiguous chunks at::parallel_for hands each thread about
// equally heavy.
inline int64_t tile_order(int64_t t, int64_t tiles, bool causal) {
  return causal ? (t % 2 == 0 ? t / 2 : tiles - 1 - t / 2) : t;
}

// Scratch buffers start on a cache line. AMX and AVX-512 read whole 64-byte lines: with buffers
// only 16-byte aligned, the bf16 tile products took about twice as long on our AMX CPU.
template <typename T>
using Buffer = std::unique_ptr<T[], decltype(&std::free)>;
template <typename T>
Buffer<T> buffer(int64_t n) {
  const size_t bytes = round_up(std::max<int64_t>(n, 1) * sizeof(T), 64);
  return Buffer<T>(static_cast<T*>(std::aligned_alloc(64, bytes)), &std::free);
}

}  // namespace attn::tiles
