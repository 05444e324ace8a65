// Torch glue for the flash forward kernel: check the tensors, fill FlashParams, launch on torch's
// current stream, register as the CUDA implementation of attn::flash_attention_forward (the schema
// lives in csrc/ops.cpp, in the CPU library loaded first). Built with flash_fwd.cu as a library of
// its own, only when torch has CUDA.
#include <cstdint>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "flash_fwd.h"

namespace {

// The kernel copies 16 bytes at a time: head_dim contiguous, 16-byte aligned base, other strides
// multiples of 8 elements. A dim of size 1 is never stepped over, so its stride does not matter.
bool kernel_can_read(const at::Tensor& t) {
  if (t.stride(3) != 1 || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d) {
    if (t.size(d) != 1 && t.stride(d) % 8 != 0) return false;
  }
  return true;
}

int64_t stride_or_zero(const at::Tensor& t, int d) { return t.size(d) == 1 ? 0 : t.stride(d); }

at::Tensor flash_attention_forward_cuda(const at::Tensor& q_in, const at::Tensor& k_in,
                                        const at::Tensor& v_in, bool is_causal, double scale) {
  TORCH_CHECK_VALUE(q_in.is_cuda() && k_in.is_cuda() && v_in.is_cuda(),
                    "flash_attention_forward (CUDA): q, k, v must be CUDA tensors, got ",
                    q_in.device(), ", ", k_in.device(), ", ", v_in.device());
  TORCH_CHECK_VALUE(q_in.device() == k_in.device() && q_in.device() == v_in.device(),
                    "flash_attention_forward (CUDA): q, k, v must be on one device, got ",
                    q_in.device(), ", ", k_in.device(), ", ", v_in.device());
  TORCH_CHECK_VALUE(q_in.dim() == 4 && k_in.dim() == 4 && v_in.dim() == 4,
                    "flash_attention_forward (CUDA): q, k, v must be [batch, heads, seq, "
                    "head_dim], got shapes ",
                    q_in.sizes(), ", ", k_in.sizes(), ", ", v_in.sizes());
  const auto dtype = q_in.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kBFloat16 || dtype == at::kHalf,
                    "flash_attention_forward (CUDA): dtype must be bfloat16 or float16, got ",
                    dtype);
  TORCH_CHECK_VALUE(k_in.scalar_type() == dtype && v_in.scalar_type() == dtype,
                    "flash_attention_forward (CUDA): q, k, v dtypes differ: ", dtype, ", ",
                    k_in.scalar_type(), ", ", v_in.scalar_type());
  const int64_t batch = q_in.size(0), heads = q_in.size(1), seq_q = q_in.size(2),
                head_dim = q_in.size(3), seq_k = k_in.size(2);
  TORCH_CHECK_VALUE(k_in.size(0) == batch && v_in.size(0) == batch && k_in.size(1) == heads &&
                        v_in.size(1) == heads && k_in.size(3) == head_dim &&
                        v_in.size(3) == head_dim && v_in.size(2) == seq_k,
                    "flash_attention_forward (CUDA): shapes do not fit: q ", q_in.sizes(), ", k ",
                    k_in.sizes(), ", v ", v_in.sizes());
  TORCH_CHECK_VALUE(head_dim == 64 || head_dim == 128,
                    "flash_attention_forward (CUDA): head_dim ", head_dim,
                    " is not supported; use 64 or 128");
  TORCH_CHECK_VALUE(seq_k > 0, "flash_attention_forward (CUDA): k and v have no keys (seq 0)");
  TORCH_CHECK_VALUE(batch <= 65535 && heads <= 65535 && seq_q <= INT32_MAX && seq_k <= INT32_MAX,
                    "flash_attention_forward (CUDA): too large for the launch grid: batch ", batch,
                    ", heads ", heads, ", seq_q ", seq_q, ", seq_k ", seq_k);

  // Strided views are fine as long as the kernel's 16-byte loads can read them; copy otherwise.
  const at::Tensor q = kernel_can_read(q_in) ? q_in : q_in.clone(at::MemoryFormat::Contiguous);
  const at::Tensor k = kernel_can_read(k_in) ? k_in : k_in.clone(at::MemoryFormat::Contiguous);
  const at::Tensor v = kernel_can_read(v_in) ? v_in : v_in.clone(at::MemoryFormat::Contiguous);

  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;

  FlashParams p{};
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  p.q_batch_stride = stride_or_zero(q, 0), p.q_head_stride = stride_or_zero(q, 1);
  p.q_seq_stride = stride_or_zero(q, 2);
  p.k_batch_stride = stride_or_zero(k, 0), p.k_head_stride = stride_or_zero(k, 1);
  p.k_seq_stride = stride_or_zero(k, 2);
  p.v_batch_stride = stride_or_zero(v, 0), p.v_head_stride = stride_or_zero(v, 1);
  p.v_seq_stride = stride_or_zero(v, 2);
  p.out_batch_stride = out.stride(0), p.out_head_stride = out.stride(1);
  p.out_seq_stride = out.stride(2);
  p.batch = static_cast<int>(batch), p.heads = static_cast<int>(heads);
  p.seq_q = static_cast<int>(seq_q), p.seq_k = static_cast<int>(seq_k);
  p.head_dim = static_cast<int>(head_dim);
  p.scale = static_cast<float>(scale);
  p.is_causal = is_causal;
  p.dtype = dtype == at::kBFloat16 ? FlashDtype::kBFloat16 : FlashDtype::kFloat16;

  const cudaError_t err =
      launch_flash_attention_forward(p, c10::cuda::getCurrentCUDAStream(q.get_device()).stream());
  TORCH_CHECK(err == cudaSuccess, "flash_attention_forward (CUDA): launch failed: ",
              cudaGetErrorString(err));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(attn, CUDA, m) {
  m.impl("flash_attention_forward", &flash_attention_forward_cuda);
}
