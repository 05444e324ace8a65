"""Our Triton kernel's forward and backward against SDPA flash's, on one NVIDIA GPU, in bf16.

    python benchmarks/triton_attention.py                      # B4 H16 S4096, head_dim 64 and 128
    python benchmarks/triton_attention.py --seq 1024 --rounds 5

For each head_dim, causal and not: triton.testing.do_bench's median of the forward (as training
runs it, saving what the backward needs) and of the backward (`out.backward(dout)`), our kernel and
SDPA pinned to flash interleaved round by round, the median of the rounds kept. TFLOP/s count the
forward as 4 * B * H * Sq * Sk * D (two matmuls), halved when causal, and the backward as 2.5 times
that (five matmuls to the forward's two); "÷ flash" is our time over flash's. Before timing, the
largest difference between our output and gradients and flash's is printed beside each row: a
fast wrong kernel is no result. Speeds belong here, not in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # attn/ from a checkout
from attn.custom_triton import CustomTritonVariant, triton, triton_flash_attention  # noqa: E402

DTYPE = torch.bfloat16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The shape to time: batch, heads, one length for queries and keys, the head_dims."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument(
        "--head-dims", type=int, nargs="+", default=[64, 128], choices=CustomTritonVariant.head_dims
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per impl")
    args = parser.parse_args(argv)
    for name in ("batch", "heads", "seq", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def forward_flops(args: argparse.Namespace, head_dim: int, is_causal: bool) -> float:
    """FLOPs of one forward: QK^T and PV, 2 * Sq * Sk * D each per (batch, head)."""
    flops = 4.0 * args.batch * args.heads * args.seq * args.seq * head_dim
    return flops / 2 if is_causal else flops


def _ours(q, k, v, is_causal):
    return triton_flash_attention(q, k, v, is_causal=is_causal)  # the kernel, not the checks


def _flash(q, k, v, is_causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


IMPLS: dict[str, Callable] = {"custom_triton": _ours, "sdpa_flash": _flash}


def _time(attention, q, k, v, dout, is_causal) -> tuple[float, float]:
    """Median ms of one forward and of one backward through `attention`."""
    from triton.testing import do_bench

    forward_ms = do_bench(lambda: attention(q, k, v, is_causal))
    out = attention(q, k, v, is_causal)
    backward_ms = do_bench(lambda: out.backward(dout, retain_graph=True), grad_to_none=[q, k, v])
    return forward_ms, backward_ms


def _largest_difference(q, k, v, dout, is_causal) -> float:
    """The largest |ours - flash| over the output and the three gradients."""
    results = []
    for attention in IMPLS.values():
        q.grad = k.grad = v.grad = None
        out = attention(q, k, v, is_causal)
        out.backward(dout)
        results.append([out.detach(), q.grad, k.grad, v.grad])
    q.grad = k.grad = v.grad = None
    return max((a.float() - b.float()).abs().max().item() for a, b in zip(*results, strict=True))


def bench_case(
    args: argparse.Namespace, head_dim: int, is_causal: bool, device: str = "cuda"
) -> list[str]:
    """The table's rows for one head_dim and mask: one per implementation."""
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (args.batch, args.heads, args.seq, head_dim)
    q, k, v, dout = (
        torch.randn(shape, device=device, dtype=DTYPE, generator=gen) for _ in range(4)
    )
    for t in (q, k, v):
        t.requires_grad_()
    difference = _largest_difference(q, k, v, dout, is_causal)
    times = {name: [] for name in IMPLS}
    for _ in range(args.rounds):  # interleaved: a clock or a neighbour's drift hits both alike
        for name, attention in IMPLS.items():
            times[name].append(_time(attention, q, k, v, dout, is_causal))
    fwd_flops = forward_flops(args, head_dim, is_causal)
    median = {n: [statistics.median(p) for p in zip(*ts, strict=True)] for n, ts in times.items()}
    rows = []
    for name, (fwd_ms, bwd_ms) in median.items():
        flash_fwd, flash_bwd = median["sdpa_flash"]
        rows.append(
            f"{head_dim:>4} {'causal' if is_causal else 'full':>6} {name:>13} "
            f"{fwd_ms:8.3f} {fwd_flops / fwd_ms / 1e9:7.1f} {fwd_ms / flash_fwd:6.2f}x "
            f"{bwd_ms:8.3f} {2.5 * fwd_flops / bwd_ms / 1e9:7.1f} {bwd_ms / flash_bwd:6.2f}x"
            + (f" {difference:9.2e}" if name == "custom_triton" else "")
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the table; 2 where there is no GPU to time on."""
    args = parse_args(argv)
    if reason := CustomTritonVariant().why_unavailable("cuda", DTYPE):
        print(f"benchmarks/triton_attention.py needs a GPU custom_triton runs on: {reason}")
        return 2
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"bf16, batch {args.batch}, heads {args.heads}, seq {args.seq}, "
        f"median of {args.rounds} interleaved rounds"
    )
    print("   D   mask          impl   fwd ms  TFLOP/s ÷flash   bwd ms  TFLOP/s ÷flash  max|Δ|")
    for head_dim in args.head_dims:
        for is_causal in (True, False):
            print("\n".join(bench_case(args, head_dim, is_causal)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
