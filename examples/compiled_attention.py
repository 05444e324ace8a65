"""
Profile attention under torch.compile
=====================================

Guess first. torch.compile hands the naive module's graph to Inductor, which fuses what it can and
pattern-matches what it knows. Does it turn your attention into SDPA? Write down your guess for
both ways of writing the causal mask: ``--mask masked_fill`` (the naive module: a boolean mask,
``scores.masked_fill(mask, -inf)``) and ``--mask additive`` (a float mask of 0 and -inf added to
the scores). Which ops should remain per forward, and what should the generated kernels be called?

Then look. This script is the whole recipe, top to bottom:

1. make inputs, compile the module and time its first calls (the compile), so that it stays out of
   the trace;
2. warm up, then profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded
   forwards, each wrapped in ``record_function("attn_fwd")`` so it is easy to find in the trace;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python compiled_attention.py --mask masked_fill     # on the GPU when torch sees one, else the CPU
    python compiled_attention.py --mask additive --device cpu
    TORCH_LOGS=recompiles python compiled_attention.py --mask masked_fill   # why it compiles twice

With ``--mask masked_fill`` it writes ``runs/compiled_naive/trace.json.gz`` and
``runs/compiled_naive/table.txt`` (``--mask additive``: ``runs/compiled_additive/``). Copy it
together with ``attn/compiled.py``, ``attn/naive.py`` and ``attn/inductor.py`` (keep those relative
paths: they hold the modules compiled here); torch (and a C++ compiler on CPU, triton on a GPU) is all they need. A second
run compiles much faster: Inductor caches what it built (``TORCHINDUCTOR_CACHE_DIR``).
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch._inductor.config
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.compiled import MASKS

NAMES = {"masked_fill": "compiled_naive", "additive": "compiled_additive"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile compiled attention under torch.profiler.")
    p.add_argument("--mask", choices=MASKS, required=True, help="how the causal mask is written")
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on a GPU; a smaller batch on a CPU, where one forward takes ~0.1 s.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="query (and key) length")
    p.add_argument("--seq-k", type=positive, help="key/value length (default: --seq)")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/compiled_MASK/")
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
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    # --8<-- [start:compile]
    if not on_gpu:
        # On CPU the compiled code is one opaque "## Call CompiledFxGraph ##" row: the C++ kernels
        # Inductor generates record nothing. This makes each of them a row (and a trace event).
        # Set it before the first call: it changes the code that is generated. On a GPU the Triton
        # kernels are device events anyway.
        torch._inductor.config.cpp.enable_kernel_profile = True
    attention = torch.compile(MASKS[args.mask]())  # nothing is compiled until the first call

    # The first call traces forward into a graph, generates C++ (Triton on a GPU) and builds it.
    # NaiveAttention compiles again on its second call: the first stored the mask it built, and
    # Dynamo guards on that module state (TORCH_LOGS=recompiles says so).
    seconds = {}
    with torch.no_grad():
        for call in ("first", "second"):
            start = time.perf_counter()
            attention(q, k, v, is_causal=causal)
            sync()
            seconds[call] = time.perf_counter() - start
            print(f"{call} call: {seconds[call]:.2f} s")
    # --8<-- [end:compile]

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

    folder = args.out / NAMES[args.mask]
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
