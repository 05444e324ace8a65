"""Eager attention by data flow (attn.traces.diagnosis.eager_scores): Q.K^T is the product that writes the softmax's
input, P.V the one that reads its output, the ops on the scores between them extra terms."""

import sys
from pathlib import Path

import pytest

from attn.traces.diagnosis import eager_scores
from attn.traces.read.trace import Trace

sys.path.insert(0, str(Path(__file__).parent))
from diagnose_cases import BF16, Q, diagnose, made, op  # noqa: E402

SCORES = [1, 8, 128, 128]


@pytest.mark.parametrize(
    ("name", "args", "out"),
    [
        ("aten::matmul", {"Input Dims": [Q, [1, 8, 64, 128]]}, SCORES),
        ("aten::matmul", {"Input Dims": [[8, 8, 1024, 128], [8, 1, 128, 1024]]}, [8, 8, 1024, 1024]),
        ("aten::bmm", {"Input Dims": [[16, 5185, 64], [16, 64, 5185]]}, [16, 5185, 5185]),
        ("aten::baddbmm", {"Input Dims": [[16, 5, 5], [16, 5, 64], [16, 64, 5], [], []]}, [16, 5, 5]),
        ("aten::einsum", {"Input Dims": [[], [Q, Q]], "Concrete Inputs": ["bhqd,bhkd->bhqk", ""]},
         SCORES),
        ("aten::einsum", {"Input Dims": [[], [Q, Q]]}, None),  # no equation recorded
        ("aten::matmul", {"Input Dims": [Q, Q]}, None),  # inner dims that do not meet
        ("aten::matmul", {}, None),
    ],
)  # fmt: skip
def test_a_product_s_output_is_worked_out_from_its_inputs(name, args, out):
    assert eager_scores.product_output(name, args) == out


def test_heads_folded_into_the_batch_are_the_same_scores():
    assert eager_scores.same_scores([8, 128, 128], SCORES)
    assert not eager_scores.same_scores([1, 8, 128, 64], SCORES)
    assert not eager_scores.same_scores(None, SCORES)


def biased(shapes: bool = True) -> dict:
    """Eager attention whose scores get a position-bias product and an add between Q.K^T (the
    255 µs GEMM) and the softmax: the product nearest the softmax is the bias's (106 µs)."""
    trace = made(
        op("nn.Module: RelativeAttention_0", 0, 200, cat="python_function"),
        op("aten::matmul", 10, 10, [Q, [1, 8, 64, 128]], BF16[:2], [("gemm_qk", 255)]),
        op("aten::matmul", 30, 10, [Q, [1, 8, 64, 128]], BF16[:2], [("gemm_bias", 106)]),
        op("aten::add_", 50, 10, [SCORES, SCORES, []], BF16[:2], [("add_kernel", 30)]),
        op("aten::softmax", 70, 10, [SCORES, [], []], BF16[:1], [("softmax_kernel", 20)]),
        op("aten::matmul", 90, 10, [SCORES, Q], BF16[:2], [("gemm_pv", 100)]),
    )
    if not shapes:
        for e in trace["traceEvents"]:
            e.get("args", {}).pop("Input Dims", None)
    return trace


def test_q_k_is_the_product_that_makes_the_scores_not_the_nearest_one():
    (row,) = diagnose(Trace(biased()))["attention"]
    assert row["qk_found_by"] == eager_scores.BY_SHAPES
    assert row["device_time_us_per_call"] == 255 + 106 + 30 + 20 + 100
    assert row["attention_kernel_time_us_per_call"] == 255 + 20 + 100
    assert row["extra_terms"] == [
        {"op": "aten::matmul", "per_call": 1.0, "device_time_us_per_call": 106.0},
        {"op": "aten::add_", "per_call": 1.0, "device_time_us_per_call": 30.0},
    ]
    assert row["other_work"] == [
        {"what": "score terms", "kernels_per_call": 2.0, "device_time_us_per_call": 136.0}
    ]


def test_without_shapes_the_products_next_to_the_softmax_are_taken_and_it_is_said():
    (row,) = diagnose(Trace(biased(shapes=False)))["attention"]
    assert row["qk_found_by"] == eager_scores.BY_POSITION and row["extra_terms"] is None
    assert row["device_time_us_per_call"] == 106 + 30 + 20 + 100


def test_a_softmax_whose_output_no_product_reads_is_no_attention():
    """A router's softmax over experts between two products: with shapes, not attention."""
    tokens = [512, 8]
    trace = made(
        op("nn.Module: MoE_0", 0, 100, cat="python_function"),
        op("aten::mm", 10, 10, [[512, 1024], [1024, 8]], BF16[:2], [("gemm", 5)]),
        op("aten::softmax", 30, 10, [tokens, [], []], BF16[:1], [("softmax_kernel", 2)]),
        op("aten::mm", 50, 10, [[512, 1024], [1024, 4096]], BF16[:2], [("gemm", 20)]),
    )
    assert diagnose(Trace(trace))["attention"] == []
