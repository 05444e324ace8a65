// FlashAttention-style forward for CPU tensors, registered as attn::flash_attention_forward (CPU).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>
#include <vector>

namespace attn {

// The largest head_dim the op accepts (the CUDA kernel shares the limit).
constexpr int64_t kMaxHeadDim = 256;

// softmax(scale * q @ k^T) @ v for [batch, heads, seq, head_dim] fp32 or bf16 tensors; is_causal follows
// SDPA (query i sees keys j <= i, top-left aligned). Output has q's shape and dtype.
at::Tensor flash_attention_forward_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale);

// The same, and each query row's log-sum-exp of its scaled scores (natural log; float32 [batch,
// heads, seq_q]), which the backward recomputes the probabilities from.
std::tuple<at::Tensor, at::Tensor> flash_attention_forward_lse_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale);

// The backward: grad_q, grad_k, grad_v of the forward above from grad_out, its inputs, its output
// and lse, recomputing each score tile (csrc/cpu/flash_attention_backward_cpu.cpp).
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool is_causal, double scale);

// The forward's checks of q, k, v (one-line ValueErrors), with `op` naming the op in the device
// error; shared by both ops' CPU kernels.
void check_qkv(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// t itself where its rows (the last dim) have unit stride and do not overlap, else a contiguous
// copy: what BLAS can read.
at::Tensor with_unit_rows(const at::Tensor& t);

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
