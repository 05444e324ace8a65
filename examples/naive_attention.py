"""
Profile naive attention
=======================

Guess first. Naive attention is five steps: the scores Q Kᵀ, the scale, the causal mask, the
softmax and the product with V. Write down what the trace should contain before you run this:
how many ops per forward on the CPU, how many kernels on a GPU, and which step costs most.

Then look. This script is the whole recipe, top to bottom:

1. make inputs and warm up, so one-time work (allocations, kernel selection) stays out of the trace;
2. profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded forwards, each
   wrapped in ``record_function("attn_fwd")`` so it is easy to find in the trace;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python naive_attention.py                      # on the GPU when torch sees one, else the CPU
    python naive_attention.py --device cpu --seq 2048

It writes ``runs/naive/trace.json.gz`` and ``runs/naive/table.txt``. Copy it together with
``attn/naive.py`` (keep that relative path: it holds the module profiled here); torch and NumPy are
all either file needs.
"""

import argparse
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.naive import NaiveAttention, ScoresScaledAttention

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile naive attention under torch.profiler.")
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on a GPU; a smaller batch on a CPU, where one forward takes ~0.1 s.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="query (and key) length")
    p.add_argument("--seq-k", type=positive, help="key/value length (default: --seq)")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument(
        "--scale-scores",
        action="store_true",
        help="scale the scores, as the article does, not q (writes OUT/naive_scale_scores/)",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/naive/")
    args = p.parse_args()
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
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
    attention = ScoresScaledAttention() if args.scale_scores else NaiveAttention()
    name = "naive_scale_scores" if args.scale_scores else "naive"
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

    folder = args.out / name
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
