// FlashAttention-2-style forward kernel: the torch-free interface.
//
// Plain CUDA C++: binding.cu fills FlashParams from torch tensors, test_flash_fwd.cu from raw
// buffers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

enum class FlashDtype : int { kBFloat16 = 0, kFloat16 = 1 };

// Tensors are [batch, heads, seq, head_dim] with head_dim contiguous; every other dim has an
// element stride. The kernel reads 16 bytes at a time, so pointers must be 16-byte aligned and
// strides multiples of 8 elements (launch returns cudaErrorInvalidValue otherwise).
struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;  // same dtype as q; written for every row < seq_q
  // Optional: dense float32 [batch, heads, seq_q], the natural-log log-sum-exp of each query row's
  // scaled scores (what the backward recomputes P from). nullptr: not written.
  float* lse;
  int64_t q_batch_stride, q_head_stride, q_seq_stride;
  int64_t k_batch_stride, k_head_stride, k_seq_stride;
  int64_t v_batch_stride, v_head_stride, v_seq_stride;
  int64_t out_batch_stride, out_head_stride, out_seq_stride;
  int batch, heads, seq_q, seq_k, head_dim;  // head_dim: 64 or 128
  float scale;                                // usually 1 / sqrt(head_dim)
  bool is_causal;                             // SDPA's convention: query i sees keys j <= i
  FlashDtype dtype;
};

// Queue the kernel on `stream`. Returns cudaErrorInvalidValue for parameters the kernel does not
// support, else the launch's error (cudaSuccess when it was queued; errors while running surface
// at the next synchronisation, as for any kernel).
cudaError_t launch_flash_attention_forward(const FlashParams& p, cudaStream_t stream);
