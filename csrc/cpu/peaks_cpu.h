// Small probes of what this CPU can do at most, so that a kernel's rate can be given as a share of
// a measured peak: FMA chains in fp32, bf16 dot products (AVX512-BF16, AMX), and a memory triad.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace attn {

// The probes this CPU can run: "fp32_fma" (in the widest ISA torch runs, AVX-512 or AVX2),
// "avx512_bf16" (vdpbf16ps), "amx_bf16" (tdpbf16ps).
std::vector<std::string> cpu_peak_probes();

// The vector ISA "fp32_fma" runs with: "AVX512", "AVX2", or "" where there is no probe for it.
std::string cpu_fma_isa();

// Runs one probe on every thread of at::parallel_for at once, `iterations` rounds of independent
// chains per thread, all operands in registers (or tiles). Returns FLOP/s: each thread's FLOPs
// over the CPU time it ran, summed over the threads, so that other work on the machine lowers
// it little. Raises ValueError for a probe this CPU cannot run.
double cpu_peak_probe(const std::string& probe, int64_t iterations);

// a = b + scalar * c over fp32 arrays (STREAM's triad), one share per thread. Returns bytes/s as
// STREAM counts them (12 per element), summed over the threads as cpu_peak_probe does.
double cpu_triad(at::Tensor& a, const at::Tensor& b, const at::Tensor& c, double scalar);

}  // namespace attn
