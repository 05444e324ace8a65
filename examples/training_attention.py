"""
Profile a training step: the forward, a loss, the backward
=========================================================

Guess first. Training runs the forward, then a backward that needs some of what the forward
computed, so autograd keeps those tensors alive in between. Write down, for ``--impl naive`` and
``--impl sdpa_flash``: which tensors autograd keeps, how many bytes, which ops the backward runs, and
whether the backward costs more or less time than the forward.

Then look. This script is the whole recipe, top to bottom:

1. make inputs that require grad, and warm up; one more step, outside the trace, lists what autograd
   saves for the backward (``torch.autograd.graph.saved_tensors_hooks`` sees each saved tensor);
2. profile five steps with ``schedule(wait=1, warmup=1, active=3)``: in each, the forward in
   ``record_function("attn_fwd")``, a loss, and the backward in ``record_function("attn_bwd")``;
3. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
4. export the Chrome trace (open it at https://ui.perfetto.dev) and print the ``key_averages()``
   table, sorted by the device's time.

Run it::

    python training_attention.py                       # --impl naive; on the GPU if torch sees one
    python training_attention.py --impl sdpa_flash --device cpu --seq 2048

With ``--impl naive`` it writes ``runs/train_naive/trace.json.gz``, ``runs/train_naive/table.txt``
and ``runs/train_naive/saved.json`` (what autograd saved). Copy it together with the module of the
attention you train, kept at its relative path: ``attn/naive.py`` (naive), ``attn/inplace.py``
(inplace), ``attn/sdpa.py`` (sdpa_math, sdpa_flash) or ``attn/flex.py`` with ``attn/inductor.py``
(flex); torch is all they need. ``--impl custom_cpu`` trains through our C++ op and its fused
backward kernel, ``--impl custom_cpu_recompute`` through the same forward with a backward of PyTorch
ops, and ``--impl custom_triton`` (on a GPU) through our Triton kernel and its backward; they come
with the package (``pip install .`` in a checkout).
"""

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

IMPLS = (
    "naive",
    "inplace",
    "sdpa_math",
    "sdpa_flash",
    "custom_cpu",
    "custom_cpu_recompute",
    "custom_triton",
    "flex",
)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile a training step of attention.")
    p.add_argument(
        "--impl",
        choices=IMPLS,
        default="naive",
        help="the attention to train through (default: naive)",
    )
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on a GPU; a smaller batch on a CPU, where one step takes ~0.5 s.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="query (and key) length")
    p.add_argument("--seq-k", type=positive, help="key/value length (default: --seq)")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/train_IMPL/")
    args = p.parse_args()
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    # A file or a read-only folder at --out: said now, not after minutes of profiling.
    here = next(d for d in (args.out, *args.out.parents) if d.exists())  # the rest is made later
    if not here.is_dir() or not os.access(here, os.W_OK):
        p.error(f"--out {args.out}: {here} is not a folder that can be written")
    return args


def attention(impl: str):
    """The attention to train through. Each import is made here, so that a copy of this script
    needs only the one module it trains."""
    if impl == "naive":
        from attn.naive import NaiveAttention

        return NaiveAttention()
    if impl == "inplace":
        from attn.inplace import InPlaceAttention

        return InPlaceAttention()
    if impl in ("sdpa_math", "sdpa_flash"):
        from attn.sdpa import SdpaAttention

        return SdpaAttention(impl.removeprefix("sdpa_"))
    if impl == "flex":
        from attn.flex import FlexAttention

        return FlexAttention()
    if impl == "custom_triton":  # our Triton kernel: needs the installed package and a GPU
        from attn.custom_triton import CustomTritonVariant

        return CustomTritonVariant().forward
    from attn.custom_cpu import CustomCpuVariant  # our C++ op: needs the installed package

    # custom_cpu: the fused C++ backward; custom_cpu_recompute: a backward of PyTorch ops.
    return CustomCpuVariant("recompute" if impl.endswith("_recompute") else "fused").forward


# --8<-- [start:step]
def train_step(attend, q, k, v, causal: bool, saved: list | None = None) -> None:
    """The forward in attn_fwd, a loss, the backward in attn_bwd. Given a list, `saved` gets what
    autograd saves for the backward: one row per storage (a view shares its tensor's storage)."""
    seen = set()

    def pack(t):
        storage = t.untyped_storage()
        if saved is not None and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            dtype = str(t.dtype).removeprefix("torch.")
            saved.append({"shape": list(t.shape), "dtype": dtype, "bytes": storage.nbytes()})
        return t  # kept as it is: the hook only looks

    with record_function("attn_fwd"), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = attend(q, k, v, is_causal=causal)
    loss = out.float().square().mean()  # any scalar will do
    with record_function("attn_bwd"):
        loss.backward()
    for t in (q, k, v):
        t.grad = None  # an optimizer would use them here, then drop them


# --8<-- [end:step]


def main() -> None:
    args = parse_args()
    gen = torch.Generator().manual_seed(0)
    seq_k = args.seq_k or args.seq
    q, k, v = (
        torch.randn(args.batch, args.heads, n, args.head_dim, generator=gen)
        .to(args.device, DTYPES[args.dtype])
        .requires_grad_()  # leaves of the graph: the backward computes their gradients
        for n in (args.seq, seq_k, seq_k)
    )
    causal = not args.no_causal
    attend = attention(args.impl)
    on_gpu = args.device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    try:  # a first step: an attention that cannot train here says why, in one line
        train_step(attend, q, k, v, causal)
    except (ValueError, RuntimeError) as e:
        sys.exit(f"training_attention.py: --impl {args.impl} cannot train here: {e}")

    # --8<-- [start:recipe]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    for _ in range(3):  # warm-up: first calls allocate, pick kernels, fill caches
        train_step(attend, q, k, v, causal)
    saved = []
    train_step(attend, q, k, v, causal, saved)  # outside the trace: what autograd keeps
    sync()
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=True,  # input shapes of every op (the table and the trace show them)
        profile_memory=True,  # allocations and frees, for the peak memory of a step
    ) as prof:
        for _ in range(5):
            train_step(attend, q, k, v, causal)  # forward in attn_fwd, backward in attn_bwd
            sync()  # the GPU work of this step ends inside this step
            prof.step()
    # --8<-- [end:recipe]

    folder = args.out / f"train_{args.impl}"
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".trace-{os.getpid()}.json.gz"  # .gz: the exporter compresses it
    prof.export_chrome_trace(str(scratch))
    os.replace(scratch, folder / "trace.json.gz")  # a reader never sees half a trace
    table = prof.key_averages().table(
        sort_by="device_time_total" if on_gpu else "cpu_time_total", row_limit=15
    )
    (folder / "table.txt").write_text(table + "\n")
    (folder / "saved.json").write_text(json.dumps(saved, indent=1) + "\n")
    print(table)
    total = sum(row["bytes"] for row in saved)
    print(f"saved for backward: {total / 2**20:.1f} MiB in {len(saved)} tensors (saved.json)")
    print(f"trace: {folder / 'trace.json.gz'} (open it at https://ui.perfetto.dev)")


if __name__ == "__main__":
    main()
