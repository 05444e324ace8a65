"""A folder of rank traces (attn.traces.ranks.folder): which files are ranks and which rank each is, the
ranks read in parallel as they are read one by one, the imbalance and straggler; and on a real
job's two ranks (tests/fixtures/realtraces/hta-sm80-nccl-two-ranks), every count against one made
here from the raw JSON, sharing no code with attn.traces."""

import functools
import gzip
import json
from pathlib import Path

import pytest
from rank_traces import gpu_step, ring_rank, write_ring

from attn.traces.ranks.folder import imbalance, rank_of, rank_traces, read_rank, read_ranks
from attn.traces.read.trace import TraceFormatError

REAL = Path(__file__).parent / "fixtures" / "realtraces" / "hta-sm80-nccl-two-ranks"


def write(path: Path, trace: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return path


def test_our_rank_folders_come_in_rank_order(tmp_path):
    for rank in (10, 2, 0):
        write(tmp_path / f"rank{rank}" / "trace.json.gz", ring_rank(rank, world=11, forwards=1))
    (tmp_path / "rankings").mkdir()  # not a rank's folder
    assert [p.parent.name for p in rank_traces(tmp_path)] == ["rank0", "rank2", "rank10"]


def test_a_real_jobs_folder_is_its_trace_files(tmp_path):
    for name in ("b.json", "a.json.gz", "notes.txt"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in rank_traces(tmp_path)] == ["a.json.gz", "b.json"]
    (tmp_path / "a.json.gz").unlink(), (tmp_path / "b.json").unlink()
    with pytest.raises(TraceFormatError, match="a folder with no traces of ranks in it"):
        rank_traces(tmp_path)


@pytest.mark.parametrize(
    ("raw", "path", "rank"),
    [
        ({"distributedInfo": {"rank": 5}}, "x/rank1/trace.json.gz", 5),  # the trace says first
        ({}, "x/rank12/trace.json.gz", 12),
        ({}, "x/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 34),
        ({}, "x/sampled_rank_3.json.gz", 3),
        ({}, "x/trace_7.json", 7),
        ({"distributedInfo": {"rank": "0"}}, "x/trace.json", None),  # not a number, no number
    ],
)
def test_a_rank_is_the_one_its_trace_records_else_its_name(raw, path, rank):
    assert rank_of(raw, Path(path)) == rank


def extra(trace, row, word):
    """A reduce: what a worker adds to its rank's row."""
    return {"word": f"{word} {row['rank']}", "events": len(trace.name)}


def test_the_ranks_read_in_parallel_are_the_ranks_read_one_by_one(tmp_path):
    write_ring(tmp_path, world=3)
    reduce = functools.partial(extra, word="rank")
    parallel = read_ranks(rank_traces(tmp_path), reduce, workers=3)
    alone = [read_rank(p, reduce) for p in rank_traces(tmp_path)]
    assert parallel == alone
    assert [r["rank"] for r in parallel] == [0, 1, 2] and parallel[2]["word"] == "rank 2"
    assert parallel[0]["file"] == "rank0/trace.json.gz"
    assert (parallel[0]["world_size"], parallel[0]["backend"]) == (3, "gloo")


def test_two_traces_of_one_rank_and_a_rank_no_one_can_tell_are_refused(tmp_path):
    write(tmp_path / "a.json.gz", ring_rank(0, forwards=1))
    write(tmp_path / "b.json.gz", ring_rank(0, forwards=1))
    with pytest.raises(TraceFormatError, match="a.json.gz and b.json.gz are both rank 0"):
        read_ranks(rank_traces(tmp_path))
    trace = ring_rank(1, forwards=1)
    del trace["distributedInfo"]
    write(tmp_path / "b.json.gz", trace)
    write(tmp_path / "c.json.gz", trace)
    with pytest.raises(TraceFormatError, match="c.json.gz: which rank it is cannot be told"):
        read_ranks([tmp_path / "a.json.gz", tmp_path / "c.json.gz"])


def test_contiguous_shards_make_the_last_rank_the_straggler(tmp_path):
    rows = read_ranks(rank_traces(write_ring(tmp_path, world=2)))
    found = imbalance(rows)  # 100 µs and 200 µs in every forward: 200 / 150
    assert found["straggler"] == 1 and found["ranges"] == 3
    assert found["value"] == found["low"] == found["high"] == pytest.approx(4 / 3)
    assert (found["straggler_compute_us"], found["mean_compute_us"]) == (200, 150)


def test_zigzag_shards_even_the_ranks(tmp_path):
    rows = read_ranks(rank_traces(write_ring(tmp_path, world=2, zigzag=True)))
    assert imbalance(rows)["value"] == 1


def test_no_imbalance_for_one_rank(tmp_path):
    assert imbalance(read_ranks(rank_traces(write_ring(tmp_path, world=1)))) is None


def test_steps_are_lined_up_by_their_names(tmp_path):
    """Rank 1 recorded steps 6 and 7, rank 0 steps 5 and 6: only step 6 is compared."""
    write(tmp_path / "r0.json.gz", gpu_step(0, steps=2, kernels=2))
    late = gpu_step(1, steps=2, kernels=4, start_us=1000)
    for e in late["traceEvents"]:
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(e['name'][13:]) + 1}"
    write(tmp_path / "r1.json.gz", late)
    found = imbalance(read_ranks(rank_traces(tmp_path)))
    assert found["ranges"] == 1 and found["value"] == pytest.approx(40 / 30)


# --- a real job's two ranks, counted here from the raw JSON ---------------------------------------

RUNTIME, DEVICE = {"cuda_runtime", "cuda_driver"}, {"kernel", "gpu_memcpy", "gpu_memset"}


def union(intervals):
    """Length of time a list of (start, end) covers, each moment once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def independent_count(path: Path) -> dict:
    """Per ProfilerStep: the device work launched by runtime calls (any thread) that start and end
    inside it, found by correlation id; NCCL's kernels apart from the rest."""
    trace = json.loads(gzip.decompress(path.read_bytes()))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    device = {}
    for e in events:
        if e.get("cat") in DEVICE and "correlation" in e.get("args", {}):
            device.setdefault(e["args"]["correlation"], []).append(e)
    steps = sorted(
        (e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    nccl, comm, compute = [], [], []
    for step in steps:
        lo, hi = step["ts"], step["ts"] + step["dur"]
        calls = [
            e for e in events
            if e.get("cat") in RUNTIME and lo <= e["ts"] and e["ts"] + e["dur"] <= hi
        ]  # fmt: skip
        work = [d for c in calls for d in device.get(c["args"].get("correlation"), [])]
        ours = [d for d in work if d["name"].startswith(("ncclKernel_", "ncclDevKernel_"))]
        nccl.append(len(ours))
        comm.append(union([(d["ts"], d["ts"] + d["dur"]) for d in ours]))
        rest = [d for d in work if d not in ours]
        compute.append(union([(d["ts"], d["ts"] + d["dur"]) for d in rest]))
    return {
        "rank": trace["distributedInfo"]["rank"],
        "world_size": trace["distributedInfo"]["world_size"],
        "steps": [s["name"] for s in steps],
        "nccl_kernels_per_step": sum(nccl) / len(steps),
        "communication_us": sum(comm) / len(steps),
        "compute_us": compute,
    }


@pytest.fixture(scope="module")
def real_rows():
    return read_ranks(rank_traces(REAL))


@pytest.mark.parametrize("rank", [0, 1])
def test_a_real_ranks_counts_equal_an_independent_count(real_rows, rank):
    row = real_rows[rank]
    theirs = independent_count(REAL / row["file"])
    assert (row["rank"], row["world_size"], row["backend"]) == (theirs["rank"], 128, "nccl")
    assert row["range_names"] == theirs["steps"] == ["ProfilerStep#551", "ProfilerStep#552"]
    assert row["communication_from"] == "NCCL kernels"
    assert row["communications_per_range"] == theirs["nccl_kernels_per_step"] > 0
    assert row["communication_us"] == pytest.approx(theirs["communication_us"])
    assert row["compute_us_per_range"] == pytest.approx(theirs["compute_us"])


def test_the_real_jobs_straggler_computes_longest(real_rows):
    found = imbalance(real_rows)
    medians = [sum(r["compute_us_per_range"]) / 2 for r in real_rows]  # of two steps
    assert found["straggler"] == medians.index(max(medians))
    assert found["low"] <= found["value"] <= found["high"] and found["value"] > 1


def test_a_negative_rank_in_distributed_info_is_refused_naming_the_trace(tmp_path):
    """distributedInfo.rank -1 was taken as a rank (folders rank-1/, which analyze refused)."""
    from attn.traces.ranks.folder import rank_of
    from attn.traces.read.trace import TraceFormatError

    path = tmp_path / "rank0" / "trace.json.gz"
    with pytest.raises(TraceFormatError, match="trace.json.gz: distributedInfo.rank is -1, not a"):
        rank_of({"distributedInfo": {"rank": -1}}, path)
    assert rank_of({"distributedInfo": {"rank": 3}}, path) == 3


# --- ranks that are not one job's ---------------------------------------------------------------


def gpu_forwards(rank: int, name: str = "NVIDIA H200") -> dict:
    """A GPU rank whose ranges are attn_fwd, as a CPU rank's are: only the device differs."""
    trace = gpu_step(rank)
    for e in trace["traceEvents"]:
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = "attn_fwd"
    return {**trace, "deviceProperties": [{"name": name}]}


def test_ranks_of_a_cpu_and_a_gpu_are_refused_naming_each_and_its_device(tmp_path):
    """A CPU rank and a GPU rank were compared as one job: CPU op time against kernel time,
    "straggler: rank 0"."""
    write(tmp_path / "rank0" / "trace.json.gz", ring_rank(0, forwards=2))
    write(tmp_path / "rank1" / "trace.json.gz", gpu_forwards(1))
    with pytest.raises(TraceFormatError) as refused:
        read_ranks(rank_traces(tmp_path), workers=1)
    line = str(refused.value)
    assert "\n" not in line and "straggler" not in line
    assert line.startswith(
        "rank 0 (rank0/trace.json.gz) on the CPU and rank 1 (rank1/trace.json.gz) on NVIDIA H200: "
    )
    # Two GPU ranks of one job are compared as before.
    write(tmp_path / "rank0" / "trace.json.gz", gpu_forwards(0))
    assert [r["device"] for r in read_ranks(rank_traces(tmp_path), workers=1)] == [
        {"type": "cuda", "name": "NVIDIA H200"}
    ] * 2


def test_a_rank_without_the_range_the_others_share_is_refused_naming_it(tmp_path):
    """A rank with no attn_fwd was compared over its whole trace against the others' ranges."""
    write_ring(tmp_path, world=3)
    alone = ring_rank(1, world=3)
    alone["traceEvents"] = [e for e in alone["traceEvents"] if e["name"] != "attn_fwd"]
    write(tmp_path / "rank1" / "trace.json.gz", alone)
    with pytest.raises(TraceFormatError) as refused:
        read_ranks(rank_traces(tmp_path), workers=1)
    assert str(refused.value) == (
        "rank 1 (rank1/trace.json.gz) has no attn_fwd range (measured over the whole trace), "
        "which ranks 0, 2 have: ranks are compared range by range"
    )


def test_ranks_that_recorded_different_steps_are_still_one_job(tmp_path):
    """One step each, #5 on one rank and #6 on the other: both ranges are steps."""
    write(tmp_path / "r0.json.gz", gpu_step(0, steps=1))
    late = gpu_step(1, steps=1)
    late["traceEvents"][0]["name"] = "ProfilerStep#6"
    write(tmp_path / "r1.json.gz", late)
    rows = read_ranks(rank_traces(tmp_path), workers=1)
    assert [r["range"] for r in rows] == ["ProfilerStep#5", "ProfilerStep#6"]
