// What the forward's and the backward's launchers share: the sizes they refuse before any kernel
// is queued, the opt-in to more shared memory, and the dtypes and head_dims they have kernels for.
//
// Included by flash_fwd.cu and flash_bwd.cu; plain CUDA C++, no torch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "flash_fwd.h"

namespace flash {

constexpr int kMaxGridYZ = 65535;  // CUDA's limit on a grid's y and z: the heads and the batch

// A size no launcher takes (FlashParams and FlashBwdParams alike).
template <typename Params>
bool negative_size(const Params& p) {
  return p.batch < 0 || p.heads < 0 || p.seq_q < 0 || p.seq_k < 0;
}

// Sizes no kernel runs with, once there is work to do: softmax over no keys is undefined, and a
// grid holds at most kMaxGridYZ batches and heads.
template <typename Params>
bool unlaunchable(const Params& p) {
  return p.seq_k == 0 || p.batch > kMaxGridYZ || p.heads > kMaxGridYZ;
}

// Above 48 KiB of dynamic shared memory a kernel must opt in to it.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// One instantiation of a launcher's kernels: its element type and head_dim.
template <typename T, int D>
struct Instance {
  using Element = T;
  static constexpr int kHeadDim = D;
};

// run(Instance<T, D>{}) for the dtype and head_dim given (bf16 or fp16, 64 or 128), and its
// result; cudaErrorInvalidValue for any other.
template <typename Run>
cudaError_t dispatch(FlashDtype dtype, int head_dim, Run&& run) {
  const bool bf16 = dtype == FlashDtype::kBFloat16;
  if (!bf16 && dtype != FlashDtype::kFloat16) return cudaErrorInvalidValue;
  switch (head_dim) {
    case 64:
      return bf16 ? run(Instance<__nv_bfloat16, 64>{}) : run(Instance<__half, 64>{});
    case 128:
      return bf16 ? run(Instance<__nv_bfloat16, 128>{}) : run(Instance<__half, 128>{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace flash
