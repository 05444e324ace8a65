// The one place the attn ops are declared to torch. Kernels register per device: CPU here
// (csrc/cpu/), CUDA in csrc/cuda/binding.cu, a second library loaded after this one (built only where
// CUDA is available, so that a failing CUDA build leaves the CPU op working).

#include <torch/library.h>

#include "cpu/flash_attention_cpu.h"

TORCH_LIBRARY(attn, m) {
  m.def(
      "flash_attention_forward(Tensor q, Tensor k, Tensor v, bool is_causal, float scale) -> Tensor");
  // Which copy of the CPU kernel's vector code runs in this process (no tensors: a plain function).
  m.def("cpu_isa() -> str", &attn::cpu_isa);
}

TORCH_LIBRARY_IMPL(attn, CPU, m) {
  m.impl("flash_attention_forward", &attn::flash_attention_forward_cpu);
}
