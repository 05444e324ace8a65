"""Our CUDA and Triton kernels against SDPA's flash and cuDNN backends on one GPU, forward and backward.

    python benchmarks/gpu_kernels.py [--seq 4096] [--batch 4] [--heads 16] [--json OUT]

Kernel time, not Python's: `triton.testing.do_bench` (CUDA events around many back-to-back launches,
its median), bf16, head_dim 64 and 128, causal and not. The backward is timed alone: one forward, then
`torch.autograd.grad` over its graph again and again (retain_graph). FLOPs count the forward as
4*B*H*Sq*Sk*D (half of it causal) and the backward as 2.5 times that; each rate is also given as a
share of the GPU's measured bf16 peak (a large torch.mm). Outputs and gradients are checked against
SDPA flash's before anything is timed: a wrong kernel gets no time.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attn
from attn.profiling.peaks import gpu_peaks

Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def sdpa(backend: SDPBackend) -> Forward:
    def forward(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return forward


def variant(name: str) -> Forward:
    chosen = attn.get_variant(name)
    return lambda q, k, v, causal: chosen.forward(q, k, v, is_causal=causal)


IMPLS: dict[str, Forward] = {
    "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
    "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    "custom_cuda": variant("custom_cuda"),
    "custom_triton": variant("custom_triton"),
}


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def measure(forward: Forward, q, k, v, do, causal, reference) -> dict:
    """One implementation at one shape: its errors against the reference, then its two times."""
    import triton.testing

    row: dict = {}
    with torch.no_grad():  # the forward as inference runs it: no graph, nothing saved
        qi, ki, vi = (t.detach() for t in (q, k, v))
        row["out_error"] = relative_error(forward(qi, ki, vi, causal), reference["out"])
        row["fwd_ms"] = triton.testing.do_bench(
            lambda: forward(qi, ki, vi, causal), warmup=25, rep=100
        )
    try:
        out = forward(q, k, v, causal)
        grads = torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    except Exception as error:  # noqa: BLE001 - a kernel with no backward says why, the rest go on
        row["bwd_problem"] = str(error).splitlines()[0][:200]
        return row
    row["grad_error"] = max(
        relative_error(g, r) for g, r in zip(grads, reference["grads"], strict=True)
    )
    if row["grad_error"] > 5e-2 or not math.isfinite(row["grad_error"]):
        row["bwd_problem"] = f"gradients off by {row['grad_error']:.2e}: not timed"
        return row
    row["bwd_ms"] = triton.testing.do_bench(
        lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), warmup=25, rep=100
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--json", help="write every row here as JSON")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to time", file=sys.stderr)
        return 2
    peak = gpu_peaks("cuda")["bf16_tflops"]
    print(f"{torch.cuda.get_device_name()}: measured bf16 peak (torch.mm) {peak:.0f} TFLOP/s")
    rows = []
    for head_dim in (64, 128):
        for causal in (False, True):
            shape = (args.batch, args.heads, args.seq, head_dim)
            gen = torch.Generator(device="cuda").manual_seed(head_dim + causal)
            q, k, v, do = (
                torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
                for _ in range(4)
            )
            for t in (q, k, v):
                t.requires_grad_(True)
            ref_out = IMPLS["sdpa_flash"](q, k, v, causal)
            reference = {"out": ref_out, "grads": torch.autograd.grad(ref_out, (q, k, v), do)}
            flops = (
                4 * args.batch * args.heads * args.seq * args.seq * head_dim / (2 if causal else 1)
            )
            for name, forward in IMPLS.items():
                try:
                    row = measure(forward, q, k, v, do, causal, reference)
                except Exception as error:  # noqa: BLE001 - one line per refusal, the rest go on
                    row = {"problem": str(error).splitlines()[0][:200]}
                row.update(impl=name, head_dim=head_dim, causal=causal, shape=list(shape))
                for part, work in (("fwd", flops), ("bwd", 2.5 * flops)):
                    if f"{part}_ms" in row:
                        row[f"{part}_tflops"] = work / row[f"{part}_ms"] / 1e9
                        row[f"{part}_share_of_peak"] = row[f"{part}_tflops"] / peak
                rows.append(row)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peak_bf16_tflops": peak, "rows": rows}, f, indent=1)
    return 0


def print_table(rows: list[dict]) -> None:
    """Each implementation's times, rates, share of the peak and ratio to sdpa_flash's time."""
    flash = {(r["head_dim"], r["causal"]): r for r in rows if r["impl"] == "sdpa_flash"}
    print(f"{'impl':14} {'D':>3} {'causal':6} {'fwd ms':>8} {'TF/s':>5} {'peak':>5} {'/flash':>6}"
          f" {'bwd ms':>8} {'TF/s':>5} {'peak':>5} {'/flash':>6}  errors")  # fmt: skip
    for r in rows:
        base = flash[(r["head_dim"], r["causal"])]
        cells = []
        for part in ("fwd", "bwd"):
            ms = r.get(f"{part}_ms")
            if ms is None:
                cells.append(f"{'n/a':>8} {'':>5} {'':>5} {'':>6}")
                continue
            ratio = ms / base[f"{part}_ms"] if base.get(f"{part}_ms") else float("nan")
            cells.append(
                f"{ms:8.3f} {r[f'{part}_tflops']:5.0f} {r[f'{part}_share_of_peak']:5.0%} {ratio:6.2f}"
            )
        note = r.get("problem") or r.get("bwd_problem") or ""
        errors = f"out {r.get('out_error', float('nan')):.1e} grad {r.get('grad_error', float('nan')):.1e}"
        print(
            f"{r['impl']:14} {r['head_dim']:>3} {r['causal']!s:6} {cells[0]} {cells[1]}  {errors} {note}"
        )


if __name__ == "__main__":
    sys.exit(main())
