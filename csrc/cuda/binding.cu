// Torch glue for the flash kernels: check the tensors, fill FlashParams / FlashBwdParams, launch on
// torch's current stream, register as the CUDA implementations of attn::flash_attention_forward,
// attn::flash_attention_forward_lse and attn::flash_attention_backward (the schemas live in
// csrc/ops.cpp, in the CPU library loaded first). Built with flash_fwd.cu and flash_bwd.cu as a
// library of its own, only when torch has CUDA.
#include <cstdint>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "flash_bwd.h"
#include "flash_fwd.h"

namespace {

// The forward copies 16 bytes at a time: head_dim contiguous, 16-byte aligned base, other strides
// multiples of 8 elements. A dim of size 1 is never stepped over, so its stride does not matter.
bool kernel_can_read(const at::Tensor& t) {
  if (t.stride(3) != 1 || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d) {
    if (t.size(d) != 1 && t.stride(d) % 8 != 0) return false;
  }
  return true;
}

int64_t stride_or_zero(const at::Tensor& t, int d) { return t.size(d) == 1 ? 0 : t.stride(d); }

// The forward's one-line refusals, shared by all three ops; `op` names the op in the message.
void check_qkv(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK_VALUE(q.is_cuda() && k.is_cuda() && v.is_cuda(), op,
                    " (CUDA): q, k, v must be CUDA tensors, got ", q.device(), ", ", k.device(),
                    ", ", v.device());
  TORCH_CHECK_VALUE(q.device() == k.device() && q.device() == v.device(), op,
                    " (CUDA): q, k, v must be on one device, got ", q.device(), ", ", k.device(),
                    ", ", v.device());
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                    " (CUDA): q, k, v must be [batch, heads, seq, head_dim], got shapes ",
                    q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  const auto dtype = q.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kBFloat16 || dtype == at::kHalf, op,
                    " (CUDA): dtype must be bfloat16 or float16, got ", dtype);
  TORCH_CHECK_VALUE(k.scalar_type() == dtype && v.scalar_type() == dtype, op,
                    " (CUDA): q, k, v dtypes differ: ", dtype, ", ", k.scalar_type(), ", ",
                    v.scalar_type());
  const int64_t batch = q.size(0), heads = q.size(1), seq_q = q.size(2), head_dim = q.size(3),
                seq_k = k.size(2);
  TORCH_CHECK_VALUE(k.size(0) == batch && v.size(0) == batch && k.size(1) == heads &&
                        v.size(1) == heads && k.size(3) == head_dim && v.size(3) == head_dim &&
                        v.size(2) == seq_k,
                    op, " (CUDA): shapes do not fit: q ", q.sizes(), ", k ", k.sizes(), ", v ",
                    v.sizes());
  TORCH_CHECK_VALUE(head_dim == 64 || head_dim == 128, op, " (CUDA): head_dim ", head_dim,
                    " is not supported; use 64 or 128");
  TORCH_CHECK_VALUE(seq_k > 0, op, " (CUDA): k and v have no keys (seq 0)");
  TORCH_CHECK_VALUE(batch <= 65535 && heads <= 65535 && seq_q <= INT32_MAX && seq_k <= INT32_MAX,
                    op, " (CUDA): too large for the launch grid: batch ", batch, ", heads ", heads,
                    ", seq_q ", seq_q, ", seq_k ", seq_k);
}

FlashDtype flash_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? FlashDtype::kBFloat16 : FlashDtype::kFloat16;
}

// The forward, writing lse too when with_lse (else lse comes back undefined).
std::tuple<at::Tensor, at::Tensor> forward(const char* op, const at::Tensor& q_in,
                                           const at::Tensor& k_in, const at::Tensor& v_in,
                                           bool is_causal, double scale, bool with_lse) {
  check_qkv(op, q_in, k_in, v_in);
  // Strided views are fine as long as the kernel's 16-byte loads can read them; copy otherwise.
  const at::Tensor q = kernel_can_read(q_in) ? q_in : q_in.clone(at::MemoryFormat::Contiguous);
  const at::Tensor k = kernel_can_read(k_in) ? k_in : k_in.clone(at::MemoryFormat::Contiguous);
  const at::Tensor v = kernel_can_read(v_in) ? v_in : v_in.clone(at::MemoryFormat::Contiguous);

  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor lse;
  if (with_lse) lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  if (out.numel() == 0) return {out, lse};

  FlashParams p{};
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  p.lse = with_lse ? lse.data_ptr<float>() : nullptr;
  p.q_batch_stride = stride_or_zero(q, 0), p.q_head_stride = stride_or_zero(q, 1);
  p.q_seq_stride = stride_or_zero(q, 2);
  p.k_batch_stride = stride_or_zero(k, 0), p.k_head_stride = stride_or_zero(k, 1);
  p.k_seq_stride = stride_or_zero(k, 2);
  p.v_batch_stride = stride_or_zero(v, 0), p.v_head_stride = stride_or_zero(v, 1);
  p.v_seq_stride = stride_or_zero(v, 2);
  p.out_batch_stride = out.stride(0), p.out_head_stride = out.stride(1);
  p.out_seq_stride = out.stride(2);
  p.batch = static_cast<int>(q.size(0)), p.heads = static_cast<int>(q.size(1));
  p.seq_q = static_cast<int>(q.size(2)), p.seq_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(scale);
  p.is_causal = is_causal;
  p.dtype = flash_dtype(q);

  const cudaError_t err =
      launch_flash_attention_forward(p, c10::cuda::getCurrentCUDAStream(q.get_device()).stream());
  TORCH_CHECK(err == cudaSuccess, op, " (CUDA): launch failed: ", cudaGetErrorString(err));
  return {out, lse};
}

at::Tensor flash_attention_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, bool is_causal, double scale) {
  return std::get<0>(forward("flash_attention_forward", q, k, v, is_causal, scale, false));
}

std::tuple<at::Tensor, at::Tensor> flash_attention_forward_lse_cuda(const at::Tensor& q,
                                                                    const at::Tensor& k,
                                                                    const at::Tensor& v,
                                                                    bool is_causal, double scale) {
  return forward("flash_attention_forward_lse", q, k, v, is_causal, scale, true);
}

// grad_out and out must be q's shape, dtype and device; lse float32 [batch, heads, seq_q].
void check_backward_extras(const at::Tensor& q, const at::Tensor& grad_out, const at::Tensor& out,
                           const at::Tensor& lse) {
  constexpr const char* op = "flash_attention_backward";
  for (const auto& [name, t] : {std::pair{"grad_out", &grad_out}, std::pair{"out", &out}}) {
    TORCH_CHECK_VALUE(t->device() == q.device() && t->scalar_type() == q.scalar_type() &&
                          t->sizes() == q.sizes(),
                      op, " (CUDA): ", name, " must match q (", q.sizes(), ", ", q.scalar_type(),
                      ", ", q.device(), "), got ", t->sizes(), ", ", t->scalar_type(), ", ",
                      t->device());
  }
  TORCH_CHECK_VALUE(lse.device() == q.device() && lse.scalar_type() == at::kFloat &&
                        lse.dim() == 3 && lse.size(0) == q.size(0) &&
                        lse.size(1) == q.size(1) && lse.size(2) == q.size(2),
                    op, " (CUDA): lse must be float32 [batch, heads, seq_q] = [", q.size(0), ", ",
                    q.size(1), ", ", q.size(2), "] on ", q.device(), ", got ", lse.sizes(), ", ",
                    lse.scalar_type(), ", ", lse.device());
}

// t's [batch, heads, seq] element strides, 0 for a dim of size 1.
void set_strides(const at::Tensor& t, int64_t& batch, int64_t& head, int64_t& seq) {
  batch = stride_or_zero(t, 0), head = stride_or_zero(t, 1), seq = stride_or_zero(t, 2);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_cuda(
    const at::Tensor& grad_out_in, const at::Tensor& q_in, const at::Tensor& k_in,
    const at::Tensor& v_in, const at::Tensor& out_in, const at::Tensor& lse_in, bool is_causal,
    double scale) {
  check_qkv("flash_attention_backward", q_in, k_in, v_in);
  check_backward_extras(q_in, grad_out_in, out_in, lse_in);
  // The backward reads one element at a time: any strides, as long as head_dim is contiguous.
  auto inner_contiguous = [](const at::Tensor& t) {
    return t.stride(3) == 1 || t.size(3) == 1 ? t : t.contiguous();
  };
  const at::Tensor q = inner_contiguous(q_in), k = inner_contiguous(k_in),
                   v = inner_contiguous(v_in), grad_out = inner_contiguous(grad_out_in),
                   out = inner_contiguous(out_in);
  const at::Tensor lse = lse_in.contiguous();

  const c10::cuda::CUDAGuard guard(q.device());
  const auto dense = at::MemoryFormat::Contiguous;
  at::Tensor grad_q = at::empty(q.sizes(), q.options().memory_format(dense));
  at::Tensor grad_k = at::empty(k.sizes(), k.options().memory_format(dense));
  at::Tensor grad_v = at::empty(v.sizes(), v.options().memory_format(dense));
  if (grad_k.numel() == 0) return {grad_q, grad_k, grad_v};
  at::Tensor delta = at::empty(lse.sizes(), lse.options());  // D = rowsum(dO * O), fp32

  FlashBwdParams p{};
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr();
  p.out = out.data_ptr(), p.grad_out = grad_out.data_ptr();
  p.lse = lse.data_ptr<float>(), p.delta = delta.data_ptr<float>();
  p.grad_q = grad_q.data_ptr(), p.grad_k = grad_k.data_ptr(), p.grad_v = grad_v.data_ptr();
  set_strides(q, p.q_batch_stride, p.q_head_stride, p.q_seq_stride);
  set_strides(k, p.k_batch_stride, p.k_head_stride, p.k_seq_stride);
  set_strides(v, p.v_batch_stride, p.v_head_stride, p.v_seq_stride);
  set_strides(out, p.out_batch_stride, p.out_head_stride, p.out_seq_stride);
  set_strides(grad_out, p.grad_out_batch_stride, p.grad_out_head_stride, p.grad_out_seq_stride);
  set_strides(grad_q, p.grad_q_batch_stride, p.grad_q_head_stride, p.grad_q_seq_stride);
  set_strides(grad_k, p.grad_k_batch_stride, p.grad_k_head_stride, p.grad_k_seq_stride);
  set_strides(grad_v, p.grad_v_batch_stride, p.grad_v_head_stride, p.grad_v_seq_stride);
  p.batch = static_cast<int>(q.size(0)), p.heads = static_cast<int>(q.size(1));
  p.seq_q = static_cast<int>(q.size(2)), p.seq_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(scale);
  p.is_causal = is_causal;
  p.dtype = flash_dtype(q);

  const cudaError_t err =
      launch_flash_attention_backward(p, c10::cuda::getCurrentCUDAStream(q.get_device()).stream());
  TORCH_CHECK(err == cudaSuccess, "flash_attention_backward (CUDA): launch failed: ",
              cudaGetErrorString(err));
  return {grad_q, grad_k, grad_v};
}

}  // namespace

TORCH_LIBRARY_IMPL(attn, CUDA, m) {
  m.impl("flash_attention_forward", &flash_attention_forward_cuda);
  m.impl("flash_attention_forward_lse", &flash_attention_forward_lse_cuda);
  m.impl("flash_attention_backward", &flash_attention_backward_cuda);
}
