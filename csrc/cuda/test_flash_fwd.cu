// Standalone check of the flash forward kernel against a CPU reference; no torch needed.
//
//   cd csrc/cuda
//   nvcc -std=c++20 -O2 -arch=sm_90a test_flash_fwd.cu flash_fwd.cu -o test_flash_fwd
//   ./test_flash_fwd          (-arch=sm_80 on an A100; pytest -m gpu builds and runs it too)
//
// Prints the max error per case and "N passed, N failed"; exits non-zero if any case failed
// (2 when there is no usable GPU).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "flash_fwd.h"
#include "test_flash_common.h"

namespace {

using namespace flash_test;

// Softmax(q k^T * scale) v in double, from the same rounded inputs the GPU sees.
void reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, Strides qs, Strides ks, Strides vs,
               std::vector<double>& out /* [b][h][sq][d] dense */) {
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  std::vector<double> w(c.seq_k);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.seq_q; ++i) {
        const float* qi = &q[b * qs.batch + h * qs.head + i * qs.seq];
        const int visible = c.is_causal ? std::min(i + 1, c.seq_k) : c.seq_k;
        double mx = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          const float* kj = &k[b * ks.batch + h * ks.head + j * ks.seq];
          double dot = 0;
          for (int e = 0; e < c.head_dim; ++e) dot += double(qi[e]) * kj[e];
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        double sum = 0;
        for (int j = 0; j < visible; ++j) sum += (w[j] = std::exp(w[j] - mx));
        double* o = &out[((int64_t(b) * c.heads + h) * c.seq_q + i) * c.head_dim];
        for (int e = 0; e < c.head_dim; ++e) o[e] = 0;
        for (int j = 0; j < visible; ++j) {
          const float* vj = &v[b * vs.batch + h * vs.head + j * vs.seq];
          for (int e = 0; e < c.head_dim; ++e) o[e] += w[j] / sum * vj[e];
        }
      }
}

#define CHECK_CUDA(call)                                                              \
  do {                                                                                \
    const cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                        \
      printf("  CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      return false;                                                                   \
    }                                                                                 \
  } while (0)

// Runs one case; prints its max error and returns whether it passed.
bool run_case(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const Strides qs = strides_for(c, c.seq_q, c.bshd), ks = strides_for(c, c.seq_k, c.bshd);
  const int64_t n_q = int64_t(c.batch) * c.heads * c.seq_q * c.head_dim;
  const int64_t n_k = int64_t(c.batch) * c.heads * c.seq_k * c.head_dim;

  // Host copies: bits for the GPU, the rounded values as floats for the reference.
  std::vector<uint16_t> q_bits(n_q), k_bits(n_k), v_bits(n_k);
  std::vector<float> q(n_q), k(n_k), v(n_k);
  auto fill = [&](std::vector<uint16_t>& bits, std::vector<float>& vals, float amp) {
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = to_bits(amp * normal(rng), c.dtype);
      vals[i] = from_bits(bits[i], c.dtype);
    }
  };
  fill(q_bits, q, c.amplitude);
  fill(k_bits, k, c.amplitude);
  fill(v_bits, v, 1.f);
  poison_keys(c, ks, k_bits, v_bits);

  // The output is dense [b][h][sq][d] plus a guard zone after it that must stay untouched.
  constexpr int64_t kGuard = 4096;
  constexpr uint16_t kSentinel = 0x7e7e;
  std::vector<uint16_t> out_bits(n_q + kGuard, kSentinel);

  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  auto cleanup = [&] {
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
  };
  auto run = [&]() -> bool {
    CHECK_CUDA(cudaMalloc(&dq, n_q * 2));
    CHECK_CUDA(cudaMalloc(&dk, n_k * 2));
    CHECK_CUDA(cudaMalloc(&dv, n_k * 2));
    CHECK_CUDA(cudaMalloc(&dout, (n_q + kGuard) * 2));
    CHECK_CUDA(cudaMemcpy(dq, q_bits.data(), n_q * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, k_bits.data(), n_k * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, v_bits.data(), n_k * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dout, out_bits.data(), (n_q + kGuard) * 2, cudaMemcpyHostToDevice));

    FlashParams p{};
    p.q = dq;
    p.k = dk;
    p.v = dv;
    p.out = dout;
    p.q_batch_stride = qs.batch, p.q_head_stride = qs.head, p.q_seq_stride = qs.seq;
    p.k_batch_stride = ks.batch, p.k_head_stride = ks.head, p.k_seq_stride = ks.seq;
    p.v_batch_stride = ks.batch, p.v_head_stride = ks.head, p.v_seq_stride = ks.seq;
    p.out_batch_stride = int64_t(c.heads) * c.seq_q * c.head_dim;
    p.out_head_stride = int64_t(c.seq_q) * c.head_dim;
    p.out_seq_stride = c.head_dim;
    p.batch = c.batch, p.heads = c.heads, p.seq_q = c.seq_q, p.seq_k = c.seq_k;
    p.head_dim = c.head_dim;
    p.scale = 1.f / std::sqrt(float(c.head_dim));
    p.is_causal = c.is_causal;
    p.dtype = c.dtype;
    CHECK_CUDA(launch_flash_attention_forward(p, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(out_bits.data(), dout, (n_q + kGuard) * 2, cudaMemcpyDeviceToHost));
    return true;
  };
  if (!run()) {
    printf("FAIL %s (CUDA error above)\n", describe(c).c_str());
    cleanup();
    return false;
  }
  cleanup();

  std::vector<double> ref(n_q);
  reference(c, q, k, v, qs, ks, ks, ref);
  // bf16 keeps 8 significant bits, fp16 11: P is rounded to that before P @ V, and so is O.
  const double tol = c.dtype == FlashDtype::kBFloat16 ? 2e-2 : 4e-3;
  double max_err = 0;
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < n_q; ++i) {
    const double got = from_bits(out_bits[i], c.dtype);
    const double err = std::fabs(got - ref[i]);  // NaN fails the test below
    if (!(err <= tol * (1 + std::fabs(ref[i])))) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
    if (err > max_err || std::isnan(err)) max_err = std::isnan(err) ? INFINITY : err;
  }
  int64_t guard_hits = 0;
  for (int64_t i = n_q; i < n_q + kGuard; ++i) guard_hits += out_bits[i] != kSentinel;
  const bool ok = bad == 0 && guard_hits == 0;
  printf("%s %-52s max_err %.3e (tol %.0e)", ok ? "PASS" : "FAIL", describe(c).c_str(), max_err,
         tol);
  if (bad) {
    const int64_t d = c.head_dim, row = first_bad / d;
    printf("  %lld bad, first at row %lld col %lld: got %g want %g", (long long)bad,
           (long long)(row % c.seq_q), (long long)(first_bad % d),
           from_bits(out_bits[first_bad], c.dtype), ref[first_bad]);
  }
  if (guard_hits) printf("  %lld writes past the output", (long long)guard_hits);
  printf("\n");
  return ok;
}

// The launcher must refuse what the kernel cannot do, without touching the GPU.
bool run_rejects_bad_params() {
  FlashParams p{};
  alignas(16) static uint16_t buf[64 * 8];
  p.q = p.k = p.v = buf;
  p.out = buf;
  p.batch = p.heads = 1;
  p.seq_q = p.seq_k = 8;
  p.q_seq_stride = p.k_seq_stride = p.v_seq_stride = p.out_seq_stride = 64;
  p.scale = 0.125f;
  p.dtype = FlashDtype::kBFloat16;
  p.head_dim = 96;
  const bool head_dim_refused = launch_flash_attention_forward(p, nullptr) == cudaErrorInvalidValue;
  p.head_dim = 64;
  p.q = buf + 1;  // 2-byte aligned only
  const bool misaligned_refused =
      launch_flash_attention_forward(p, nullptr) == cudaErrorInvalidValue;
  const bool ok = head_dim_refused && misaligned_refused;
  printf("%s launcher refuses head_dim 96 (%s) and a misaligned pointer (%s)\n",
         ok ? "PASS" : "FAIL", head_dim_refused ? "yes" : "no", misaligned_refused ? "yes" : "no");
  return ok;
}

}  // namespace

int main() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    printf("no usable CUDA device; nothing was tested\n");
    return 2;
  }
  printf("device %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major < 8) {
    printf("the kernel needs sm_80 or newer; nothing was tested\n");
    return 2;
  }

  // {batch, heads, seq_q, seq_k, head_dim}: odd lengths hit every tail path (1 row, partial tiles,
  // one past a tile), seq_q != seq_k both ways, and exact multiples of the 64-row tiles.
  const int shapes[][5] = {
      {1, 1, 1, 1, 64},     {1, 2, 37, 37, 64},   {2, 3, 200, 200, 64},  {1, 2, 257, 257, 64},
      {1, 1, 1, 1, 128},    {2, 2, 37, 37, 128},  {1, 2, 200, 200, 128}, {1, 1, 257, 257, 128},
      {1, 2, 37, 200, 64},  {1, 2, 200, 37, 128}, {1, 1, 257, 100, 64},  {1, 1, 100, 257, 128},
      {2, 2, 128, 128, 64}, {1, 1, 1, 257, 128},  {1, 1, 257, 1, 64},
  };
  std::vector<Case> cases;
  for (FlashDtype dtype : {FlashDtype::kBFloat16, FlashDtype::kFloat16})
    for (const auto& s : shapes)
      for (bool causal : {false, true})
        cases.push_back({s[0], s[1], s[2], s[3], s[4], causal, dtype});
  // Strided [batch, seq, heads, head_dim] inputs, and large scores that move the running max
  // ({..., bshd, poison_from, amplitude}: -1 poisons nothing).
  for (FlashDtype dtype : {FlashDtype::kBFloat16, FlashDtype::kFloat16}) {
    cases.push_back({2, 3, 130, 77, 64, true, dtype, true});
    cases.push_back({1, 2, 77, 130, 128, false, dtype, true});
    cases.push_back({1, 2, 300, 300, 64, true, dtype, false, -1, 3.f});
    cases.push_back({1, 1, 150, 300, 128, false, dtype, false, -1, 3.f});
    // Causal tile skipping: 20 queries fit one 64-row block, so keys 64.. must never be loaded
    // (loaded and masked, 0 * NaN would still reach the output).
    cases.push_back({1, 2, 20, 200, 64, true, dtype, false, 64});
    cases.push_back({1, 1, 70, 300, 128, true, dtype, false, 128});
  }

  int passed = 0, failed = 0;
  (run_rejects_bad_params() ? passed : failed) += 1;
  uint32_t seed = 0;
  for (const Case& c : cases) (run_case(c, ++seed) ? passed : failed) += 1;
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
