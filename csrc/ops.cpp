// The one place the attn ops are declared to torch. Kernels register per device: CPU here
// (csrc/cpu/), CUDA in csrc/cuda/binding.cu, a second library loaded after this one (built only where
// CUDA is available, so that a failing CUDA build leaves the CPU op working).

#include <torch/library.h>

#include "cpu/flash_attention_cpu.h"
#include "cpu/peaks_cpu.h"

TORCH_LIBRARY(attn, m) {
  m.def(
      "flash_attention_forward(Tensor q, Tensor k, Tensor v, bool is_causal, float scale) -> Tensor");
  // For training: the output and lse, float32 [batch, heads, seq_q], the natural-log log-sum-exp of
  // each query row's scaled scores, which is all the backward needs to recompute the probabilities.
  m.def(
      "flash_attention_forward_lse(Tensor q, Tensor k, Tensor v, bool is_causal, float scale) -> "
      "(Tensor, Tensor)");
  // (grad_q, grad_k, grad_v), each of its input's shape and dtype, from the forward's out and lse.
  m.def(
      "flash_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, "
      "Tensor lse, bool is_causal, float scale) -> (Tensor, Tensor, Tensor)");
  // Which copy of the CPU kernel's vector code runs in this process (no tensors: a plain function).
  m.def("cpu_isa() -> str", &attn::cpu_isa);
  // How the CPU kernel multiplies bf16 tiles: the paths this CPU offers, best first, and the one a
  // call with this head_dim and seq_k takes ("amx", "avx512_bf16" or "fp32").
  m.def("cpu_bf16_paths() -> str[]", &attn::cpu_bf16_paths);
  m.def("cpu_bf16_path(int head_dim, int seq_k) -> str", &attn::cpu_bf16_path);
  // Peak probes (csrc/cpu/peaks_cpu.h): FLOP/s of FMA or bf16 chains, bytes/s of STREAM's triad.
  m.def("cpu_peak_probes() -> str[]", &attn::cpu_peak_probes);
  m.def("cpu_fma_isa() -> str", &attn::cpu_fma_isa);
  m.def("cpu_peak_probe(str probe, int iterations) -> float", &attn::cpu_peak_probe);
  m.def("cpu_triad(Tensor(a!) a, Tensor b, Tensor c, float scalar) -> float");
}

TORCH_LIBRARY_IMPL(attn, CPU, m) {
  m.impl("flash_attention_forward", &attn::flash_attention_forward_cpu);
  m.impl("flash_attention_forward_lse", &attn::flash_attention_forward_lse_cpu);
  m.impl("flash_attention_backward", &attn::flash_attention_backward_cpu);
  m.impl("cpu_triad", &attn::cpu_triad);
}
