// Peak probes. Each keeps its accumulators in registers: independent chains, as many as the
// instruction's latency times its throughput needs, so that the FMA (or dot-product) units never
// wait for a result. Check it in the built library's assembly (objdump -d): the loop must be
// register-only vfmadd/vdpbf16ps/tdpbf16ps. (A probe whose accumulators lived in memory read 64
// GFLOP/s where the CPU does 480.)

#include "peaks_cpu.h"

#include "cpu_features.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ATTN_X86_PROBES 1
#endif

namespace attn {
namespace {

#ifdef ATTN_X86_PROBES
// Sixteen accumulators per thread: FMA latency 4 times 2 FMA units needs 8 in flight; twice that
// leaves room for CPUs with longer latencies. Values stay near 1: acc * 0.999 + 0.001.
#define ATTN_REPEAT16(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
// AVX2 has 16 ymm registers: 12 accumulators and the two operands.
#define ATTN_REPEAT12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"))) double fma_avx512(int64_t iterations) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
#define ATTN_INIT(i) __m512 acc##i = _mm512_set1_ps(1.0f + i);
  ATTN_REPEAT16(ATTN_INIT)
#undef ATTN_INIT
  for (int64_t n = 0; n < iterations; ++n) {
#define ATTN_STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
    ATTN_REPEAT16(ATTN_STEP)
#undef ATTN_STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define ATTN_SUM(i) sum = _mm512_add_ps(sum, acc##i);
  ATTN_REPEAT16(ATTN_SUM)
#undef ATTN_SUM
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return lanes[0];  // a result the compiler must compute
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iterations) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
#define ATTN_INIT(i) __m256 acc##i = _mm256_set1_ps(1.0f + i);
  ATTN_REPEAT12(ATTN_INIT)
#undef ATTN_INIT
  for (int64_t n = 0; n < iterations; ++n) {
#define ATTN_STEP(i) acc##i = _mm256_fmadd_ps(acc##i, a, b);
    ATTN_REPEAT12(ATTN_STEP)
#undef ATTN_STEP
  }
  __m256 sum = _mm256_setzero_ps();
#define ATTN_SUM(i) sum = _mm256_add_ps(sum, acc##i);
  ATTN_REPEAT12(ATTN_SUM)
#undef ATTN_SUM
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0];
}

// vdpbf16ps: per fp32 lane, acc += a0 * b0 + a1 * b1 over a pair of bf16 values (4 FLOPs).
__attribute__((target("avx512f,avx512bf16"))) double dot_avx512_bf16(int64_t iterations) {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3c80);  // bf16 1/64 in every half
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3c00);  // bf16 1/128
#define ATTN_INIT(i) __m512 acc##i = _mm512_set1_ps(1.0f + i);
  ATTN_REPEAT16(ATTN_INIT)
#undef ATTN_INIT
  for (int64_t n = 0; n < iterations; ++n) {
#define ATTN_STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
    ATTN_REPEAT16(ATTN_STEP)
#undef ATTN_STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define ATTN_SUM(i) sum = _mm512_add_ps(sum, acc##i);
  ATTN_REPEAT16(ATTN_SUM)
#undef ATTN_SUM
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return lanes[0];
}

// AMX's tile configuration (palette 1): 8 tiles of 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tdpbf16ps: a 16 x 16 fp32 tile += a 16 x 32 bf16 tile times a 32 x 16 one (16 x 16 x 32 x 2
// FLOPs). Four accumulator tiles (0-3) from two A tiles (4, 5) and two B tiles (6, 7), as GEMMs use
// them, so that consecutive products never wait for each other.
__attribute__((target("amx-tile,amx-bf16"))) double dot_amx_bf16(int64_t iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  std::fill(a, a + 16 * 32, uint16_t{0x3c80});
  std::fill(b, b + 16 * 32, uint16_t{0x3c00});
  alignas(64) float c[16 * 16];
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  for (int64_t n = 0; n < iterations; ++n) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0];
}
#endif  // ATTN_X86_PROBES

// Seconds of CPU time the calling thread has used: a probe's rate is its work over the time it
// actually ran, so a machine shared with other work still shows what its cores can do.
double thread_seconds() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

// Runs work(share) for shares [0, shares) over the threads of at::parallel_for, one share each
// where there are as many threads, and returns the sum over threads of (units their shares did,
// as work returns them) / (the CPU seconds they took).
template <typename Work>
double summed_rate(int64_t shares, const Work& work) {
  std::atomic<double> rate{0.0};
  at::parallel_for(0, shares, 1, [&](int64_t begin, int64_t end) {
    const double start = thread_seconds();
    double units = 0.0;
    for (int64_t share = begin; share < end; ++share) units += work(share);
    // A compare-exchange loop, not fetch_add: atomic<double>::fetch_add is C++20, and torch before
    // 2.13 builds extensions as C++17.
    const double mine = units / std::max(thread_seconds() - start, 1e-9);
    double seen = rate.load();
    while (!rate.compare_exchange_weak(seen, seen + mine)) {
    }
  });
  return rate.load();
}

struct Probe {
  double (*run)(int64_t);
  double flops_per_iteration;
};

Probe find_probe(const std::string& name) {
#ifdef ATTN_X86_PROBES
  if (name == "fp32_fma" && cpu_fma_isa() == "AVX512") return {&fma_avx512, 16 * 16 * 2.0};
  if (name == "fp32_fma" && cpu_fma_isa() == "AVX2") return {&fma_avx2, 12 * 8 * 2.0};
  if (name == "avx512_bf16" && cpu_has_avx512_bf16()) return {&dot_avx512_bf16, 16 * 16 * 4.0};
  if (name == "amx_bf16" && cpu_has_amx_bf16()) return {&dot_amx_bf16, 4 * 16 * 16 * 32 * 2.0};
#endif
  TORCH_CHECK_VALUE(false, "probe ", name, " cannot run on this CPU; it can run: ",
                    c10::Join(", ", cpu_peak_probes()));
}

}  // namespace

std::string cpu_fma_isa() {
#ifdef ATTN_X86_PROBES
  if (torch_isa() == "AVX512" && __builtin_cpu_supports("avx512f")) return "AVX512";
  if ((torch_isa() == "AVX512" || torch_isa() == "AVX2") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return "AVX2";
#endif
  return "";
}

std::vector<std::string> cpu_peak_probes() {
  std::vector<std::string> probes;
  if (!cpu_fma_isa().empty()) probes.push_back("fp32_fma");
  if (cpu_has_avx512_bf16()) probes.push_back("avx512_bf16");
  if (cpu_has_amx_bf16()) probes.push_back("amx_bf16");
  return probes;
}

double cpu_peak_probe(const std::string& name, int64_t iterations) {
  TORCH_CHECK_VALUE(iterations > 0, "iterations must be positive; got ", iterations);
  const Probe probe = find_probe(name);
  std::atomic<uint32_t> sink{0};
  // One share per thread: every thread runs its own chains, all at once.
  return summed_rate(at::get_num_threads(), [&](int64_t) {
    const float result = static_cast<float>(probe.run(iterations));
    uint32_t bits;
    std::memcpy(&bits, &result, sizeof bits);
    sink.fetch_xor(bits);  // keeps each result alive
    return static_cast<double>(iterations) * probe.flops_per_iteration;
  });
}

double cpu_triad(at::Tensor& a, const at::Tensor& b, const at::Tensor& c, double scalar) {
  for (const at::Tensor* t : {static_cast<const at::Tensor*>(&a), &b, &c})
    TORCH_CHECK_VALUE(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->is_contiguous(),
                      "cpu_triad takes contiguous float32 CPU tensors; got ", t->scalar_type(),
                      " on ", t->device());
  TORCH_CHECK_VALUE(a.numel() == b.numel() && a.numel() == c.numel(),
                    "cpu_triad's arrays differ in size: ", a.numel(), ", ", b.numel(), ", ",
                    c.numel());
  float* out = a.data_ptr<float>();
  const float *x = b.const_data_ptr<float>(), *y = c.const_data_ptr<float>();
  const float s = static_cast<float>(scalar);
  // One contiguous share per thread; STREAM counts 12 bytes per element (two read, one written).
  const int64_t n = a.numel();
  const int64_t shares = std::clamp<int64_t>(at::get_num_threads(), 1, std::max<int64_t>(n, 1));
  const int64_t per_share = (n + shares - 1) / shares;
  return summed_rate(shares, [&](int64_t share) {
    const int64_t begin = share * per_share, end = std::min(n, begin + per_share);
    for (int64_t i = begin; i < end; ++i) out[i] = x[i] + s * y[i];
    return 12.0 * static_cast<double>(std::max<int64_t>(end - begin, 0));
  });
}

}  // namespace attn
