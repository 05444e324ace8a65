// bf16 tile products on the CPU's bf16 instructions: AMX tiles or AVX512-BF16 dot products.
#pragma once

#include "attention_tiles.h"
#include "backward_tiles.h"

#include <c10/util/BFloat16.h>

namespace attn {

// How a bf16 call multiplies its tiles; `bf16_path_name` names it as torch.ops.attn reports it.
enum class Bf16Path { kAmx, kAvx512Bf16, kFp32 };
const char* bf16_path_name(Bf16Path path);

// Whether this process can run a path at all (the CPU, the OS, and torch's ISA and BLAS).
bool bf16_path_offered(Bf16Path path);

// The path a bf16 call takes, where its shape `fits` the bf16 paths: the one ATTN_CPU_BF16_PATH
// (amx, avx512_bf16, fp32) forces, which must be one this CPU offers (e.g. to test AVX512-BF16 on
// a CPU with AMX), else the best this CPU offers, AMX first; fp32 (inputs widened) where the
// shape does not fit. One-line error for a forced path this CPU lacks or that does not exist.
Bf16Path pick_bf16_path(bool fits);

// Attention of bf16 inputs with bf16 tile products (kAmx or kAvx512Bf16) and fp32 accumulation.
// Needs head_dim % 16 == 0 and a head's packed K and V within scratch (p.keep_kt).
void run_bf16_products(const tiles::Problem<c10::BFloat16>& p, int64_t batch_heads, Bf16Path path);

// The backward of bf16 inputs with bf16 tile products (kAmx or kAvx512Bf16) and fp32
// accumulation (bf16_backward.cpp). Needs head_dim % 16 == 0 and g.ld_q = bf16_backward_ld_q.
void run_bf16_backward(const backward::Grads<c10::BFloat16>& g, int64_t batch_heads,
                       Bf16Path path);
int64_t bf16_backward_ld_q(int64_t seq_q);

}  // namespace attn
