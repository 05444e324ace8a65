// What this CPU (and the OS) lets the CPU kernels use, asked at run time: the build needs no -march
// flag, and code for an ISA the CPU lacks is compiled (with target attributes) but never called.
#pragma once

#include <string>

namespace attn {

// The vector ISA torch runs its own CPU kernels with ("AVX512", "AVX2" or "DEFAULT" on x86-64),
// decided once per process from the CPU and ATEN_CPU_CAPABILITY (which can only lower it).
const std::string& torch_isa();

// AVX512-BF16 (vdpbf16ps, vcvtneps2bf16), with the OS saving the AVX-512 registers.
bool cpu_has_avx512_bf16();

// AMX tiles with bf16 products (tdpbf16ps), and Linux's permission for this process to use the
// tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once, here).
bool cpu_has_amx_bf16();

}  // namespace attn
