// FlashAttention-style forward for CPU tensors, registered as attn::flash_attention_forward (CPU).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace attn {

// The largest head_dim the op accepts (the CUDA kernel shares the limit).
constexpr int64_t kMaxHeadDim = 256;

// softmax(scale * q @ k^T) @ v for [batch, heads, seq, head_dim] fp32 or bf16 tensors; is_causal follows
// SDPA (query i sees keys j <= i, top-left aligned). Output has q's shape and dtype.
at::Tensor flash_attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale);

// The vector ISA the CPU kernel's softmax runs with: "AVX512", "AVX2" or "DEFAULT", named as
// torch.backends.cpu.get_cpu_capability() names the one torch's kernels run with. The two agree on
// x86-64 builds made with GCC; elsewhere ours is the baseline, "DEFAULT".
std::string cpu_isa();

// The ways this CPU can multiply bf16 tiles, best first: "amx" (AMX tiles, through oneDNN's
// brgemm), "avx512_bf16" (vdpbf16ps dot products), "fp32" (inputs widened; always there).
std::vector<std::string> cpu_bf16_paths();

// The one flash_attention_forward_cpu takes for bf16 inputs of this head_dim and seq_k (the
// environment variable ATTN_CPU_BF16_PATH forces one of cpu_bf16_paths()).
std::string cpu_bf16_path(int64_t head_dim, int64_t seq_k);

}  // namespace attn
