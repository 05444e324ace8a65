// What the backward's two paths share: fp32 products (flash_attention_backward_cpu.cpp) and bf16
// ones (bf16_backward.cpp). Tile sizes, one call's tensors, scratch from torch's CPU allocator,
// and the threading over (batch, head, key block) items with its deterministic sum of dQ.
#pragma once

#include "attention_tiles.h"

#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace attn::backward {

constexpr int64_t kKeys = 64;  // keys per work item: its dK and dV accumulators, 2 x 16 KB at d 64
constexpr int64_t kRows = 64;  // queries per tile: S^T and dP^T of a tile, 2 x 16 KB
// Causal tiles start at the key block's first key, so they stay kRows-aligned.
static_assert(kKeys % kRows == 0);

// n elements of scratch from torch's CPU allocator (64-byte aligned), so that the profiler's
// memory view counts it.
template <typename E>
struct Scratchpad {
  explicit Scratchpad(int64_t n)
      : data(c10::GetCPUAllocator()->allocate(std::max<int64_t>(n, 1) * sizeof(E))) {}
  E* get() const { return static_cast<E*>(data.get()); }
  c10::DataPtr data;
};
using Floats = Scratchpad<float>;

// One call's tensors, all contiguous [batch, heads, seq, d] (lse: [batch, heads, seq_q]).
template <typename T>
struct Grads {
  const T *q, *k, *v, *out, *dout;
  const float* lse;
  T *dq, *dk, *dv;
  int64_t seq_q, seq_k, d;
  float scale;
  bool causal;
  int64_t ld_q;  // leading dimension of a head's dQ^T in fp32 scratch (and of its packed Q^T)
};

// A head's dQ^T [d, ld_q] (fp32), transposed back into rows: into grad_q (in T), or into a partial
// buffer [seq_q, d] (fp32) where other threads hold the rest of this head's key blocks.
template <typename T>
void write_dq(const Grads<T>& g, int64_t bh, const float* dqt, float* partial) {
  T* dq = g.dq + bh * g.seq_q * g.d;
  constexpr int64_t kBlock = 32;  // rows of dQ at a time, so each line of dQ^T read is used whole
  for (int64_t i0 = 0; i0 < g.seq_q; i0 += kBlock) {
    const int64_t i1 = std::min(i0 + kBlock, g.seq_q);
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t c = 0; c < g.d; ++c) {
        const float x = dqt[c * g.ld_q + i];
        if (partial != nullptr) {
          partial[i * g.d + c] = x;
        } else {
          dq[i * g.d + c] = T(x);
        }
      }
  }
}

// A head that two or more threads' runs of items share: which thread wrote which partial dQ.
struct Part {
  int64_t head, share;
};

// Threads share the (batch, head, key block) items, each thread a contiguous run of them, so a key
// block's dK and dV belong to one thread and need no atomics. Each thread makes one Worker (its
// scratch), which for every head it meets does begin_head(bh), then key_block(bh, j0) for its key
// blocks of that head, then end_head(bh, partial): dQ into grad_q, or into `partial` where the
// head's key blocks are split between threads (at most one head per thread boundary). Those
// partials are summed after the parallel region in a fixed order, so results do not depend on
// timing.
template <typename Worker, typename T>
void over_key_blocks(const Grads<T>& g, int64_t batch_heads) {
  const int64_t blocks = (g.seq_k + kKeys - 1) / kKeys, items = batch_heads * blocks;
  const int64_t shares = std::clamp<int64_t>(at::get_num_threads(), 1, items);
  auto share_begin = [&](int64_t t) { return t * items / shares; };
  // Decided before any thread runs: the heads split between shares, each share's parts in order.
  std::vector<Part> parts;
  for (int64_t t = 0; t < shares; ++t) {
    const int64_t b = share_begin(t), e = share_begin(t + 1);
    for (int64_t h = b / blocks; e > b && h <= (e - 1) / blocks; ++h)
      if (b > h * blocks || e < (h + 1) * blocks) parts.push_back({h, t});
  }
  Floats partials(static_cast<int64_t>(parts.size()) * g.seq_q * g.d);
  auto partial_of = [&](int64_t head, int64_t share) -> float* {
    for (size_t i = 0; i < parts.size(); ++i)
      if (parts[i].head == head && parts[i].share == share)
        return partials.get() + static_cast<int64_t>(i) * g.seq_q * g.d;
    return nullptr;  // the share holds all of the head's key blocks
  };
  at::parallel_for(0, shares, 1, [&](int64_t first, int64_t last) {
    Worker w(g);
    for (int64_t t = first; t < last; ++t) {
      int64_t head = -1;
      for (int64_t item = share_begin(t); item < share_begin(t + 1); ++item) {
        const int64_t bh = item / blocks;
        if (bh != head) {
          if (head >= 0) w.end_head(head, partial_of(head, t));
          w.begin_head(bh);
          head = bh;
        }
        // Causal blocks early in the sequence cost more: visited as 0, n-1, 1, n-2, ...
        w.key_block(bh, tiles::tile_order(item % blocks, blocks, g.causal) * kKeys);
      }
      if (head >= 0) w.end_head(head, partial_of(head, t));
    }
  });
  // The split heads: their partials summed in share order, then written in T.
  for (size_t i = 0; i < parts.size();) {
    const int64_t head = parts[i].head, n = g.seq_q * g.d;
    float* sum = partials.get() + static_cast<int64_t>(i) * n;
    size_t j = i + 1;
    for (; j < parts.size() && parts[j].head == head; ++j)
      for (int64_t x = 0; x < n; ++x) sum[x] += partials.get()[static_cast<int64_t>(j) * n + x];
    for (int64_t x = 0; x < n; ++x) g.dq[head * n + x] = T(sum[x]);
    i = j;
  }
}

}  // namespace attn::backward
