"""
Profile one decode step with grouped-query attention
====================================================

Guess first. One new token per sequence attends to a KV cache of ``--cache-len`` keys, with 32
query heads sharing 8 KV heads (grouped-query attention). ``--gqa repeat`` copies each KV head for
its query heads with ``repeat_interleave``, then calls SDPA; ``--gqa enable_gqa`` hands SDPA the
cache as it is. Write down what the trace should contain for each: which ops copy the cache and
how big the copies are, how many ops and kernels a step launches, and what bounds the step's time
(the arithmetic, or reading K and V once).

Then look. This script is the whole recipe, top to bottom:

1. make inputs and warm up, so one-time work (allocations, kernel selection) stays out of the trace;
2. profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded forwards, each
   wrapped in ``record_function("attn_fwd")`` so it is easy to find in the trace;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python decode_attention.py --gqa repeat        # on the GPU when torch sees one, else the CPU
    python decode_attention.py --gqa enable_gqa --device cpu --cache-len 16384

With ``--gqa repeat`` it writes ``runs/decode_repeat_kv/trace.json.gz`` and
``runs/decode_repeat_kv/table.txt``. Copy it together with ``attn/decode.py`` (keep that relative
path: it holds the modules profiled here); torch and NumPy are all either file needs.
"""

import argparse
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.decode import GQA

NAMES = {"repeat": "decode_repeat_kv", "enable_gqa": "decode_enable_gqa"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile one GQA decode step under torch.profiler.")
    p.add_argument("--gqa", choices=NAMES, required=True, help="how K and V meet the query heads")
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # A serving-sized step on a GPU; a smaller batch and cache on a CPU.
    p.add_argument("--batch", type=positive, default=8 if gpu else 4)
    p.add_argument("--heads", type=positive, default=32, help="query heads")
    p.add_argument("--kv-heads", type=positive, default=8, help="K and V heads (divide --heads)")
    p.add_argument("--seq", type=positive, default=1, help="new tokens per sequence")
    p.add_argument("--cache-len", "--seq-k", type=positive, default=16384 if gpu else 4096,
                   dest="cache_len", help="keys in the KV cache, the new ones included")  # fmt: skip
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/decode_<gqa>/")
    args = p.parse_args()
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    if args.heads % args.kv_heads:
        p.error(f"--heads {args.heads} must be a multiple of --kv-heads {args.kv_heads}")
    if args.seq > args.cache_len:
        p.error(f"--seq {args.seq}: the cache ({args.cache_len}) holds the new tokens too")
    # A file or a read-only folder at --out: said now, not after minutes of profiling.
    here = next(d for d in (args.out, *args.out.parents) if d.exists())  # the rest is made later
    if not here.is_dir() or not os.access(here, os.W_OK):
        p.error(f"--out {args.out}: {here} is not a folder that can be written")
    return args


def main() -> None:
    args = parse_args()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(args.batch, heads, n, args.head_dim, generator=gen).to(
            args.device, DTYPES[args.dtype]
        )
        for heads, n in (
            (args.heads, args.seq),
            (args.kv_heads, args.cache_len),
            (args.kv_heads, args.cache_len),
        )
    )
    causal = not args.no_causal  # the new tokens are the last positions: aligned bottom-right
    attention = GQA[args.gqa]()
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

    folder = args.out / NAMES[args.gqa]
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
