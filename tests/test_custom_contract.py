"""The custom kernels keep the variant contract: forward does what why_unavailable said it would."""

from __future__ import annotations

import pytest
import torch

from attn.custom_cpu import CustomCpuVariant
from attn.custom_cuda import CustomCudaVariant
from attn.custom_triton import CustomTritonVariant

VARIANTS = {v.name: v for v in (CustomCpuVariant(), CustomCudaVariant(), CustomTritonVariant())}
DEVICES = ["cpu", "meta", pytest.param("cuda", marks=pytest.mark.gpu)]


def _inputs(variant, device, dtype, *, requires_grad=False):
    """q, k, v the variant accepts (its dtype and head_dim), on the device."""
    head_dim = (variant.head_dims or (64,))[0]
    gen = torch.Generator().manual_seed(0)
    shapes = [(1, 2, 24, head_dim), (1, 2, 40, head_dim), (1, 2, 40, head_dim)]
    tensors = [torch.randn(s, generator=gen).to(device, dtype) for s in shapes]
    return [t.requires_grad_(requires_grad) for t in tensors]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", VARIANTS)
def test_forward_does_what_why_unavailable_said(name, device):
    variant = VARIANTS[name]
    for dtype in variant.dtypes:
        reason = variant.why_unavailable(device, dtype)
        q, k, v = _inputs(variant, device, dtype)
        if reason is None:
            out = variant.forward(q, k, v)
            assert out.shape == q.shape and out.dtype == dtype, dtype
        else:
            with pytest.raises(RuntimeError) as raised:
                variant.forward(q, k, v)
            assert str(raised.value) == f"{name}: {reason}", dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", VARIANTS)
def test_inputs_that_require_grad_get_a_backward_or_a_value_error(name, device):
    # Never an output that silently has no grad_fn.
    variant = VARIANTS[name]
    for dtype in variant.dtypes:
        q, k, v = _inputs(variant, device, dtype, requires_grad=True)
        try:
            out = variant.forward(q, k, v)
        except ValueError as refused:
            assert "requires grad" in str(refused)
            continue
        except RuntimeError:  # unavailable here: the contract test above checks the reason
            assert variant.why_unavailable(device, dtype) is not None
            continue
        assert out.grad_fn is not None, dtype
        out.sum().backward()
        assert all(t.grad is not None and t.grad.shape == t.shape for t in (q, k, v)), dtype
