// Standalone check of the flash backward (and of the lse the forward saves for it) against a CPU
// double-precision reference; no torch needed.
//
//   cd csrc/cuda
//   nvcc -std=c++20 -O2 -arch=sm_90a test_flash_bwd.cu flash_bwd.cu flash_fwd.cu -o test_flash_bwd
//   ./test_flash_bwd           correctness: every case, "N passed, N failed"
//   ./test_flash_bwd --time    forward and backward ms and TFLOP/s at B2 H16 S4096, bf16
//
// (-arch=sm_80 on an A100.) Exits 1 if any case failed or any CUDA call returned an error, 2 when
// there is no usable GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "flash_bwd.h"
#include "flash_fwd.h"
#include "test_flash_common.h"

namespace {

using namespace flash_test;

// Everything the reference computes, dense [b][h][seq][d] (lse: [b][h][seq_q]).
struct Grads {
  std::vector<double> dq, dk, dv, lse;
};

// The gradients of softmax(q k^T * scale) v in double, from the same rounded inputs the GPU sees.
Grads reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, const std::vector<float>& dout, Strides qs,
                Strides ks) {
  const int sq = c.seq_q, sk = c.seq_k, d = c.head_dim;
  const double scale = 1.0 / std::sqrt(double(d));
  Grads g;
  g.dq.assign(int64_t(c.batch) * c.heads * sq * d, 0.0);
  g.dk.assign(int64_t(c.batch) * c.heads * sk * d, 0.0);
  g.dv.assign(g.dk.size(), 0.0);
  g.lse.assign(int64_t(c.batch) * c.heads * sq, 0.0);
  std::vector<double> pr(int64_t(sq) * sk), dp(int64_t(sq) * sk), o(d);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) {
      auto Q = [&](int i, int e) { return double(q[b * qs.batch + h * qs.head + i * qs.seq + e]); };
      auto dO = [&](int i, int e) {
        return double(dout[b * qs.batch + h * qs.head + i * qs.seq + e]);
      };
      auto K = [&](int j, int e) { return double(k[b * ks.batch + h * ks.head + j * ks.seq + e]); };
      auto V = [&](int j, int e) { return double(v[b * ks.batch + h * ks.head + j * ks.seq + e]); };
      const int64_t bh = int64_t(b) * c.heads + h;
      for (int i = 0; i < sq; ++i) {
        const int visible = c.is_causal ? std::min(i + 1, sk) : sk;
        double mx = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += Q(i, e) * K(j, e);
          pr[int64_t(i) * sk + j] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0;
        for (int j = 0; j < visible; ++j) sum += std::exp(pr[int64_t(i) * sk + j] - mx);
        g.lse[bh * sq + i] = mx + std::log(sum);
        for (int j = 0; j < sk; ++j) {
          double& pij = pr[int64_t(i) * sk + j];
          pij = j < visible ? std::exp(pij - g.lse[bh * sq + i]) : 0.0;
        }
        // dP = dO V^T; D = rowsum(dO * O) = rowsum(P * dP); dS = P * (dP - D).
        std::fill(o.begin(), o.end(), 0.0);
        for (int j = 0; j < visible; ++j)
          for (int e = 0; e < d; ++e) o[e] += pr[int64_t(i) * sk + j] * V(j, e);
        double delta = 0;
        for (int e = 0; e < d; ++e) delta += dO(i, e) * o[e];
        for (int j = 0; j < sk; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += dO(i, e) * V(j, e);
          dp[int64_t(i) * sk + j] = pr[int64_t(i) * sk + j] * (dot - delta);  // now dS
        }
      }
      double* dq = &g.dq[bh * sq * d];
      double* dk = &g.dk[bh * sk * d];
      double* dv = &g.dv[bh * sk * d];
      for (int i = 0; i < sq; ++i)
        for (int j = 0; j < sk; ++j) {
          const double pij = pr[int64_t(i) * sk + j], dsij = dp[int64_t(i) * sk + j];
          if (pij == 0.0 && dsij == 0.0) continue;
          for (int e = 0; e < d; ++e) {
            dv[int64_t(j) * d + e] += pij * dO(i, e);
            dk[int64_t(j) * d + e] += dsij * Q(i, e) * scale;
            dq[int64_t(i) * d + e] += dsij * K(j, e) * scale;
          }
        }
    }
  return g;
}

bool g_cuda_error = false;  // any CUDA error makes the program fail, whatever the cases say

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    const cudaError_t err_ = (call);                                                      \
    if (err_ != cudaSuccess) {                                                            \
      printf("  CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      g_cuda_error = true;                                                                \
      return false;                                                                       \
    }                                                                                     \
  } while (0)

// Device buffers of one case, freed on every path out.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  bool alloc(void** p, size_t bytes) {
    if (cudaMalloc(p, bytes) != cudaSuccess) return false;
    ptrs.push_back(*p);
    return true;
  }
};

constexpr int64_t kGuard = 4096;  // elements after each gradient that must stay untouched
constexpr uint16_t kGuardBits = 0x1234;

// Relative error of one gradient, ||got - want|| / ||want|| (Frobenius), with a floor on the
// denominator for a gradient that is exactly 0 (one query seeing one key: dS = 0). Also counts
// elements never written (still NaN) and writes into the guard zone.
struct Check {
  double rel = 0;
  int64_t unwritten = 0, guard_hits = 0;
};

Check check_grad(const std::vector<uint16_t>& got, const std::vector<double>& want,
                 FlashDtype dtype) {
  Check r;
  double diff2 = 0, want2 = 0;
  const int64_t n = int64_t(want.size());
  for (int64_t i = 0; i < n; ++i) {
    const double x = from_bits(got[i], dtype);
    if (std::isnan(x)) {
      ++r.unwritten;
      continue;
    }
    diff2 += (x - want[i]) * (x - want[i]);
    want2 += want[i] * want[i];
  }
  for (int64_t i = n; i < n + kGuard; ++i) r.guard_hits += got[i] != kGuardBits;
  r.rel = std::sqrt(diff2) / std::max(std::sqrt(want2), 1e-3 * std::sqrt(double(n)));
  return r;
}

// Runs one case: forward (with lse) then backward on the GPU; prints the errors, returns pass.
bool run_case(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const Strides qs = strides_for(c, c.seq_q, c.bshd), ks = strides_for(c, c.seq_k, c.bshd);
  const Strides dense_q = strides_for(c, c.seq_q, false), dense_k = strides_for(c, c.seq_k, false);
  const int64_t n_q = int64_t(c.batch) * c.heads * c.seq_q * c.head_dim;
  const int64_t n_k = int64_t(c.batch) * c.heads * c.seq_k * c.head_dim;
  const int64_t n_rows = int64_t(c.batch) * c.heads * c.seq_q;

  std::vector<uint16_t> q_bits(n_q), k_bits(n_k), v_bits(n_k), do_bits(n_q);
  std::vector<float> q(n_q), k(n_k), v(n_k), dout(n_q);
  auto fill = [&](std::vector<uint16_t>& bits, std::vector<float>& vals) {
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = to_bits(normal(rng), c.dtype);
      vals[i] = from_bits(bits[i], c.dtype);
    }
  };
  fill(q_bits, q), fill(k_bits, k), fill(v_bits, v), fill(do_bits, dout);
  poison_keys(c, ks, k_bits, v_bits);
  // Gradients start as NaN (so an element never written shows), followed by a guard zone.
  std::vector<uint16_t> gq(n_q + kGuard, nan_bits(c.dtype)), gk(n_k + kGuard, nan_bits(c.dtype));
  std::fill(gq.begin() + n_q, gq.end(), kGuardBits);
  std::fill(gk.begin() + n_k, gk.end(), kGuardBits);
  std::vector<uint16_t> gv = gk;
  std::vector<float> lse(n_rows, NAN);

  auto run = [&]() -> bool {
    DeviceBuffers mem;
    void *dq, *dk, *dv, *ddo, *dout_fwd, *dlse, *ddelta, *dgq, *dgk, *dgv;
    CHECK_CUDA(mem.alloc(&dq, n_q * 2) && mem.alloc(&dk, n_k * 2) && mem.alloc(&dv, n_k * 2) &&
                       mem.alloc(&ddo, n_q * 2) && mem.alloc(&dout_fwd, n_q * 2) &&
                       mem.alloc(&dlse, n_rows * 4) && mem.alloc(&ddelta, n_rows * 4) &&
                       mem.alloc(&dgq, (n_q + kGuard) * 2) &&
                       mem.alloc(&dgk, (n_k + kGuard) * 2) && mem.alloc(&dgv, (n_k + kGuard) * 2)
                   ? cudaSuccess
                   : cudaErrorMemoryAllocation);
    CHECK_CUDA(cudaMemcpy(dq, q_bits.data(), n_q * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, k_bits.data(), n_k * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, v_bits.data(), n_k * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(ddo, do_bits.data(), n_q * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dlse, lse.data(), n_rows * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dgq, gq.data(), (n_q + kGuard) * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dgk, gk.data(), (n_k + kGuard) * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dgv, gv.data(), (n_k + kGuard) * 2, cudaMemcpyHostToDevice));

    FlashParams f{};
    f.q = dq, f.k = dk, f.v = dv, f.out = dout_fwd, f.lse = static_cast<float*>(dlse);
    f.q_batch_stride = qs.batch, f.q_head_stride = qs.head, f.q_seq_stride = qs.seq;
    f.k_batch_stride = ks.batch, f.k_head_stride = ks.head, f.k_seq_stride = ks.seq;
    f.v_batch_stride = ks.batch, f.v_head_stride = ks.head, f.v_seq_stride = ks.seq;
    f.out_batch_stride = dense_q.batch, f.out_head_stride = dense_q.head;
    f.out_seq_stride = dense_q.seq;
    f.batch = c.batch, f.heads = c.heads, f.seq_q = c.seq_q, f.seq_k = c.seq_k;
    f.head_dim = c.head_dim, f.scale = 1.f / std::sqrt(float(c.head_dim));
    f.is_causal = c.is_causal, f.dtype = c.dtype;
    CHECK_CUDA(launch_flash_attention_forward(f, nullptr));

    FlashBwdParams p{};
    p.q = dq, p.k = dk, p.v = dv, p.out = dout_fwd, p.grad_out = ddo;
    p.lse = static_cast<const float*>(dlse), p.delta = static_cast<float*>(ddelta);
    p.grad_q = dgq, p.grad_k = dgk, p.grad_v = dgv;
    p.q_batch_stride = qs.batch, p.q_head_stride = qs.head, p.q_seq_stride = qs.seq;
    p.k_batch_stride = ks.batch, p.k_head_stride = ks.head, p.k_seq_stride = ks.seq;
    p.v_batch_stride = ks.batch, p.v_head_stride = ks.head, p.v_seq_stride = ks.seq;
    p.out_batch_stride = dense_q.batch, p.out_head_stride = dense_q.head;
    p.out_seq_stride = dense_q.seq;
    p.grad_out_batch_stride = qs.batch, p.grad_out_head_stride = qs.head;
    p.grad_out_seq_stride = qs.seq;
    p.grad_q_batch_stride = dense_q.batch, p.grad_q_head_stride = dense_q.head;
    p.grad_q_seq_stride = dense_q.seq;
    p.grad_k_batch_stride = p.grad_v_batch_stride = dense_k.batch;
    p.grad_k_head_stride = p.grad_v_head_stride = dense_k.head;
    p.grad_k_seq_stride = p.grad_v_seq_stride = dense_k.seq;
    p.batch = c.batch, p.heads = c.heads, p.seq_q = c.seq_q, p.seq_k = c.seq_k;
    p.head_dim = c.head_dim, p.scale = f.scale, p.is_causal = c.is_causal, p.dtype = c.dtype;
    CHECK_CUDA(launch_flash_attention_backward(p, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(lse.data(), dlse, n_rows * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(gq.data(), dgq, (n_q + kGuard) * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(gk.data(), dgk, (n_k + kGuard) * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(gv.data(), dgv, (n_k + kGuard) * 2, cudaMemcpyDeviceToHost));
    return true;
  };
  if (!run()) {
    printf("FAIL %s (CUDA error above)\n", describe(c).c_str());
    return false;
  }

  const Grads want = reference(c, q, k, v, dout, qs, ks);
  double lse_err = 0;  // fp32 arithmetic on the same inputs: close to exact
  for (int64_t i = 0; i < n_rows; ++i) {
    const double err = std::fabs(lse[i] - want.lse[i]);
    lse_err = std::isnan(err) ? INFINITY : std::max(lse_err, err);
  }
  // bf16 keeps 8 significant bits, fp16 11: each gradient is rounded once at the end, and the
  // backward's D = rowsum(dO * O) reads the forward's rounded O.
  const double tol = c.dtype == FlashDtype::kBFloat16 ? 1e-2 : 2e-3, lse_tol = 1e-3;
  const Check cq = check_grad(gq, want.dq, c.dtype), ck = check_grad(gk, want.dk, c.dtype),
              cv = check_grad(gv, want.dv, c.dtype);
  bool ok = lse_err <= lse_tol;
  for (const Check* ch : {&cq, &ck, &cv}) {
    ok = ok && ch->rel <= tol && ch->unwritten == 0 && ch->guard_hits == 0;
  }
  printf("%s %-44s rel dq %.2e dk %.2e dv %.2e (tol %.0e) lse %.1e", ok ? "PASS" : "FAIL",
         describe(c).c_str(), cq.rel, ck.rel, cv.rel, tol, lse_err);
  const char* names[] = {"dq", "dk", "dv"};
  const Check* checks[] = {&cq, &ck, &cv};
  for (int t = 0; t < 3; ++t) {
    const long long unwritten = checks[t]->unwritten, guard_hits = checks[t]->guard_hits;
    if (unwritten) printf("  %s: %lld unwritten", names[t], unwritten);
    if (guard_hits) printf("  %s: %lld writes past the end", names[t], guard_hits);
  }
  printf("\n");
  return ok;
}

// The launcher must refuse what the kernels cannot do, without touching the GPU.
bool run_rejects_bad_params() {
  alignas(16) static uint16_t buf[64 * 8];
  static float stats[8];
  FlashBwdParams p{};
  p.q = p.k = p.v = p.out = p.grad_out = buf;
  p.grad_q = p.grad_k = p.grad_v = buf;
  p.lse = stats, p.delta = stats;
  p.batch = p.heads = 1, p.seq_q = p.seq_k = 8;
  p.scale = 0.125f, p.dtype = FlashDtype::kBFloat16;
  p.head_dim = 96;
  const bool head_dim_refused =
      launch_flash_attention_backward(p, nullptr) == cudaErrorInvalidValue;
  p.head_dim = 64, p.seq_k = 0;
  const bool no_keys_refused = launch_flash_attention_backward(p, nullptr) == cudaErrorInvalidValue;
  p.seq_k = 8, p.lse = nullptr;
  const bool no_lse_refused = launch_flash_attention_backward(p, nullptr) == cudaErrorInvalidValue;
  const bool ok = head_dim_refused && no_keys_refused && no_lse_refused;
  printf("%s launcher refuses head_dim 96 (%s), seq_k 0 (%s), a missing lse (%s)\n",
         ok ? "PASS" : "FAIL", head_dim_refused ? "yes" : "no", no_keys_refused ? "yes" : "no",
         no_lse_refused ? "yes" : "no");
  return ok;
}

int run_correctness() {
  // {batch, heads, seq_q, seq_k, head_dim}: one token, lengths that are no multiple of the 32-row
  // tiles (nor of the forward's 64), one past a tile, seq_q != seq_k both ways, exact tiles. Kept
  // under 256 rows so that racecheck, which tracks every shared-memory access, takes seconds.
  const int shapes[][5] = {
      {1, 1, 1, 1, 64},      {1, 2, 37, 37, 64},   {2, 2, 100, 100, 64},  {1, 1, 129, 129, 64},
      {1, 2, 37, 200, 64},   {1, 2, 200, 37, 64},  {1, 1, 129, 1, 64},    {2, 1, 64, 64, 64},
      {1, 1, 1, 1, 128},     {1, 2, 65, 65, 128},  {1, 1, 200, 130, 128}, {1, 1, 130, 200, 128},
      {1, 1, 129, 129, 128}, {1, 1, 1, 129, 128},  {2, 1, 64, 64, 128},
  };
  std::vector<Case> cases;
  for (FlashDtype dtype : {FlashDtype::kBFloat16, FlashDtype::kFloat16})
    for (const auto& s : shapes)
      for (bool causal : {false, true}) {
        cases.push_back({s[0], s[1], s[2], s[3], s[4], causal, dtype});
      }
  for (FlashDtype dtype : {FlashDtype::kBFloat16, FlashDtype::kFloat16}) {
    // Strided [batch, seq, heads, head_dim] q, k, v and dO.
    cases.push_back({2, 3, 130, 77, 64, true, dtype, true});
    cases.push_back({1, 2, 77, 130, 128, false, dtype, true});
    // Causal skipping: 20 queries, so no kernel may read keys from 64 on (the forward's tile;
    // the backward's first 32-key tile covers them all). Loaded, NaN would reach the gradients.
    cases.push_back({1, 2, 20, 200, 64, true, dtype, false, 64});
    cases.push_back({1, 1, 20, 150, 128, true, dtype, false, 64});
  }
  int passed = 0, failed = 0;
  (run_rejects_bad_params() ? passed : failed) += 1;
  uint32_t seed = 0;
  for (const Case& c : cases) (run_case(c, ++seed) ? passed : failed) += 1;
  printf("%d passed, %d failed\n", passed, failed);
  if (g_cuda_error) printf("a CUDA call failed: see above\n");
  return failed == 0 && !g_cuda_error ? 0 : 1;
}

// ---- --time: forward and backward at the shape the chapters benchmark ------------------------

bool time_one(int head_dim, bool causal, int iterations) {
  const int batch = 2, heads = 16, seq = 4096;
  const int64_t n = int64_t(batch) * heads * seq * head_dim, rows = int64_t(batch) * heads * seq;
  std::vector<uint16_t> host(n);
  uint32_t state = 12345u + head_dim;
  for (auto& x : host) {  // uniform in [-1, 1): plenty random for timing, and fast to make
    state = state * 1664525u + 1013904223u;
    x = to_bits(float(state >> 8) / float(1 << 23) - 1.f, FlashDtype::kBFloat16);
  }
  DeviceBuffers mem;
  void *q, *k, *v, *o, *dout, *lse, *delta, *gq, *gk, *gv;
  for (void** p : {&q, &k, &v, &o, &dout, &gq, &gk, &gv}) {
    CHECK_CUDA(mem.alloc(p, n * 2) ? cudaSuccess : cudaErrorMemoryAllocation);
  }
  const bool stats = mem.alloc(&lse, rows * 4) && mem.alloc(&delta, rows * 4);
  CHECK_CUDA(stats ? cudaSuccess : cudaErrorMemoryAllocation);
  for (void* p : {q, k, v, dout}) {
    CHECK_CUDA(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
  const int64_t hs = int64_t(seq) * head_dim, bs = heads * hs;
  FlashParams f{};
  f.q = q, f.k = k, f.v = v, f.out = o, f.lse = static_cast<float*>(lse);
  f.q_batch_stride = f.k_batch_stride = f.v_batch_stride = f.out_batch_stride = bs;
  f.q_head_stride = f.k_head_stride = f.v_head_stride = f.out_head_stride = hs;
  f.q_seq_stride = f.k_seq_stride = f.v_seq_stride = f.out_seq_stride = head_dim;
  f.batch = batch, f.heads = heads, f.seq_q = f.seq_k = seq, f.head_dim = head_dim;
  f.scale = 1.f / std::sqrt(float(head_dim)), f.is_causal = causal;
  f.dtype = FlashDtype::kBFloat16;
  FlashBwdParams b{};
  b.q = q, b.k = k, b.v = v, b.out = o, b.grad_out = dout;
  b.lse = static_cast<const float*>(lse), b.delta = static_cast<float*>(delta);
  b.grad_q = gq, b.grad_k = gk, b.grad_v = gv;
  for (int64_t* s : {&b.q_batch_stride, &b.k_batch_stride, &b.v_batch_stride, &b.out_batch_stride,
                     &b.grad_out_batch_stride, &b.grad_q_batch_stride, &b.grad_k_batch_stride,
                     &b.grad_v_batch_stride})
    *s = bs;
  for (int64_t* s : {&b.q_head_stride, &b.k_head_stride, &b.v_head_stride, &b.out_head_stride,
                     &b.grad_out_head_stride, &b.grad_q_head_stride, &b.grad_k_head_stride,
                     &b.grad_v_head_stride})
    *s = hs;
  for (int64_t* s : {&b.q_seq_stride, &b.k_seq_stride, &b.v_seq_stride, &b.out_seq_stride,
                     &b.grad_out_seq_stride, &b.grad_q_seq_stride, &b.grad_k_seq_stride,
                     &b.grad_v_seq_stride})
    *s = head_dim;
  b.batch = batch, b.heads = heads, b.seq_q = b.seq_k = seq, b.head_dim = head_dim;
  b.scale = f.scale, b.is_causal = causal, b.dtype = FlashDtype::kBFloat16;

  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  // Median of `iterations` after two warm-up calls, each call timed alone.
  auto median_ms = [&](auto&& call, float& ms) -> bool {
    std::vector<float> times;
    for (int i = 0; i < iterations + 2; ++i) {
      CHECK_CUDA(cudaEventRecord(start));
      CHECK_CUDA(call());
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
      if (i >= 2) times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    ms = times[times.size() / 2];
    return true;
  };
  float fwd_ms = 0, bwd_ms = 0;
  const bool ok = median_ms([&] { return launch_flash_attention_forward(f, nullptr); }, fwd_ms) &&
                  median_ms([&] { return launch_flash_attention_backward(b, nullptr); }, bwd_ms);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!ok) return false;
  // FLOPs: 2 products of 2*Sq*Sk*D forward, 2.5x that backward; causal computes half.
  const double fwd_flops = 4.0 * batch * heads * double(seq) * seq * head_dim / (causal ? 2 : 1);
  const double bwd_flops = 2.5 * fwd_flops;
  printf("B%d H%d S%d D%-3d bf16 %-6s forward %8.3f ms %6.1f TFLOP/s   backward %8.3f ms %6.1f "
         "TFLOP/s   backward/forward %.2f\n",
         batch, heads, seq, head_dim, causal ? "causal" : "full", fwd_ms,
         fwd_flops / fwd_ms * 1e-9, bwd_ms, bwd_flops / bwd_ms * 1e-9, bwd_ms / fwd_ms);
  return true;
}

int run_timing() {
  bool ok = true;
  for (int head_dim : {64, 128})
    for (bool causal : {false, true}) ok = time_one(head_dim, causal, 10) && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    printf("no usable CUDA device; nothing was tested\n");
    return 2;
  }
  printf("device %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major < 8) {
    printf("the kernels need sm_80 or newer; nothing was tested\n");
    return 2;
  }
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) return run_timing();
  if (argc > 1) {
    printf("usage: %s [--time]\n", argv[0]);
    return 2;
  }
  return run_correctness();
}
