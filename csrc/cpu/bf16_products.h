// bf16 tile products on the CPU's bf16 instructions: AMX tiles or AVX512-BF16 dot products.
#pragma once

#include "attention_tiles.h"

#include <c10/util/BFloat16.h>

namespace attn {

// How a bf16 call multiplies its tiles; `bf16_path_name` names it as torch.ops.attn reports it.
enum class Bf16Path { kAmx, kAvx512Bf16, kFp32 };
const char* bf16_path_name(Bf16Path path);

// Whether this process can run a path at all (the CPU, the OS, and torch's ISA and BLAS).
bool bf16_path_offered(Bf16Path path);

// Attention of bf16 inputs with bf16 tile products (kAmx or kAvx512Bf16) and fp32 accumulation.
// Needs head_dim % 16 == 0 and a head's packed K and V within scratch (p.keep_kt).
void run_bf16_products(const tiles::Problem<c10::BFloat16>& p, int64_t batch_heads, Bf16Path path);

}  // namespace attn
