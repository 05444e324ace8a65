"""attn/ring.py against SDPA on the whole sequence, on gloo ranks spawned on this CPU.

Starting ranks is the slow part, so the ranks fork from a server that imported torch once, and
each world runs every case of the grid in one process group and hands back what it found: the
tests read those results. The ranks meet through a FileStore in the test's folder and talk over
the loopback.
"""

import dataclasses
import gzip
import json
import multiprocessing
import os
import queue
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from attn import ring
from attn.ring import SHARDINGS, RingAttention, block_attention, gather, merge, shard, unshard

ROOT = Path(__file__).resolve().parents[1]
WORLDS = (2, 3, 4)
DTYPES = (torch.float64, torch.float32, torch.bfloat16)
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-2}
CHUNK_LENGTHS = (1, 5, 8)  # one chunk's length: a single token, odd, even
BATCH, HEADS, HEAD_DIM = 2, 3, 16
DEADLINE = 30  # seconds within which every rank of a spawned world must have ended


# --- spawning ranks -----------------------------------------------------------------------------


def starter():
    """A fork server that imported torch once, where there is one: each rank then starts in a
    fraction of a second, where a fresh interpreter takes seconds to import torch."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch.distributed", "attn.ring"])
    return context


def run_rank(rank: int, world: int, store: str, job, args: tuple, results) -> None:
    """One spawned rank: join the group, run job, and report its result or its error as one line."""
    if sys.platform == "linux":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks talk over the loopback only
    torch.set_num_threads(1)  # the ranks share two cores
    # A long timeout here: on a busy machine ranks may start seconds apart. The test that needs a
    # short one makes a group of its own.
    timeout = timedelta(seconds=60)
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timeout
    )
    try:
        results.put((rank, ("ok", job(rank, world, *args))))
    except Exception as e:
        results.put((rank, ("error", f"{type(e).__name__}: {e}")))
    finally:
        dist.destroy_process_group()


def launch(folder: Path, world: int, job, *args) -> list[tuple[str, object]]:
    """Run job(rank, world, *args) on `world` spawned ranks; each rank's ("ok", result) or
    ("error", line), in rank order. Fails unless every rank ends within DEADLINE seconds."""
    spawn = starter()
    results = spawn.Queue()
    store = str(folder / "store")
    ranks = [
        spawn.Process(target=run_rank, args=(rank, world, store, job, args, results))
        for rank in range(world)
    ]
    for process in ranks:
        process.start()
    ended, deadline = {}, time.monotonic() + DEADLINE
    while len(ended) < world and time.monotonic() < deadline:
        try:
            rank, outcome = results.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in ranks) and results.empty():
                break  # every rank is gone and nothing is left to read
            continue
        ended[rank] = outcome
    for process in ranks:
        process.join(timeout=max(1.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
    missing = [r for r in range(world) if r not in ended]
    assert not missing, f"ranks {missing} did not end within {DEADLINE} s (or died silently)"
    return [ended[r] for r in range(world)]


# --- the grid: every case of one world, in one process group -------------------------------------


def cases(world: int) -> list[tuple[str, bool, torch.dtype, int]]:
    """(sharding, is_causal, dtype, sequence length) for every case of a world."""
    return [
        (sharding, causal, dtype, ring.chunk_count(world, sharding) * chunk)
        for sharding in SHARDINGS
        for causal in (True, False)
        for dtype in DTYPES
        for chunk in CHUNK_LENGTHS
    ]


def case_id(case) -> str:
    sharding, causal, dtype, seq = case
    return f"{sharding}-{'causal' if causal else 'full'}-{str(dtype)[6:]}-seq{seq}"


def inputs(seq: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """The whole sequence's q, k, v (the same on every rank)."""
    gen = torch.Generator().manual_seed(seq)
    shape = (BATCH, HEADS, seq, HEAD_DIM)
    return [torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype) for _ in "qkv"]


def grid_job(rank: int, world: int) -> dict:
    """Every case on this rank: the errors against float64 SDPA on the whole sequence, and counts."""
    found = {}
    for case in cases(world):
        sharding, causal, dtype, seq = case
        q, k, v = inputs(seq, dtype)
        # SDPA on the whole sequence, in float64 from the same (rounded) inputs.
        expected = F.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), is_causal=causal
        )
        attention = RingAttention(sharding)
        with torch.no_grad():
            out = attention(*(shard(t, rank, world, sharding) for t in (q, k, v)), is_causal=causal)
        found[case_id(case)] = {
            "dtype": str(out.dtype),
            "shape": tuple(out.shape),
            "error": (out.double() - shard(expected, rank, world, sharding)).abs().max().item(),
            "gathered": (gather(out, sharding).double() - expected).abs().max().item(),
            "counts": dataclasses.asdict(attention.counts),
        }
    return found


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """World size -> each rank's results, spawned the first time a test asks for that world."""
    done = {}

    def ran(world: int) -> list[dict]:
        if world not in done:
            outcomes = launch(tmp_path_factory.mktemp(f"world{world}"), world, grid_job)
            assert all(kind == "ok" for kind, _ in outcomes), outcomes
            done[world] = [result for _, result in outcomes]
        return done[world]

    return ran


GRID = [
    pytest.param(world, case, id=f"world{world}-{case_id(case)}")
    for world in WORLDS
    for case in cases(world)
]


@pytest.mark.parametrize(("world", "case"), GRID)
def test_matches_sdpa_on_the_whole_sequence(grid, world, case):
    sharding, causal, dtype, seq = case
    for rank, found in enumerate(grid(world)):
        result = found[case_id(case)]
        assert result["dtype"] == str(dtype) and result["shape"] == (
            BATCH,
            HEADS,
            seq // world,
            HEAD_DIM,
        )
        assert result["error"] <= TOLERANCE[dtype], f"rank {rank}: max error {result['error']:.1e}"
        assert result["gathered"] <= TOLERANCE[dtype], (
            f"rank {rank}: gathered {result['gathered']:.1e}"
        )


@pytest.mark.parametrize("world", WORLDS)
def test_contiguous_causal_work_grows_with_the_rank_and_zigzag_evens_it(grid, world):
    """Blocks and scores per rank, and sends: world - 1 per rank, each one K block and one V block."""
    chunk = 8
    for sharding in SHARDINGS:
        for dtype in DTYPES:
            seq = ring.chunk_count(world, sharding) * chunk
            length = seq // world  # a rank's shard
            message = 2 * BATCH * HEADS * length * HEAD_DIM * dtype.itemsize  # K and V
            for rank, found in enumerate(grid(world)):
                counts = found[case_id((sharding, True, dtype, seq))]["counts"]
                if sharding == "contiguous":  # rank r sees the blocks of ranks 0..r
                    assert counts["blocks"] == rank + 1
                    assert counts["scores"] == (rank + 1) * length**2
                else:  # its diagonal block, then half a block at every other step
                    assert counts["blocks"] == world
                    assert counts["scores"] == length**2 * (world + 1) // 2
                assert counts["sends"] == world - 1
                assert counts["bytes_sent"] == (world - 1) * message
                full = found[case_id((sharding, False, dtype, seq))]["counts"]
                assert full["blocks"] == world and full["scores"] == world * length**2


# --- bad input: every rank ends with the same one line ------------------------------------------


def bad_call(case: str, rank: int, world: int) -> None:
    """Make the call a case names, on this rank; every case raises on some rank."""
    good = [t.float() for t in inputs(2 * world * 2, torch.float64)]  # zigzag chunks of 2
    mine = [shard(t, rank, world, "contiguous") for t in good]  # [2, 3, 4, 16] each
    if case == "zigzag_cannot_split":
        shard(good[0][:, :, :10], rank, world, "zigzag")
    elif case == "zigzag_odd_shard":
        RingAttention("zigzag")(*(t[:, :, :3] for t in mine))
    elif case == "unknown_sharding":
        RingAttention("spiral")
    elif case == "shapes_differ":
        cut = 3 if rank == 1 else 4
        RingAttention()(*(t[:, :, :cut] for t in mine))
    elif case == "dtypes_differ":
        RingAttention()(*(t.to(torch.bfloat16 if rank == 2 else t.dtype) for t in mine))
    elif case == "causal_differs":
        RingAttention()(*mine, is_causal=rank != 0)
    elif case == "sharding_differs":
        RingAttention("zigzag" if rank == 1 else "contiguous")(*mine)
    elif case == "one_rank_mixes_shapes":
        q, k, v = mine
        RingAttention()(q, k[..., :8] if rank == 1 else k, v)
    elif case == "one_rank_not_4d":
        RingAttention()(*(t[0] if rank == 2 else t for t in mine))


BAD = {  # case -> words the one line must hold
    "zigzag_cannot_split": "a length of 10 does not divide by 6",
    "zigzag_odd_shard": "ranks 0, 1, 2: a zigzag shard holds two equal chunks",
    "unknown_sharding": "unknown sharding 'spiral'",
    "shapes_differ": "shape differs between ranks: rank 0 (2, 3, 4, 16), rank 1 (2, 3, 3, 16)",
    "dtypes_differ": "dtype differs between ranks: rank 0 float32, rank 1 float32, rank 2 bfloat16",
    "causal_differs": "is_causal differs between ranks: rank 0 False, rank 1 True",
    "sharding_differs": "sharding differs between ranks: rank 0 contiguous, rank 1 zigzag",
    "one_rank_mixes_shapes": "rank 1: q, k and v shards must have one shape",
    "one_rank_not_4d": "rank 2: q must be a non-empty [batch, heads, seq, head_dim] tensor",
}


def bad_input_job(rank: int, world: int) -> dict:
    """Every bad case in turn, then a good call: each case's line, and whether the group survived."""
    lines = {}
    for case in BAD:
        try:
            bad_call(case, rank, world)
            lines[case] = "no error"
        except Exception as e:
            lines[case] = f"{type(e).__name__}: {e}"
    q, k, v = (shard(t, rank, world, "zigzag") for t in inputs(2 * world * 2, torch.float32))
    RingAttention("zigzag")(q, k, v)  # the checks are collective: the group still works
    return lines


@pytest.fixture(scope="module")
def bad_lines(tmp_path_factory):
    outcomes = launch(tmp_path_factory.mktemp("bad"), 3, bad_input_job)
    assert all(kind == "ok" for kind, _ in outcomes), outcomes  # the good call after them ran
    return [lines for _, lines in outcomes]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_ends_every_rank_with_the_same_one_line(bad_lines, case):
    lines = [by_rank[case] for by_rank in bad_lines]
    assert len(set(lines)) == 1, lines  # the checks are collective: the same words everywhere
    line = lines[0]
    assert line.startswith("ValueError: ") and "\n" not in line, line
    assert BAD[case] in line, line


def raising_job(rank: int, world: int, keeps_group: bool) -> str:
    """Rank 1 raises at its second block; it then leaves (its process ends) or, with keeps_group,
    stays in the group waiting for a barrier no one else reaches."""
    # The second case ends by the group's timeout: a short one, in a group of its own.
    group = dist.new_group(timeout=timedelta(seconds=5)) if keeps_group else None
    q, k, v = (shard(t, rank, world, "contiguous") for t in inputs(world * 4, torch.float32))
    if rank == 1:
        calls = []

        def failing(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("rank 1 failed on purpose")
            return block_attention(*args, **kwargs)

        ring.block_attention = failing
    try:
        for _ in range(3):  # more than one forward: no rank can finish before the failure
            RingAttention(group=group)(q, k, v, is_causal=False)
    except RuntimeError:
        if rank == 1 and keeps_group:
            try:
                dist.barrier(group=group)  # never completes: the others are in the ring
            except RuntimeError:
                pass
        raise
    return "no error"


@pytest.mark.parametrize("keeps_group", [False, True], ids=["its_process_ends", "it_stays"])
def test_a_rank_that_raises_midway_ends_every_rank_with_one_line(tmp_path, keeps_group):
    outcomes = launch(tmp_path, 3, raising_job, keeps_group)
    assert outcomes[1] == ("error", "RuntimeError: rank 1 failed on purpose")
    for rank in (0, 2):
        kind, line = outcomes[rank]
        assert kind == "error" and "\n" not in line, line
        assert line.startswith("RuntimeError: ring attention: the ring broke"), line


# --- the pieces, in this process ----------------------------------------------------------------


@pytest.mark.parametrize("sharding", SHARDINGS)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shards_put_back_together_give_the_sequence(world, sharding):
    n = ring.chunk_count(world, sharding)
    x = torch.arange(n * 3).view(1, 1, n * 3, 1)
    shards = [shard(x, r, world, sharding) for r in range(world)]
    assert all(s.shape[2] == 3 * n // world for s in shards)
    assert torch.equal(unshard(shards, sharding), x)


def test_zigzag_gives_each_rank_an_early_and_a_late_chunk():
    x = torch.arange(8).view(1, 1, 8, 1)  # 2 ranks: 4 chunks of 2
    assert shard(x, 0, 2, "zigzag").flatten().tolist() == [0, 1, 6, 7]
    assert shard(x, 1, 2, "zigzag").flatten().tolist() == [2, 3, 4, 5]


def test_a_length_the_sharding_cannot_cut_is_named():
    with pytest.raises(ValueError, match="cuts the sequence into 6 equal chunks: a length of 10"):
        shard(torch.zeros(1, 1, 10, 4), 0, 3, "zigzag")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_two_blocks_merged_by_log_sum_exp_are_attention_over_both(dtype):
    q, k, v = (torch.randn(2, 3, 7, 16).to(dtype) for _ in "qkv")
    first, second = (
        block_attention(q, k[:, :, :3], v[:, :, :3], False),
        block_attention(q, k[:, :, 3:], v[:, :, 3:], False),
    )
    out, lse = merge(*first, *second)
    assert out.dtype == torch.float32  # low precision accumulates in float32
    expected = F.scaled_dot_product_attention(*(t.double() for t in (q, k, v)))
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    scores = (q.double() @ k.double().transpose(-2, -1)) / 4  # sqrt(16)
    torch.testing.assert_close(lse.double(), scores.logsumexp(-1, keepdim=True), atol=1e-5, rtol=0)


# --- the example, copied out of the repository ---------------------------------------------------

TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--head-dim", "16", "--seq", "48"]


def run_example(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """examples/ring_attention.py run from tmp_path with attn/ring.py beside it and nothing else."""
    from test_examples import BOOTSTRAP  # runs a copied script with its imports fenced in

    shutil.copy(ROOT / "examples/ring_attention.py", tmp_path)
    (tmp_path / "attn").mkdir(exist_ok=True)
    shutil.copy(ROOT / "attn/ring.py", tmp_path / "attn/ring.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "alone", "ring_attention.py", *flags]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("sharding", SHARDINGS)
def test_the_example_copied_out_writes_a_trace_per_rank(tmp_path, sharding):
    run = run_example(tmp_path, *TINY, "--world", "2", "--sharding", sharding)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Self CPU" in run.stdout and "attn_fwd" in run.stdout  # rank 0's table
    blocks = {"contiguous": (1, 2), "zigzag": (2, 2)}[sharding]  # causal: zigzag evens the work
    for rank, n in enumerate(blocks):
        assert f"rank {rank}: blocks {n}, " in run.stdout and ", sends 1 of " in run.stdout
    assert "max |ring - SDPA on the whole sequence|" in run.stdout
    for rank in (0, 1):
        folder = tmp_path / "runs" / f"ring_{sharding}" / f"rank{rank}"
        trace = json.loads(gzip.decompress((folder / "trace.json.gz").read_bytes()))
        names = [e.get("name") for e in trace["traceEvents"] if e.get("ph") == "X"]
        assert names.count("attn_fwd") == 3  # schedule(wait=1, warmup=1, active=3)
        assert names.count("gloo:send") == names.count("gloo:recv") == 3  # world - 1 per forward
        assert trace["distributedInfo"]["rank"] == rank
        assert (folder / "table.txt").read_text().startswith("-")
        assert sorted(p.name for p in folder.iterdir()) == ["table.txt", "trace.json.gz"]


def test_the_example_names_a_length_zigzag_cannot_cut_in_one_line(tmp_path):
    run = run_example(tmp_path, *TINY[:-1], "50", "--world", "2", "--sharding", "zigzag")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert (
        "--seq 50: zigzag sharding over 2 ranks cuts the sequence into 4 equal chunks" in run.stderr
    )
    assert not (tmp_path / "runs").exists()  # nothing written


def test_a_world_the_machine_cannot_hold_is_refused_before_any_rank_starts(tmp_path):
    """`--world 65` started 67 processes on two cores (0.45 GB a rank) until the session died."""
    run = run_example(tmp_path, *TINY, "--seq", "1040", "--world", "65")  # 65 chunks of 16
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = [ln for ln in run.stderr.splitlines() if "error:" in ln]
    assert "--world 65: this machine gives" in line or "--world 65: 65 ranks need about" in line
    assert not (tmp_path / "runs").exists()


def the_example():
    """examples/ring_attention.py as a module, for its checks with the machine's readings set."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "ring_attention", ROOT / "examples/ring_attention.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("world", "refused"), [(4, True), (3, False)])
def test_a_world_whose_ranks_do_not_fit_in_memory_is_refused_before_any_rank_starts(
    tmp_path, monkeypatch, capsys, world, refused
):
    """The memory side of the --world check, on a machine of many cores and 2 GiB free: four
    ranks of RANK_BYTES (2.3 GiB) do not fit, three (1.8 GiB) do."""
    example = the_example()
    started = []
    monkeypatch.setattr(example, "usable_cores", lambda: 64)
    monkeypatch.setattr(example, "free_memory", lambda: 2 * 2**30)
    monkeypatch.setattr(example, "start_ranks", lambda args: started.append(args.world))
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ring_attention.py", *TINY, "--world", str(world)])
    if not refused:
        example.main()
        assert started == [3]
        return
    with pytest.raises(SystemExit) as ended:
        example.main()
    assert ended.value.code == 2 and started == []
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert line.endswith("error: --world 4: 4 ranks need about 2.3 GiB, 2.0 GiB is free")


def test_a_stale_file_where_a_rank_folder_goes_is_named_before_profiling(tmp_path):
    """A file called rank9 in the output folder ended the run with NotADirectoryError, after
    every rank had profiled."""
    ring = tmp_path / "runs/ring_contiguous"
    ring.mkdir(parents=True)
    (ring / "rank9").write_text("")
    run = run_example(tmp_path, *TINY, "--world", "2")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "rank9 in " in run.stderr and "not folders of ranks" in run.stderr
    assert sorted(p.name for p in ring.iterdir()) == ["rank9"]  # nothing profiled


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_the_launcher_stopped_ends_its_ranks_in_one_line_writing_nothing(tmp_path, stop):
    """SIGTERM ended the launcher alone (its ranks wrote their files 20 s later); Ctrl-C printed a
    KeyboardInterrupt traceback from every rank."""
    import signal
    import time

    from test_examples import BOOTSTRAP

    run_example(tmp_path, "--help")  # the example and attn/ring.py copied beside it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "alone", "ring_attention.py", *TINY,
           "--world", "2"]  # fmt: skip
    default = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731  (as a terminal)
    launcher = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default, start_new_session=True)  # fmt: skip
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
    # Stopped as soon as multiprocessing's tracker and the first rank run, while the next starts
    # (SIGTERM then killed the launcher alone, and a rank half started printed a traceback).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(children.read_text().split()) < 2:
        time.sleep(0.01)
    # Ctrl-C reaches the terminal's whole process group; SIGTERM, the launcher alone.
    if stop == "SIGINT":
        os.killpg(launcher.pid, signal.SIGINT)
    else:
        launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "stopped: every rank ended, no trace written"
    assert not list((tmp_path / "runs").rglob("trace.json.gz"))
    deadline = time.monotonic() + 30  # multiprocessing's resource tracker ends after its parent
    while time.monotonic() < deadline and _group_alive(launcher.pid):
        time.sleep(0.1)
    assert not _group_alive(launcher.pid), subprocess.run(
        ["ps", "-o", "pid,args", "-g", str(launcher.pid)], capture_output=True, text=True
    ).stdout


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_free_memory_counts_the_page_cache_the_kernel_gives_back(tmp_path):
    """MemAvailable, not MemFree: a machine whose memory is mostly page cache still has room."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 8000000 kB\nMemFree: 100000 kB\nMemAvailable: 6000000 kB\n")
    assert the_example().free_memory(str(meminfo)) == 6000000 * 1024
    (tmp_path / "none").write_text("MemTotal: 8000000 kB\n")  # an old kernel: the pages free now
    assert the_example().free_memory(str(tmp_path / "none")) == (
        os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    )
