// FlashAttention-2-style forward kernel: bf16/fp16 in, fp32 accumulation, tensor cores via
// mma.sync.m16n8k16 fed by ldmatrix, K/V tiles double-buffered in shared memory with cp.async,
// online softmax in registers. No torch headers: binding.cu is the glue.
//
// One thread block computes kBlockM = 64 query rows of one (batch, head); each of its 4 warps owns
// 16 of those rows for the whole kernel, so softmax statistics never leave a warp.
#include "flash_fwd.h"

#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_common.h"

namespace {

constexpr int kBlockM = 64;  // query rows per block: 4 warps x 16 rows (one mma M)
constexpr int kBlockN = 64;  // keys per K/V tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// Each shared-memory row is padded by 8 elements (16 bytes): the 8 rows one ldmatrix phase reads
// then start 4 banks apart and cover all 32 banks, instead of all hitting the same bank.
constexpr int kPad = 8;

template <int D>
constexpr int smem_bytes(int elem_bytes) {
  return (kBlockM + 4 * kBlockN) * (D + kPad) * elem_bytes;  // Q + 2 buffers each of K and V
}

// ---- thin wrappers over the PTX the kernel uses ----------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy that bypasses registers; src_bytes = 0 writes 16 zero bytes, which
// is how rows past the end of the sequence are zero-filled.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>  // wait until at most N committed groups are still in flight
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// receives matrix i in the mma fragment layout (lane l: row l/4, columns 2*(l%4), 2*(l%4)+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// Same, transposed: lane l receives rows 2*(l%4), 2*(l%4)+1 of column l/4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

template <typename T>
struct Mma;

// d += a (16x16, row-major) * b (16x8, column-major), fp32 accumulators.
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Two floats -> one register holding two bf16; `lo` (the lower column) in the low half.
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, sizeof(u));
    return u;
  }
};

template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, sizeof(u));
    return u;
  }
};

// Queue the copy of a 64 x D tile (rows `row_stride` elements apart) into padded shared memory;
// rows >= rows_valid are zero-filled, never read.
template <typename T, int D>
__device__ __forceinline__ void load_tile(uint32_t dst, const T* src, int64_t row_stride,
                                          int rows_valid, int tid) {
  constexpr int kChunksPerRow = D * sizeof(T) / 16;  // 16-byte chunks
  constexpr int kChunks = 64 * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = i * kThreads + tid;  // consecutive threads read consecutive 16 bytes
    const int row = chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * 8;
    const bool valid = row < rows_valid;
    const T* from = valid ? src + row * row_stride + col : src;  // never form an OOB address
    cp_async_16(dst + (row * (D + kPad) + col) * sizeof(T), from, valid);
  }
}

// ---- the kernel ------------------------------------------------------------------------------

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_fwd_kernel(const FlashParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async and bf16 mma need sm_80; the Python side refuses older GPUs first
#else
  constexpr int kRow = D + kPad;  // shared-memory row length in elements
  extern __shared__ __align__(16) unsigned char smem[];
  T* q_smem = reinterpret_cast<T*>(smem);
  T* k_smem = q_smem + kBlockM * kRow;  // [2][kBlockN][kRow]
  T* v_smem = k_smem + 2 * kBlockN * kRow;

  // Causal blocks near the end of the sequence do the most work; launching them first keeps the
  // GPU busy at the tail.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride +
               m0 * p.q_seq_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + head * p.v_head_stride;
  T* out = static_cast<T*>(p.out) + batch * p.out_batch_stride + head * p.out_head_stride +
           m0 * p.out_seq_stride;

  // Causal: key tiles that start after this block's last query are never loaded.
  const int n_end = p.is_causal ? min(p.seq_k, m0 + kBlockM) : p.seq_k;
  const int n_tiles = (n_end + kBlockN - 1) / kBlockN;

  // Multiplying scores by scale*log2(e) lets the softmax use exp2f, a single MUFU instruction.
  const float scale_log2 = p.scale * 1.4426950408889634f;

  // Queue Q, then the first K/V tile, as two cp.async groups.
  load_tile<T, D>(smem_addr(q_smem), q, p.q_seq_stride, p.seq_q - m0, tid);
  cp_async_commit();
  load_tile<T, D>(smem_addr(k_smem), k, p.k_seq_stride, p.seq_k, tid);
  load_tile<T, D>(smem_addr(v_smem), v, p.v_seq_stride, p.seq_k, tid);
  cp_async_commit();

  // This warp's 16 Q rows stay in registers as mma A fragments: one per 16 columns of head_dim.
  cp_async_wait<1>();  // the Q group has landed (K/V tile 0 may still be in flight)
  __syncthreads();
  uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    // lanes 0-15 address rows 0-15 at column 0, lanes 16-31 the same rows at column 8: the four
    // 8x8 matrices come back as a0 (rows 0-7), a1 (rows 8-15), a2, a3 (the right halves).
    const int row = warp * 16 + (lane % 16);
    const int col = kk * 16 + (lane / 16) * 8;
    ldmatrix_x4(q_frag[kk], smem_addr(q_smem + row * kRow + col));
  }

  // Thread (lane) holds rows r0 = lane/4 and r1 = lane/4 + 8 of the warp's 16; the other three
  // lanes of its quad hold the rest of those rows' columns.
  float acc[D / 8][4];  // O accumulator, mma C layout: acc[n][0..1] row r0, acc[n][2..3] row r1
#pragma unroll
  for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // running max of scaled scores (log2 units)
  float row_sum[2] = {0.f, 0.f};              // running sum of exp2, this thread's columns only

  // --8<-- [start:core]
  for (int t = 0; t < n_tiles; ++t) {
    const int n0 = t * kBlockN;
    const int buf = t % 2;
    // Double buffering: queue tile t+1 into the other buffer, then wait only for tile t.
    if (t + 1 < n_tiles) {
      const int n1 = n0 + kBlockN;
      const int other = (buf ^ 1) * kBlockN * kRow;
      load_tile<T, D>(smem_addr(k_smem + other), k + n1 * p.k_seq_stride, p.k_seq_stride,
                      p.seq_k - n1, tid);
      load_tile<T, D>(smem_addr(v_smem + other), v + n1 * p.v_seq_stride, p.v_seq_stride,
                      p.seq_k - n1, tid);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t, copied by all threads, is visible to all threads
    const T* k_tile = k_smem + buf * kBlockN * kRow;
    const T* v_tile = v_smem + buf * kBlockN * kRow;

    // S = Q K^T for this warp's 16 rows x 64 keys: 8 mma tiles of 16x8, fp32.
    float s[kBlockN / 8][4];
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int n = 0; n < kBlockN / 8; n += 2) {
        // K is stored [key][dim], which is already B's column-major layout: no transpose.
        // Matrices: keys n..n+7 x dims 0-7 / 8-15 (b0, b1 of tile n), then keys n+8..n+15.
        uint32_t b[4];
        const int key = n * 8 + (lane % 8) + (lane / 16) * 8;
        const int col = kk * 16 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(b, smem_addr(k_tile + key * kRow + col));
        Mma<T>::run(s[n], q_frag[kk], b[0], b[1]);
        Mma<T>::run(s[n + 1], q_frag[kk], b[2], b[3]);
      }
    }

    // Scale into log2 units, then hide keys past the end and (causal) keys after the query.
    // Only the diagonal tile and the last tile need the element-wise test.
    const bool needs_mask = n0 + kBlockN > p.seq_k || (p.is_causal && n0 + kBlockN - 1 > m0);
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[n][i] *= scale_log2;
        if (needs_mask) {
          const int query = m0 + warp * 16 + lane / 4 + (i / 2) * 8;
          const int key = n0 + n * 8 + (lane % 4) * 2 + (i % 2);
          if (key >= p.seq_k || (p.is_causal && key > query)) s[n][i] = -INFINITY;
        }
      }
    }

    // Online softmax, per row: new max over the quad, rescale what was accumulated so far.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_max[r];
#pragma unroll
      for (int n = 0; n < kBlockN / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));  // the 4 lanes of a quad share a row
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      // A row with nothing visible yet keeps max -inf; subtract 0 then so -inf - -inf gives no NaN.
      const float base = mx == -INFINITY ? 0.f : mx;
      const float alpha = exp2f(row_max[r] - base);  // 0 on the first tile: exp2(-inf)
      row_max[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kBlockN / 8; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] - base);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - base);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * alpha + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * r] *= alpha;
        acc[n][2 * r + 1] *= alpha;
      }
    }

    // --8<-- [start:pv]
    // O += P V. P's C-layout registers are already A fragments once packed to 16 bits: keys
    // 16j..16j+15 are score tiles 2j (a0, a1) and 2j+1 (a2, a3). No trip through shared memory.
#pragma unroll
    for (int j = 0; j < kBlockN / 16; ++j) {
      const uint32_t a[4] = {Mma<T>::pack(s[2 * j][0], s[2 * j][1]),
                             Mma<T>::pack(s[2 * j][2], s[2 * j][3]),
                             Mma<T>::pack(s[2 * j + 1][0], s[2 * j + 1][1]),
                             Mma<T>::pack(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        // V is stored [key][dim] but B wants keys along its k dimension: load transposed.
        // Matrices: keys 0-7 / 8-15 x dims n..n+7 (b0, b1 of tile n), then dims n+8..n+15.
        uint32_t b[4];
        const int key = j * 16 + (lane % 16);
        const int col = n * 8 + (lane / 16) * 8;
        ldmatrix_x4_trans(b, smem_addr(v_tile + key * kRow + col));
        Mma<T>::run(acc[n], a, b[0], b[1]);
        Mma<T>::run(acc[n + 1], a, b[2], b[3]);
      }
    }
    // --8<-- [end:pv]
    __syncthreads();  // all warps are done with this buffer before iteration t+1 refills it
  }
  // --8<-- [end:core]

  // Finish the row sums across the quad, normalise, and store rows that exist.
  float* lse = p.lse == nullptr
                   ? nullptr
                   : p.lse + (int64_t(batch) * p.heads + head) * p.seq_q + m0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int row = warp * 16 + lane / 4 + r * 8;
    if (lse != nullptr && lane % 4 == 0 && m0 + row < p.seq_q) {
      // ln(sum_j e^{s_j}) = (max + log2(sum of exp2 below the max)) * ln 2, the max in log2
      // units. A row that sees no key gets +inf, so the backward's exp(s - lse) is 0 there.
      lse[row] = sum > 0.f ? (row_max[r] + log2f(sum)) * 0.6931471805599453f : INFINITY;
    }
    if (m0 + row < p.seq_q) {
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const int col = n * 8 + (lane % 4) * 2;
        const uint32_t packed = Mma<T>::pack(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv);
        *reinterpret_cast<uint32_t*>(out + row * p.out_seq_stride + col) = packed;
      }
    }
  }
#endif
}

template <typename T, int D>
cudaError_t launch(const FlashParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>(sizeof(T));  // 46,080 bytes for D=64, 87,040 for D=128
  auto kernel = flash_fwd_kernel<T, D>;
  const cudaError_t err = flash::allow_smem(kernel, kSmem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.seq_q + kBlockM - 1) / kBlockM, p.heads, p.batch);
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

bool aligned(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

bool strides_ok(int64_t batch, int64_t head, int64_t seq) {
  return batch % 8 == 0 && head % 8 == 0 && seq % 8 == 0;
}

}  // namespace

cudaError_t launch_flash_attention_forward(const FlashParams& p, cudaStream_t stream) {
  if (flash::negative_size(p)) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.heads == 0 || p.seq_q == 0) return cudaSuccess;  // nothing to write
  if (flash::unlaunchable(p)) return cudaErrorInvalidValue;
  if (!aligned(p.q) || !aligned(p.k) || !aligned(p.v) || !aligned(p.out)) {
    return cudaErrorInvalidValue;
  }
  if (!strides_ok(p.q_batch_stride, p.q_head_stride, p.q_seq_stride) ||
      !strides_ok(p.k_batch_stride, p.k_head_stride, p.k_seq_stride) ||
      !strides_ok(p.v_batch_stride, p.v_head_stride, p.v_seq_stride) ||
      !strides_ok(p.out_batch_stride, p.out_head_stride, p.out_seq_stride)) {
    return cudaErrorInvalidValue;
  }
  return flash::dispatch(p.dtype, p.head_dim, [&](auto kernel) {
    using K = decltype(kernel);
    return launch<typename K::Element, K::kHeadDim>(p, stream);
  });
}
