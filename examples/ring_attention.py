"""
Profile ring attention on every rank
====================================

Guess first. The sequence is split over ``--world`` ranks; each rank keeps its queries while the
K and V blocks travel around the ring from rank to rank (``attn/ring.py``). With a causal mask and
``--sharding contiguous``, which rank finishes last? How many blocks does each rank compute, how
many sends does each make, and how many bytes does each send carry? What does ``--sharding zigzag``
change?

Then look. This script is the whole recipe, run by every rank:

1. join the process group (gloo on a CPU, NCCL on GPUs) with a timeout, so a lost rank ends the
   others instead of hanging them;
2. make the full inputs, keep this rank's shard of them, and warm up;
3. profile five steps with ``schedule(wait=1, warmup=1, active=3)``: three recorded forwards, each
   wrapped in ``record_function("attn_fwd")`` so it is easy to find in each rank's trace;
4. on a GPU, synchronize before ``prof.step()`` so each step's kernels end inside that step;
5. each rank exports its own Chrome trace and ``key_averages()`` table.

Run it::

    python ring_attention.py --world 2 --sharding zigzag    # starts its 2 ranks on this machine
    torchrun --nproc-per-node 2 ring_attention.py --sharding contiguous

With ``--sharding zigzag`` rank r writes ``runs/ring_zigzag/rank<r>/trace.json.gz`` and
``runs/ring_zigzag/rank<r>/table.txt``; rank 0 prints its table, what each rank computed and sent,
and how far the gathered output is from SDPA on the whole sequence. Copy it together with
``attn/ring.py`` (keep that relative path: it holds the module profiled here); torch and NumPy are
all either file needs.
"""

import argparse
import multiprocessing
import os
import shutil
import signal
import socket
import sys
from datetime import timedelta
from multiprocessing import resource_tracker
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from attn.ring import SHARDINGS, RingAttention, chunk_count, gather, shard

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description="Profile ring attention on every rank.")
    p.add_argument("--sharding", choices=SHARDINGS, default="contiguous", help="how ranks cut seq")
    p.add_argument("--world", type=positive, help="ranks to start here (default 2; torchrun: its)")
    p.add_argument("--device", default="cuda" if gpu else "cpu", choices=["cpu", "cuda"])
    # The article's shape on GPUs; a smaller batch on a CPU, where the ranks share the cores.
    p.add_argument("--batch", type=positive, default=8 if gpu else 2)
    p.add_argument("--heads", type=positive, default=16 if gpu else 8)
    p.add_argument("--seq", type=positive, default=1024, help="the whole sequence, over all ranks")
    p.add_argument("--head-dim", type=positive, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16" if gpu else "float32")
    p.add_argument("--no-causal", action="store_true", help="attend to every key")
    p.add_argument("--timeout", type=positive, default=30, help="seconds a rank waits for another")
    p.add_argument("--out", type=Path, default=Path("runs"), help="writes OUT/ring_SHARDING/rank*/")
    args = p.parse_args()
    launched = int(os.environ.get("WORLD_SIZE", 0))  # torchrun tells each rank the world size
    if launched and args.world not in (None, launched):
        p.error(f"--world {args.world}: torchrun started {launched} ranks")
    args.world = launched or args.world or 2
    n = chunk_count(args.world, args.sharding)
    if args.seq % n:
        p.error(
            f"--seq {args.seq}: {args.sharding} sharding over {args.world} ranks cuts the sequence "
            f"into {n} equal chunks; use a multiple of {n}"
        )
    if args.device == "cuda" and not gpu:
        p.error("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    if args.device == "cuda" and not launched and torch.cuda.device_count() < args.world:
        p.error(
            f"--world {args.world}: NCCL needs a GPU per rank, torch sees {torch.cuda.device_count()}"
        )
    if not launched:
        check_machine(p, args.world, args.device)
    # A file or a read-only folder at --out: said now, not after minutes of profiling.
    here = next(d for d in (args.out, *args.out.parents) if d.exists())  # the rest is made later
    if not here.is_dir() or not os.access(here, os.W_OK):
        p.error(f"--out {args.out}: {here} is not a folder that can be written")
    ring = args.out / f"ring_{args.sharding}"  # rank<r> there must be folders, or nothing
    stale = sorted(e.name for e in ring.glob("rank*") if not e.is_dir()) if ring.is_dir() else []
    if stale:
        p.error(f"--out {args.out}: {', '.join(stale)} in {ring} not folders of ranks: move them")
    return args


HELD = {signal.SIGINT, signal.SIGTERM}  # what the launcher holds while the ranks start
RANK_BYTES = 600 * 2**20  # a CPU rank's interpreter, torch and its shard: 0.45 GB seen, and room


def usable_cores() -> int | None:
    """The cores this process may run on (None where the system does not say)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def free_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes of memory the ranks can have on this machine (None where the system does not say):
    Linux's MemAvailable, which counts the page cache the kernel gives back on demand; elsewhere
    the pages free now (which does not, and so can refuse a world that would fit)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_machine(p: argparse.ArgumentParser, world: int, device: str) -> None:
    """The ranks started here must fit the machine: a core each on a CPU, and their memory."""
    cores = usable_cores()
    if device == "cpu" and world > (cores or 1):
        p.error(f"--world {world}: this machine gives {cores} cores, one a rank at most")
    free = free_memory()
    if free is None:  # not told on this system: not checked
        return
    if world * RANK_BYTES > free:
        p.error(
            f"--world {world}: {world} ranks need about {world * RANK_BYTES / 2**30:.1f} GiB, "
            f"{free / 2**30:.1f} GiB is free"
        )


def start_ranks(args: argparse.Namespace) -> None:
    """Start args.world ranks on this machine, as torchrun would, and wait for them all."""
    with socket.socket() as s:  # a free port on the loopback, where the ranks meet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")  # fresh interpreters: nothing forked mid-torch
    ranks = []
    # Ctrl-C reaches the terminal's whole group; the launcher alone answers it, as it answers
    # SIGTERM, by ending the ranks. While they start, both are held: noted, not acted on halfway
    # through a start, and blocked in this thread, so each rank starts with them blocked (a mask a
    # new interpreter keeps) and lets them through once it ignores Ctrl-C. multiprocessing's
    # resource tracker starts first, since starting it unblocks both.
    came = []
    interrupt = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    signal.signal(signal.SIGTERM, lambda signum, frame: came.append(signum))
    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    for rank in range(args.world):
        env = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": args.world}
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        ranks.append(spawn.Process(target=started_rank, args=(args, env)))
        ranks[-1].start()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
    try:
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGTERM, _stop)  # as Ctrl-C: the ranks end with the launcher
        for signum in set(came):  # one that came while they started, answered now
            signal.raise_signal(signum)
        for process in ranks:
            process.join()
    except KeyboardInterrupt:
        for process in ranks:
            process.terminate()  # before any rank writes: their files go in after a barrier
        for process in ranks:
            process.join()
        print("stopped: every rank ended, no trace written", file=sys.stderr)
        raise SystemExit(130) from None
    if any(process.exitcode for process in ranks):
        raise SystemExit(1)  # each failed rank has said why, in one line


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def started_rank(args: argparse.Namespace, env: dict) -> None:
    """A rank this script's launcher started: Ctrl-C is the launcher's to answer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)  # held while the launcher started the ranks
    run_rank(args, env)


def run_rank(args: argparse.Namespace, env: dict | None = None) -> None:
    """One rank: join the group, profile, and end with one line (not a traceback) if anything fails."""
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    on_gpu = args.device == "cuda"
    if on_gpu:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # NCCL: one GPU per rank
    elif "OMP_NUM_THREADS" not in os.environ:  # the ranks share this machine's cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    code = 0
    try:
        backend = "nccl" if on_gpu else "gloo"
        dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
        profile_rank(args, rank, world, on_gpu)
    except Exception as e:
        reason = (str(e).strip().splitlines() or [""])[0]
        print(f"rank {rank}: {type(e).__name__}: {reason}", file=sys.stderr)
        code = 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    # A gloo worker thread may still be freeing the tensors of the last collective, which takes
    # the GIL: if Python is shutting down by then, the rank aborts (SIGABRT, "terminate called
    # without an active exception"), in some runs and not others. Everything is written and
    # flushed: end the process without Python's shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def profile_rank(args: argparse.Namespace, rank: int, world: int, on_gpu: bool) -> None:
    """This rank's part: its shard of the inputs, the profiled forwards, its trace and table."""
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    gen = torch.Generator().manual_seed(0)  # the same whole sequence on every rank
    full = [
        torch.randn(args.batch, args.heads, args.seq, args.head_dim, generator=gen) for _ in "qkv"
    ]
    q, k, v = (shard(t, rank, world, args.sharding).to(device, DTYPES[args.dtype]) for t in full)
    causal = not args.no_causal
    attention = RingAttention(args.sharding)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    # --8<-- [start:recipe]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with torch.no_grad():
        for _ in range(3):  # warm-up: first calls allocate, connect the ring, fill caches
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
                    out = attention(q, k, v, is_causal=causal)
                sync()  # the GPU work of this step ends inside this step
                prof.step()

    folder = args.out / f"ring_{args.sharding}" / f"rank{rank}"  # one folder per rank
    folder.mkdir(parents=True, exist_ok=True)
    table = prof.key_averages().table(
        sort_by="device_time_total" if on_gpu else "cpu_time_total", row_limit=15
    )
    publish(prof, table, folder)  # every rank's files, or none
    # --8<-- [end:recipe]
    report(attention, out, full, table, args)


def publish(prof, table: str, folder: Path) -> None:
    """Write this rank's trace and table once every rank has written its own: a reader never sees
    half a trace, nor a folder where some ranks' files come from an earlier run."""
    files = {"trace.json.gz": f".trace-{os.getpid()}.json.gz", "table.txt": f".table-{os.getpid()}"}
    try:
        prof.export_chrome_trace(str(folder / files["trace.json.gz"]))  # .gz: compressed
        (folder / files["table.txt"]).write_text(table + "\n")
        dist.barrier()  # every rank has its files
        for name, scratch in files.items():
            os.replace(folder / scratch, folder / name)
    finally:
        for scratch in files.values():
            (folder / scratch).unlink(missing_ok=True)
    world = dist.get_world_size()
    if dist.get_rank() == 0:  # folders of ranks an earlier, larger run left behind
        for old in folder.parent.glob("rank*"):
            if old.name[4:].isdigit() and int(old.name[4:]) >= world:
                shutil.rmtree(old)


def report(attention, out, full, table: str, args: argparse.Namespace) -> None:
    """Rank 0 prints its table, what each rank did, and the gathered output against SDPA."""
    counts = [None] * dist.get_world_size()
    dist.all_gather_object(counts, attention.counts)  # every rank's counts of the last forward
    whole = gather(out, args.sharding)  # [b, h, seq, d] in sequence order, on every rank
    if dist.get_rank() != 0:
        return
    print(table)
    for r, c in enumerate(counts):
        each = c.bytes_sent // max(c.sends, 1)
        print(
            f"rank {r}: blocks {c.blocks}, scores per head {c.scores}, sends {c.sends} of {each} bytes"
        )
    q, k, v = (t.to(out.device, DTYPES[args.dtype]).float() for t in full)  # as the ranks had them
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=not args.no_causal)
    error = (whole.float() - expected).abs().max().item()
    print(f"max |ring - SDPA on the whole sequence|: {error:.1e}")
    folder = args.out / f"ring_{args.sharding}"
    print(f"traces: {folder}/rank<r>/trace.json.gz (open them at https://ui.perfetto.dev)")


def main() -> None:
    args = parse_args()
    if "RANK" in os.environ:  # started by torchrun: this process is one rank
        run_rank(args)
    else:
        start_ranks(args)


if __name__ == "__main__":
    main()
