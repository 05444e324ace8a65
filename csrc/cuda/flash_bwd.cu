// FlashAttention-2-style backward: bf16/fp16 in and out, fp32 everywhere in between, nothing of
// size [seq_q, seq_k] ever stored. Three kernels, the shape of FlashAttention-2's Algorithm 2 and
// of Triton's 06-fused-attention.py:
//
//   1. delta:  D_i = rowsum(dO_i * O_i), one warp per query row (fp32 workspace).
//   2. dK/dV:  one block per (batch, head, key block); K_j, V_j stay in shared memory while the
//              block walks the query blocks, recomputing S = Q K^T * scale, P = exp(S - lse),
//              dV += P^T dO, dP = dO V^T, dS = P * (dP - D), dK += dS^T Q * scale.
//   3. dQ:     one block per (batch, head, query block), walking the key blocks:
//              dQ += dS K * scale, with S, P, dP, dS recomputed the same way.
//
// dQ gets a kernel of its own rather than fp32 atomics from the dK/dV kernel: each dQ element is
// then summed by one thread in a fixed order, so gradients are deterministic (bit-identical from
// run to run) and no fp32 dQ buffer or conversion pass is needed. The price is computing S and dP
// twice (the backward does 5 tile products where the atomic form does 4), as Triton's tutorial
// accepts for the same reason.
//
// Correctness first: the tile products run on CUDA cores in fp32 from shared memory (each thread
// reuses one shared-memory read for 4 to 16 outputs). What is left for speed, in order of payoff:
// mma.sync tensor-core products fed by ldmatrix (as flash_fwd.cu does), keeping the tiles in 16
// bits in shared memory, cp.async double buffering of the next Q/dO (or K/V) tile, larger tiles
// (64 x 64, or 128 x 64 on sm_90), and on sm_90 wgmma with TMA loads.
#include "flash_bwd.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_common.h"

namespace {

constexpr int kBlock = 32;  // query rows per query tile, keys per key tile
constexpr int kThreads = 256;
constexpr int kLanes = 32;
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory rows are padded by one float: the 32 lanes of a warp reading 32 different rows
// at one column then hit 32 different banks.
template <int D>
constexpr int kRow = D + 1;
constexpr int kPRow = kBlock + 1;
static_assert(kBlock * kBlock % kThreads == 0 && kThreads % kBlock == 0, "P tile split evenly");

template <int D>
constexpr int smem_bytes() {
  static_assert(kThreads % D == 0, "a thread owns one column of the dK, dV, dQ tiles");
  // Q, dO, K, V tiles; P and dS tiles; lse and delta of the query tile.
  return (4 * kBlock * kRow<D> + 2 * kBlock * kPRow + 2 * kBlock) * int(sizeof(float));
}

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float(float x) {
  return __float2half_rn(x);
}

// The shared-memory tiles one block works on.
template <int D>
struct Tiles {
  float* q;      // [kBlock][kRow]: query rows m0..
  float* dout;   // [kBlock][kRow]
  float* k;      // [kBlock][kRow]: keys n0..
  float* v;      // [kBlock][kRow]
  float* p;      // [kBlock][kPRow]: P[i][j] for query m0+i, key n0+j
  float* ds;     // [kBlock][kPRow]: dS, same layout
  float* lse;    // [kBlock]: the query rows' lse in log2 units
  float* delta;  // [kBlock]
  __device__ explicit Tiles(float* smem)
      : q(smem),
        dout(q + kBlock * kRow<D>),
        k(dout + kBlock * kRow<D>),
        v(k + kBlock * kRow<D>),
        p(v + kBlock * kRow<D>),
        ds(p + kBlock * kPRow),
        lse(ds + kBlock * kPRow),
        delta(lse + kBlock) {}
};

// Copy kBlock rows (rows_valid of them exist) of one head into a padded fp32 tile; rows past the
// end become zeros. Consecutive threads read consecutive elements of a row.
template <typename T, int D>
__device__ __forceinline__ void load_rows(float* dst, const T* src, int64_t seq_stride,
                                          int rows_valid) {
  for (int idx = threadIdx.x; idx < kBlock * D; idx += kThreads) {
    const int r = idx / D, e = idx % D;
    dst[r * kRow<D> + e] = r < rows_valid ? to_float(src[r * seq_stride + e]) : 0.f;
  }
}

// lse (to log2 units, so P is one exp2f) and delta of query rows m0.., zeros past seq_q.
__device__ __forceinline__ void load_row_stats(float* lse_s, float* delta_s, const float* lse,
                                               const float* delta, int m0, int seq_q) {
  if (threadIdx.x < kBlock) {
    const int row = m0 + threadIdx.x;
    lse_s[threadIdx.x] = row < seq_q ? lse[row] * kLog2e : 0.f;
    delta_s[threadIdx.x] = row < seq_q ? delta[row] : 0.f;
  }
}

// P = exp(S * scale - lse) and dS = P * (dP - delta) for the tile pair (m0, n0), from the four
// tiles in shared memory. Zero where the query or key does not exist, or (causal) the key comes
// after the query: those entries then add nothing to any gradient.
//
// Thread (warp w, lane l) computes key j = l for the query rows w, w + 8, w + 16, w + 24: it
// reads K[j][e] and V[j][e] once for four rows (different banks across the warp thanks to the
// padding) while Q and dO rows are broadcasts.
template <int D>
__device__ __forceinline__ void probs_and_score_grads(const Tiles<D>& t, int m0, int n0,
                                                      const FlashBwdParams& p, float scale_log2) {
  constexpr int kRowsPerThread = kBlock * kBlock / kThreads;
  constexpr int kRowStep = kThreads / kBlock;
  const int j = threadIdx.x % kBlock, i0 = threadIdx.x / kBlock;
  const float* kj = t.k + j * kRow<D>;
  const float* vj = t.v + j * kRow<D>;
  float s[kRowsPerThread], dp[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) s[r] = dp[r] = 0.f;
#pragma unroll 8
  for (int e = 0; e < D; ++e) {
    const float ke = kj[e], ve = vj[e];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = i0 + r * kRowStep;
      s[r] = fmaf(t.q[i * kRow<D> + e], ke, s[r]);
      dp[r] = fmaf(t.dout[i * kRow<D> + e], ve, dp[r]);
    }
  }
  const int key = n0 + j;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = i0 + r * kRowStep, query = m0 + i;
    float pij = 0.f, dsij = 0.f;
    if (query < p.seq_q && key < p.seq_k && !(p.is_causal && key > query)) {
      pij = exp2f(s[r] * scale_log2 - t.lse[i]);
      dsij = pij * (dp[r] - t.delta[i]);
    }
    t.p[i * kPRow + j] = pij;
    t.ds[i * kPRow + j] = dsij;
  }
}

// ---- 1. delta = rowsum(dO * O) ---------------------------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_bwd_delta_kernel(const FlashBwdParams p) {
  constexpr int kRowsPerBlock = kThreads / kLanes;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  if (row >= int64_t(p.batch) * p.heads * p.seq_q) return;  // whole warps leave together
  const int i = int(row % p.seq_q);
  const int head = int(row / p.seq_q % p.heads), batch = int(row / p.seq_q / p.heads);
  const T* o = static_cast<const T*>(p.out) + batch * p.out_batch_stride +
               head * p.out_head_stride + i * p.out_seq_stride;
  const T* dout = static_cast<const T*>(p.grad_out) + batch * p.grad_out_batch_stride +
                  head * p.grad_out_head_stride + i * p.grad_out_seq_stride;
  float sum = 0.f;
  for (int e = lane; e < D; e += kLanes) sum = fmaf(to_float(o[e]), to_float(dout[e]), sum);
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffff, sum, offset);
  }
  if (lane == 0) p.delta[row] = sum;
}

// ---- 2. dK and dV, one key block per thread block --------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_bwd_dkdv_kernel(const FlashBwdParams p) {
  extern __shared__ float smem[];
  const Tiles<D> t(smem);
  const int n0 = blockIdx.x * kBlock, head = blockIdx.y, batch = blockIdx.z;
  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const T* dout = static_cast<const T*>(p.grad_out) + batch * p.grad_out_batch_stride +
                  head * p.grad_out_head_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + head * p.k_head_stride +
               n0 * p.k_seq_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + head * p.v_head_stride +
               n0 * p.v_seq_stride;
  const int64_t stats = (int64_t(batch) * p.heads + head) * p.seq_q;  // into lse and delta
  const float scale_log2 = p.scale * kLog2e;

  load_rows<T, D>(t.k, k, p.k_seq_stride, p.seq_k - n0);
  load_rows<T, D>(t.v, v, p.v_seq_stride, p.seq_k - n0);

  // Thread tid accumulates column e = tid % D of key rows tid / D, tid / D + kThreads / D, ...
  // of the [kBlock][D] dK and dV tiles: one read of dO[i][e] and Q[i][e] serves all its rows,
  // and P[i][j], dS[i][j] are broadcasts (a warp's 32 lanes share j).
  constexpr int kPerThread = kBlock * D / kThreads;
  constexpr int kJStep = kThreads / D;
  const int e = threadIdx.x % D, j0 = threadIdx.x / D;
  float dk[kPerThread], dv[kPerThread];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) dk[r] = dv[r] = 0.f;

  // Causal: queries before n0 see none of these keys, so the walk starts at n0's query block.
  // (A key block that no query sees, when seq_k > seq_q, walks nothing and writes zeros.)
  const int m_begin = p.is_causal ? n0 / kBlock * kBlock : 0;
  for (int m0 = m_begin; m0 < p.seq_q; m0 += kBlock) {
    __syncthreads();  // every warp is done with the previous query tile
    load_rows<T, D>(t.q, q + m0 * p.q_seq_stride, p.q_seq_stride, p.seq_q - m0);
    load_rows<T, D>(t.dout, dout + m0 * p.grad_out_seq_stride, p.grad_out_seq_stride,
                    p.seq_q - m0);
    load_row_stats(t.lse, t.delta, p.lse + stats, p.delta + stats, m0, p.seq_q);
    __syncthreads();
    probs_and_score_grads<D>(t, m0, n0, p, scale_log2);
    __syncthreads();
#pragma unroll 4
    for (int i = 0; i < kBlock; ++i) {
      const float doe = t.dout[i * kRow<D> + e], qe = t.q[i * kRow<D> + e];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int j = j0 + r * kJStep;
        dv[r] = fmaf(t.p[i * kPRow + j], doe, dv[r]);
        dk[r] = fmaf(t.ds[i * kPRow + j], qe, dk[r]);
      }
    }
  }

  T* grad_k = static_cast<T*>(p.grad_k) + batch * p.grad_k_batch_stride +
              head * p.grad_k_head_stride;
  T* grad_v = static_cast<T*>(p.grad_v) + batch * p.grad_v_batch_stride +
              head * p.grad_v_head_stride;
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int key = n0 + j0 + r * kJStep;
    if (key < p.seq_k) {
      grad_k[key * p.grad_k_seq_stride + e] = from_float<T>(dk[r] * p.scale);
      grad_v[key * p.grad_v_seq_stride + e] = from_float<T>(dv[r]);
    }
  }
}

// ---- 3. dQ, one query block per thread block -------------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_bwd_dq_kernel(const FlashBwdParams p) {
  extern __shared__ float smem[];
  const Tiles<D> t(smem);
  const int m0 = blockIdx.x * kBlock, head = blockIdx.y, batch = blockIdx.z;
  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride +
               m0 * p.q_seq_stride;
  const T* dout = static_cast<const T*>(p.grad_out) + batch * p.grad_out_batch_stride +
                  head * p.grad_out_head_stride + m0 * p.grad_out_seq_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + head * p.v_head_stride;
  const int64_t stats = (int64_t(batch) * p.heads + head) * p.seq_q;
  const float scale_log2 = p.scale * kLog2e;

  load_rows<T, D>(t.q, q, p.q_seq_stride, p.seq_q - m0);
  load_rows<T, D>(t.dout, dout, p.grad_out_seq_stride, p.seq_q - m0);
  load_row_stats(t.lse, t.delta, p.lse + stats, p.delta + stats, m0, p.seq_q);

  // As dK/dV: thread tid owns column e = tid % D of query rows tid / D + r * kThreads / D.
  constexpr int kPerThread = kBlock * D / kThreads;
  constexpr int kIStep = kThreads / D;
  const int e = threadIdx.x % D, i0 = threadIdx.x / D;
  float dq[kPerThread];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) dq[r] = 0.f;

  // Causal: key blocks that start after this block's last query are never loaded.
  const int n_end = p.is_causal ? min(p.seq_k, m0 + kBlock) : p.seq_k;
  for (int n0 = 0; n0 < n_end; n0 += kBlock) {
    __syncthreads();  // every warp is done with the previous key tile
    load_rows<T, D>(t.k, k + n0 * p.k_seq_stride, p.k_seq_stride, p.seq_k - n0);
    load_rows<T, D>(t.v, v + n0 * p.v_seq_stride, p.v_seq_stride, p.seq_k - n0);
    __syncthreads();
    probs_and_score_grads<D>(t, m0, n0, p, scale_log2);
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < kBlock; ++j) {
      const float ke = t.k[j * kRow<D> + e];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        dq[r] = fmaf(t.ds[(i0 + r * kIStep) * kPRow + j], ke, dq[r]);
      }
    }
  }

  T* grad_q = static_cast<T*>(p.grad_q) + batch * p.grad_q_batch_stride +
              head * p.grad_q_head_stride;
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int query = m0 + i0 + r * kIStep;
    if (query < p.seq_q) grad_q[query * p.grad_q_seq_stride + e] = from_float<T>(dq[r] * p.scale);
  }
}

template <typename T, int D>
cudaError_t launch(const FlashBwdParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();  // 42,240 bytes for D=64, 74,752 for D=128
  cudaError_t err = cudaSuccess;
  if (p.seq_q > 0) {
    const int64_t rows = int64_t(p.batch) * p.heads * p.seq_q;
    constexpr int kRowsPerBlock = kThreads / kLanes;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    flash_bwd_delta_kernel<T, D><<<unsigned(blocks), kThreads, 0, stream>>>(p);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }
  // dK/dV runs even when seq_q is 0: it then writes zeros, the gradient of keys nobody sees.
  if ((err = flash::allow_smem(flash_bwd_dkdv_kernel<T, D>, kSmem)) != cudaSuccess) return err;
  const dim3 dkdv_grid((p.seq_k + kBlock - 1) / kBlock, p.heads, p.batch);
  flash_bwd_dkdv_kernel<T, D><<<dkdv_grid, kThreads, kSmem, stream>>>(p);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  if (p.seq_q > 0) {
    if ((err = flash::allow_smem(flash_bwd_dq_kernel<T, D>, kSmem)) != cudaSuccess) return err;
    const dim3 dq_grid((p.seq_q + kBlock - 1) / kBlock, p.heads, p.batch);
    flash_bwd_dq_kernel<T, D><<<dq_grid, kThreads, kSmem, stream>>>(p);
    err = cudaGetLastError();
  }
  return err;
}

}  // namespace

cudaError_t launch_flash_attention_backward(const FlashBwdParams& p, cudaStream_t stream) {
  if (flash::negative_size(p)) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.heads == 0 || (p.seq_q == 0 && p.seq_k == 0)) return cudaSuccess;
  if (flash::unlaunchable(p)) return cudaErrorInvalidValue;  // as the forward refuses
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.grad_k == nullptr ||
      p.grad_v == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (p.seq_q > 0 && (p.out == nullptr || p.grad_out == nullptr || p.lse == nullptr ||
                      p.delta == nullptr || p.grad_q == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return flash::dispatch(p.dtype, p.head_dim, [&](auto kernel) {
    using K = decltype(kernel);
    return launch<typename K::Element, K::kHeadDim>(p, stream);
  });
}
