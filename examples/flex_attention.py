"""
Profile FlexAttention
=====================

Guess first. FlexAttention takes the mask as a Python function (a ``mask_mod``) and, under
torch.compile, generates one attention kernel around it. A block mask, built once per shape, tells
that kernel which tiles of the score matrix hold no visible score at all, so it can skip them.
Write down what one forward should look like in the trace (how many ops, how many kernels, and
what they are called) for ``--mask causal``, ``--mask sliding_window`` (each query sees itself and
the 255 keys before it) and ``--mask document`` (packed sequences: documents of random lengths side
by side, each query sees only earlier keys of its own document). Which should be fastest?

Then look. This script is the whole recipe, top to bottom:

1. make inputs and the mask, compile and time the first calls (the compile), so that it stays out
   of the trace;
2. warm up, then profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded
   forwards, each wrapped in ``record_function("attn_fwd")`` so it is easy to find in the trace;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python flex_attention.py --mask causal             # on the GPU when torch sees one, else the CPU
    python flex_attention.py --mask sliding_window --device cpu --seq 2048

With ``--mask causal`` it writes ``runs/flex_causal/trace.json.gz`` and
``runs/flex_causal/table.txt`` (``runs/flex_sliding_window/``, ``runs/flex_document/`` for the
others). Copy it together with ``attn/flex.py`` and ``attn/inductor.py`` (keep those relative
paths: they hold the module profiled here); torch (with a C++ compiler and an AVX2 CPU, or triton
and a GPU) is all these files need. On CPU, torch 2.13 compiles FlexAttention for inference only.
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch._inductor.config
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.flex import FlexAttention, same_document, sliding_window

MASKS = ("causal", "sliding_window", "document")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile FlexAttention under torch.profiler.")
    p.add_argument("--mask", choices=MASKS, required=True, help="the mask_mod to compile")
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on a GPU; a smaller batch on a CPU, where one forward takes ~0.1 s.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="query (and key) length")
    p.add_argument("--seq-k", type=positive, help="key/value length (default: --seq)")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="drop the causal part of the mask")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/flex_MASK/")
    args = p.parse_args()
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    if args.mask == "document" and args.seq_k not in (None, args.seq):
        p.error("--mask document packs one sequence: queries and keys are the same tokens")
    # A file or a read-only folder at --out: said now, not after minutes of profiling.
    here = next(d for d in (args.out, *args.out.parents) if d.exists())  # the rest is made later
    if not here.is_dir() or not os.access(here, os.W_OK):
        p.error(f"--out {args.out}: {here} is not a folder that can be written")
    return args


def random_documents(seq: int, gen: torch.Generator, count: int = 4) -> torch.Tensor:
    """Document id of each of `seq` tokens: `count` documents of random lengths, side by side."""
    count = min(count, seq)
    starts = (torch.randperm(seq - 1, generator=gen)[: count - 1] + 1).sort().values
    first_token = torch.zeros(seq, dtype=torch.int32)
    first_token[starts] = 1
    return first_token.cumsum(0, dtype=torch.int32)  # 0 0 0 1 1 2 2 2 2 3 ...


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
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if not on_gpu:
        # On CPU the compiled code is one opaque "## Call CompiledFxGraph ##" row: the C++ kernel
        # Inductor generates records nothing. This makes it a row (and a trace event). Set it
        # before the first call: it changes the code that is generated.
        torch._inductor.config.cpp.enable_kernel_profile = True
    if args.mask == "causal":
        attention = FlexAttention()  # with is_causal, the causal mask_mod alone
    elif args.mask == "sliding_window":
        attention = FlexAttention(sliding_window(256))
    else:
        ids = random_documents(args.seq, gen).to(args.device)
        print(f"document lengths: {torch.bincount(ids).tolist()}")
        attention = FlexAttention(same_document(ids))

    # The first call builds the block mask, then compiles flex_attention with the mask_mod inside.
    seconds = {}
    with torch.no_grad():
        for call in ("first", "second"):
            start = time.perf_counter()
            attention(q, k, v, is_causal=causal)
            sync()
            seconds[call] = time.perf_counter() - start
            print(f"{call} call: {seconds[call]:.2f} s")

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

    folder = args.out / f"flex_{args.mask}"
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
    (folder / "compile.json").write_text(json.dumps(seconds) + "\n")  # the calls timed above
    print(f"trace: {folder / 'trace.json.gz'} (open it at https://ui.perfetto.dev)")


if __name__ == "__main__":
    main()
