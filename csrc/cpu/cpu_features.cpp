#include "cpu_features.h"

#include <ATen/Version.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define ATTN_X86_CPUID 1
#endif
#if defined(ATTN_X86_CPUID) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attn {
namespace {

#ifdef ATTN_X86_CPUID
// Bit `bit` of register `reg` (0 eax, 1 ebx, 2 ecx, 3 edx) of CPUID leaf 7, sub-leaf `sub`.
bool leaf7_bit(unsigned sub, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(7, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
#endif

}  // namespace

const std::string& torch_isa() {
  static const std::string isa = at::get_cpu_capability();
  return isa;
}

bool cpu_has_avx512_bf16() {
#ifdef ATTN_X86_CPUID
  // __builtin_cpu_supports("avx512f") also asks the OS (XCR0) whether it saves the zmm registers.
  static const bool has = __builtin_cpu_supports("avx512f") && leaf7_bit(1, 0, 5);
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(ATTN_X86_CPUID) && defined(__linux__)
  static const bool has = [] {
    if (!leaf7_bit(0, 3, 24) || !leaf7_bit(0, 3, 22)) return false;  // AMX-TILE, AMX-BF16
    // Tile data is off for every process until it asks: without the permission the first tile
    // instruction faults. (torch asks too, when oneDNN first uses AMX; asking twice is harmless.)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace attn
