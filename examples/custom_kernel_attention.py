"""
Profile our own attention kernels: a C++ op, a CUDA kernel, a Triton kernel
============================================================================

Guess first. Each kernel does the whole attention in one call, tile by tile, with an online
softmax, so the score matrix never reaches memory. Write down what one forward should look like
in the trace: how many ops on the CPU, how many kernels on a GPU, and what name they carry.

Then look. This script is the whole recipe, top to bottom:

1. make inputs and warm up, so one-time work (allocations, kernel selection) stays out of the trace;
2. profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded forwards, each
   wrapped in ``record_function("attn_fwd")`` so it is easy to find in the trace;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python custom_kernel_attention.py --impl cpu --device cpu   # the C++ op
    python custom_kernel_attention.py --impl triton              # needs a GPU and triton

With ``--impl cpu`` it writes ``runs/custom_cpu/trace.json.gz`` and
``runs/custom_cpu/table.txt``. The kernels come with the package: ``pip install .`` in a checkout
(the C++ and CUDA ops are compiled on first use, about a minute, and cached).
"""

import argparse
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.custom_cpu import CustomCpuVariant
from attn.custom_cuda import CustomCudaVariant
from attn.custom_triton import CustomTritonVariant

KERNELS = {"cpu": CustomCpuVariant, "cuda": CustomCudaVariant, "triton": CustomTritonVariant}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile one of our kernels under torch.profiler.")
    p.add_argument("--impl", choices=KERNELS, required=True)
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on a GPU; a smaller batch on a CPU, where one forward takes ~0.1 s.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="query (and key) length")
    p.add_argument("--seq-k", type=positive, help="key/value length (default: --seq)")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/custom_IMPL/")
    args = p.parse_args()
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    reason = KERNELS[args.impl]().why_unavailable(args.device, DTYPES[args.dtype])
    if reason is not None:
        p.error(f"--impl {args.impl} cannot run here: {reason}")
    # A file or a read-only folder at --out: said now, not after minutes of profiling.
    here = next(d for d in (args.out, *args.out.parents) if d.exists())  # the rest is made later
    if not here.is_dir() or not os.access(here, os.W_OK):
        p.error(f"--out {args.out}: {here} is not a folder that can be written")
    return args


def main() -> None:
    args = parse_args()
    gen = torch.Generator().manual_seed(0)
    seq_k = args.seq_k or args.seq
    q, k, v = (
        torch.randn(args.batch, args.heads, n, args.head_dim, generator=gen).to(
            args.device, DTYPES[args.dtype]
        )
        for n in (args.seq, seq_k, seq_k)
    )
    causal = not args.no_causal
    attention = KERNELS[args.impl]().forward
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    # --8<-- [start:recipe]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with torch.no_grad():
        for _ in range(3):  # warm-up: first calls allocate, pick kernels, fill caches
            attention(q, k, v, is_causal=causal)
        sync()
        with profile(
            activities=activities,
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
            record_shapes=True,  # input shapes of every op (the table and the trace show them)
            profile_memory=True,  # allocations and frees, for the peak memory of a forward
        ) as prof:
            for _ in range(5):
                with record_function("attn_fwd"):  # one named range per forward
                    attention(q, k, v, is_causal=causal)
                sync()  # the GPU work of this step ends inside this step
                prof.step()

    folder = args.out / f"custom_{args.impl}"
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".trace-{os.getpid()}.json.gz"  # .gz: the exporter compresses it
    prof.export_chrome_trace(str(scratch))
    os.replace(scratch, folder / "trace.json.gz")  # a reader never sees half a trace
    table = prof.key_averages().table(
        sort_by="device_time_total" if on_gpu else "cpu_time_total", row_limit=15
    )
    (folder / "table.txt").write_text(table + "\n")
    print(table)
    # --8<-- [end:recipe]
    print(f"trace: {folder / 'trace.json.gz'} (open it at https://ui.perfetto.dev)")


if __name__ == "__main__":
    main()
