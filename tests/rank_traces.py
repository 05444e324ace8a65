"""Hand-made traces of ranks, as torch.profiler records them: ring attention on gloo (CPU) and a GPU
step whose NCCL kernels run beside its compute. What the rank tests read; every time is whole, so
each expected number is a sum a reader can do."""

import gzip
import json
from pathlib import Path

SHARD = (2, 8, 512, 64)  # [batch, heads, seq / world, head_dim] of one rank
BLOCK_US = 100  # one block's compute: aten::matmul 60, aten::amax 10, aten::exp 30
STEP_US = 120  # a ring step: post the transfer, compute (or not), wait
GATHER_US = 10  # the input check's all_gather at a forward's start


def _x(cat, name, ts, dur, tid=1, args=None):
    event = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
    return {**event, "args": args} if args else event


def _block(t):
    """One block's ops, from t: the row maximum (aten::amax) counts it."""
    return [
        _x("cpu_op", "aten::matmul", t, 60),
        _x("cpu_op", "aten::amax", t + 60, 10),
        _x("cpu_op", "aten::exp", t + 70, 30),
    ]


def ring_rank(rank, world=2, computes=None, forwards=3, gap_us=0, start_us=1000):
    """Rank `rank`'s trace: `forwards` attn_fwd ranges, each the input check (a gloo:all_gather
    span on gloo's thread), then `world` steps; at each step but the last a send and a receive
    (c10d:: ops, then gloo:send and gloo:recv spans until the step's end), and a block computed
    where computes[step] (by default contiguous causal shards: steps 0..rank). `gap_us` more idle
    before each forward's compute (a wait for another rank)."""
    computes = [s <= rank for s in range(world)] if computes is None else computes
    kv = {"Input Dims": [[2, *SHARD]], "Input type": ["float"]}
    period = 2 * GATHER_US + gap_us + world * STEP_US + 100
    events = []
    for f in range(forwards):
        t = start_us + f * period
        events += [
            _x("user_annotation", "attn_fwd", t, period - 50),
            _x("cpu_op", "c10d::allgather_", t + 1, 2),
            _x("user_annotation", "gloo:all_gather", t + 1, GATHER_US + gap_us, tid=2),
        ]
        c = t + 2 * GATHER_US + gap_us
        for step in range(world):
            if step < world - 1:
                events += [
                    _x("cpu_op", "c10d::send", c, 2),
                    _x("user_annotation", "gloo:send", c + 2, STEP_US - 4, args=kv),
                    _x("cpu_op", "c10d::recv_", c + 2, 1),
                    _x("user_annotation", "gloo:recv", c + 3, STEP_US - 5, args=kv),
                ]
            if computes[step]:
                events += _block(c + 5)
            c += STEP_US
    info = {"backend": "gloo", "rank": rank, "world_size": world}
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": events}


def write_ring(folder: Path, world=2, zigzag=False, **kwargs) -> Path:
    """A folder of ranks as examples/ring_attention.py writes one: rank<r>/trace.json.gz."""
    for rank in range(world):
        computes = [True] * world if zigzag else None
        trace = ring_rank(rank, world, computes, **kwargs)
        (folder / f"rank{rank}").mkdir(parents=True, exist_ok=True)
        (folder / f"rank{rank}" / "trace.json.gz").write_bytes(
            gzip.compress(json.dumps(trace).encode())
        )
    return folder


def gpu_step(rank, steps=2, kernels=3, nccl=(0, 40), start_us=0):
    """A GPU rank's trace: ProfilerStep#N ranges of `kernels` 10 µs kernels each (back to back,
    from 10 µs into the step), and one ncclDevKernel_SendRecv from nccl[0] µs lasting nccl[1],
    each launched by a runtime call inside the step."""
    events, corr = [], 0
    for s in range(steps):
        t = start_us + s * 1000
        events.append(_x("user_annotation", f"ProfilerStep#{s + 5}", t, 900))
        names = [f"gemm_{k}" for k in range(kernels)] + ["ncclDevKernel_SendRecv(x)"]
        starts = [t + 10 + 10 * k for k in range(kernels)] + [t + 10 + nccl[0]]
        durs = [10] * kernels + [nccl[1]]
        for k, (name, ts, dur) in enumerate(zip(names, starts, durs, strict=True)):
            corr += 1
            events.append(
                _x("cuda_runtime", "cudaLaunchKernel", t + 1 + k, 1, args={"correlation": corr})
            )
            kernel = _x(
                "kernel",
                name,
                ts,
                dur,
                tid=7 if "nccl" not in name else 9,
                args={"correlation": corr},
            )
            events.append({**kernel, "pid": 0})
    info = {"backend": "nccl", "rank": rank, "world_size": 2}
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": events}
