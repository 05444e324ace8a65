// FlashAttention-style forward for CPU tensors, registered as attn::flash_attention_forward (CPU).
#pragma once

#include <ATen/core/Tensor.h>

namespace attn {

// The largest head_dim the op accepts (the CUDA kernel shares the limit).
constexpr int64_t kMaxHeadDim = 256;

// softmax(scale * q @ k^T) @ v for [batch, heads, seq, head_dim] fp32 or bf16 tensors; is_causal follows
// SDPA (query i sees keys j <= i, top-left aligned). Output has q's shape and dtype.
at::Tensor flash_attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale);

}  // namespace attn
