// FlashAttention-2-style backward kernels: the torch-free interface.
//
// Plain CUDA C++: binding.cu fills FlashBwdParams from torch tensors, test_flash_bwd.cu from raw
// buffers. The forward (flash_fwd.h) saves the log-sum-exp this backward reads.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "flash_fwd.h"

// Tensors are [batch, heads, seq, head_dim] with head_dim contiguous; every other dim has an
// element stride (any stride: the backward reads one element at a time). lse and delta are dense
// float32 [batch, heads, seq_q].
struct FlashBwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* out;       // the forward's output
  const void* grad_out;  // dO, same shape as out
  const float* lse;      // natural-log log-sum-exp of each query row's scaled scores (forward)
  float* delta;          // workspace the launcher fills: D = rowsum(dO * O), one float per row
  void* grad_q;          // outputs, dtype of q; every element written
  void* grad_k;
  void* grad_v;
  int64_t q_batch_stride, q_head_stride, q_seq_stride;
  int64_t k_batch_stride, k_head_stride, k_seq_stride;
  int64_t v_batch_stride, v_head_stride, v_seq_stride;
  int64_t out_batch_stride, out_head_stride, out_seq_stride;
  int64_t grad_out_batch_stride, grad_out_head_stride, grad_out_seq_stride;
  int64_t grad_q_batch_stride, grad_q_head_stride, grad_q_seq_stride;
  int64_t grad_k_batch_stride, grad_k_head_stride, grad_k_seq_stride;
  int64_t grad_v_batch_stride, grad_v_head_stride, grad_v_seq_stride;
  int batch, heads, seq_q, seq_k, head_dim;  // head_dim: 64 or 128
  float scale;                                // the forward's
  bool is_causal;                             // SDPA's convention: query i sees keys j <= i
  FlashDtype dtype;
};

// Queue the three kernels (delta, dK/dV, dQ) on `stream`. Returns cudaErrorInvalidValue for
// parameters the kernels do not support, else the first launch error (cudaSuccess when queued).
cudaError_t launch_flash_attention_backward(const FlashBwdParams& p, cudaStream_t stream);
