"""Our ring attention (attn/ring.py) on NCCL beside torch's own context parallelism, on this GPU's ranks.

    python benchmarks/context_parallel.py [--world N] [--seq 8192]

Starts N ranks here (default: one per GPU torch sees), each joins an NCCL group, and every rank runs
the same causal attention three ways on its shard of one sequence: `RingAttention` contiguous and
zigzag, and `torch.distributed.tensor.experimental.context_parallel` (torch's ring, round-robin load
balancing) around `F.scaled_dot_product_attention`. Each output is gathered and compared with SDPA
on the whole sequence; each is timed with CUDA events (median of 20 after warm-up). NCCL needs a GPU
per rank: asked for more ranks than GPUs (the default on one GPU is two), it first tries them on the
GPUs there are (rank r on GPU r % count), says what NCCL answered if it refuses, and then runs one
rank per GPU; a ring of one checks the code path and its cost, not the overlap of sends with compute.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from attn.ring import RingAttention, gather, shard


def timed(fn, repeats: int = 20) -> float:
    """Median milliseconds of fn() over CUDA events, after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rank_main(rank: int, world: int, seq: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        run_rank(rank, world, seq)
    finally:
        dist.destroy_process_group()


def run_rank(rank: int, world: int, seq: int) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)  # the same full inputs on every rank
    full = [
        torch.randn(2, 16, seq, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
        for _ in range(3)
    ]
    reference = F.scaled_dot_product_attention(*full, is_causal=True)
    results = {}
    for sharding in ("contiguous", "zigzag"):
        ring = RingAttention(sharding)
        q, k, v = (shard(t, rank, world, sharding) for t in full)
        out = gather(ring(q, k, v, is_causal=True), sharding)
        results[f"ring_{sharding}"] = (
            out,
            timed(lambda r=ring, a=(q, k, v): r(*a, is_causal=True)),
        )
    results["torch_context_parallel"] = torch_context_parallel(full, world)
    if rank == 0:
        print(f"world {world} on {torch.cuda.get_device_name()}, B2 H16 S{seq} D128 bf16 causal")
        for name, (out, ms) in results.items():
            error = ((out.float() - reference.float()).norm() / reference.float().norm()).item()
            print(f"{name:24} {ms:8.3f} ms   error against SDPA on the whole sequence {error:.1e}")


def torch_context_parallel(full: list[torch.Tensor], world: int) -> tuple[torch.Tensor, float]:
    """torch's own: buffers sharded in place along the sequence inside the context, SDPA patched."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import context_parallel_unshard

    mesh = init_device_mesh("cuda", (world,))
    q, k, v = (t.clone() for t in full)
    with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    (out,) = context_parallel_unshard(mesh, [out], [2])
    return out, ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, help="ranks (default: one per GPU, at least 2)")
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--port", type=int, default=29511)
    args = parser.parse_args(argv)
    gpus = torch.cuda.device_count()
    if gpus == 0:
        print("no CUDA GPU here: NCCL needs one per rank", file=sys.stderr)
        return 2
    world = args.world or max(gpus, 2)
    if world > gpus:
        print(f"--world {world} on {gpus} GPU(s): ranks share GPUs (rank r on GPU r % {gpus})")
        try:
            mp.spawn(rank_main, args=(world, args.seq, args.port), nprocs=world, join=True)
            return 0
        except Exception as error:  # noqa: BLE001 - NCCL's refusal, said in its own words
            said = [line for line in str(error).splitlines() if "NCCL" in line or "Error" in line]
            print(
                f"NCCL refused {world} ranks on {gpus} GPU(s): {(said or ['no reason'])[-1][:300]}"
            )
        print(f"running {gpus} rank(s), one per GPU")
        world = gpus
    mp.spawn(rank_main, args=(world, args.seq, args.port + 1), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
