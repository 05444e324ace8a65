"""One rank's compute and communication from its own trace (attn.traces.ranks.comm), on hand-made ranks
whose every number is a sum done by hand (tests/rank_traces.py)."""

import numpy as np
import pytest
from rank_traces import GATHER_US, SHARD, gpu_step, ring_rank

from attn.traces.ranks.comm import (
    clip,
    coarse,
    covered,
    lanes,
    length,
    minus,
    overlap,
    rank_row,
    send_bytes,
)
from attn.traces.read.trace import Trace


def spans(*pairs):
    return np.array(pairs, dtype=np.float64).reshape(-1, 2)


def test_covered_merges_nested_and_overlapping_intervals_once():
    found = covered([0, 2, 5, 20], [10, 3, 12, 30])  # [2, 3] inside [0, 10]; [5, 12] overlaps it
    assert found.tolist() == [[0, 12], [20, 30]] and length(found) == 22


def test_overlap_minus_clip_and_coarse():
    a, b = spans((0, 10), (20, 30)), spans((5, 25))
    assert overlap(a, b) == 10
    assert minus(a, b).tolist() == [[0, 5], [25, 30]]
    assert minus(a, spans()).tolist() == a.tolist() and length(minus(b, a)) == 10
    assert clip(a, 8, 22).tolist() == [[8, 10], [20, 22]]
    assert coarse(spans((0, 1), (1.5, 2), (10, 11)), gap=1).tolist() == [[0, 2], [10, 11]]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"Input Dims": [[2, *SHARD]], "Input type": ["float"]}, 2 * 2 * 8 * 512 * 64 * 4),
        ({"Input Dims": [[[4, 4]]], "Input type": ["c10::BFloat16"]}, 32),  # a TensorList's first
        ({"Input Dims": [[4, 4]], "Input type": ["unknown"]}, None),
        ({}, None),
    ],
)
def test_a_sends_bytes_are_its_elements_times_their_size(args, expected):
    assert send_bytes(args) == expected


def test_contiguous_rank_0_computes_one_block_and_waits_on_its_receive_around_it():
    row = rank_row(Trace(ring_rank(0)))
    assert row["range"] == "attn_fwd" and row["ranges"] == 3
    assert row["compute_us_per_range"] == [100.0] * 3  # its own block; c10d:: calls are not compute
    # Under way: the input check's all_gather (10 µs), the c10d::send call before its span
    # (2 µs), and the step's send and receive (116 µs).
    assert row["communication_us"] == GATHER_US + 2 + 116
    assert row["recv_wait_us"] == 15  # the receive's 115 µs less the block's 100
    assert row["hidden_share"] == pytest.approx(100 / 128)
    assert (row["sends_per_range"], row["receives_per_range"], row["communications_per_range"]) == (
        1,
        1,
        3,
    )
    assert row["bytes_per_send"] == [2 * 2 * 8 * 512 * 64 * 4]
    assert row["communication_from"] == "spans"


def test_the_last_rank_computes_every_block():
    assert rank_row(Trace(ring_rank(1)))["compute_us_per_range"] == [200.0] * 3


def test_on_a_gpu_compute_is_kernels_and_communication_ncc_kernels():
    row = rank_row(Trace(gpu_step(0)))
    assert row["range"] == "ProfilerStep#*" and row["range_names"] == [
        "ProfilerStep#5",
        "ProfilerStep#6",
    ]
    assert row["compute_us_per_range"] == [30.0, 30.0]  # three 10 µs kernels back to back
    assert row["communication_us"] == 40 and row["communication_from"] == "NCCL kernels"
    assert row["hidden_share"] == 0.75 and row["recv_wait_us"] == 10  # 30 of 40 under compute
    assert row["communications_per_range"] == 1 and row["sends_per_range"] == 0


def test_a_trace_without_ranges_is_one_range():
    trace = ring_rank(1, forwards=1)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "attn_fwd"]
    row = rank_row(Trace(trace))
    assert row["range"] == "the whole trace" and row["compute_us_per_range"] == [200.0]


def test_lanes_hold_one_range_as_stretches_of_time():
    drawn = lanes(Trace(ring_rank(0)), 1)
    assert drawn["end_us"] - drawn["start_us"] == 310
    assert len(drawn["compute"]) == 1 and drawn["compute"][0][1] - drawn["compute"][0][0] == 100
    assert sum(e - s for s, e in drawn["waiting"]) == 15
    assert lanes(Trace(ring_rank(0)), 3) is None  # it has three
