"""Training steps: the variants' gradients, what autograd saves, the backward block, the sweep."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attn
from attn import specs
from attn.profiling import training
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.claims.benchmark_checks import BenchmarkEvidence, keeps_times
from attn.traces.read.trace import Trace
from attn.traces.sets.analyze import summarize

TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)
TRAINING = [s.name for s in specs.SPECS if s.trains]


def test_the_training_specs_are_the_chapters():
    assert TRAINING == [
        f"train_{impl}"
        for impl in (
            "naive",
            "inplace",
            "sdpa_math",
            "sdpa_flash",
            "custom_cpu_recompute",
            "custom_cpu",
            "custom_triton",
            "flex",
        )
    ]
    assert all(attn.get_variant(n).trains for n in TRAINING)
    assert not any(v.trains for v in attn.variants() if v.name not in TRAINING)


@pytest.mark.parametrize("name", TRAINING)
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "full"])
def test_gradients_match_the_float64_reference(name, is_causal):
    variant = attn.get_variant(name)
    if (reason := variant.why_unavailable("cpu")) is not None:
        pytest.skip(reason)
    q, k, v = (torch.randn(2, 3, n, 32) for n in (17, 40, 40))
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    grad = torch.randn(2, 3, 17, 32)
    variant.forward(*ours, is_causal=is_causal).backward(grad)
    with sdpa_kernel(SDPBackend.MATH):  # torch's own reference, in float64
        F.scaled_dot_product_attention(*ref, is_causal=is_causal).backward(grad.double())
    for mine, theirs in zip(ours, ref, strict=True):
        torch.testing.assert_close(mine.grad.double(), theirs.grad, atol=1e-4, rtol=1e-4)


def test_flex_cannot_train_on_cpu_and_says_why():
    forward_only = attn.get_variant("flex_causal").why_unavailable("cpu")  # AVX2, a compiler
    reason = attn.get_variant("train_flex").why_unavailable("cpu")
    assert reason == forward_only if forward_only else "(no backward)" in reason


def test_saved_tensors_count_each_storage_once():
    """Naive saves the softmax's output twice (as itself, and as the second matmul's view of it):
    one storage, one row."""
    q, k, v = (t.requires_grad_() for t in TINY.make_inputs())
    saved = []
    training.training_step(attn.get_variant("train_naive"), q, k, v, is_causal=True, saved=saved)
    scores = 1 * 2 * 64 * 64
    score_rows = [r for r in saved if r["shape"] and torch.Size(r["shape"]).numel() == scores]
    assert len(score_rows) == 1 and score_rows[0]["bytes"] == scores * 4
    assert all(set(r) == {"shape", "dtype", "bytes"} for r in saved)
    assert q.grad is None  # dropped after the step, as zero_grad(set_to_none=True) would


@pytest.fixture(scope="module")
def naive_step():
    trace, _ = capture(attn.get_variant("train_naive"), TINY)
    return summarize(trace, spec=specs.spec("train_naive"), base={"shape": TINY.shape()})[0]


def test_a_training_run_gets_a_backward_block(naive_step):
    block = naive_step["backward"]
    assert block["backwards"] == 3 and block["range"] == "attn_bwd"
    assert block["ops_per_backward"] > naive_step["ops_per_forward"]
    assert block["kernels_per_backward"] is None and block["device_time_us"] is None  # on CPU
    assert block["saved_for_backward_bytes"] == sum(r["bytes"] for r in block["saved_for_backward"])
    assert "saved_tensors_hooks" in block["saved_measured_with"]
    assert block["peak_memory_step_bytes"] >= naive_step["peak_memory_bytes"]
    assert naive_step["forwards"] == 3  # the forward's fields stay as they were


def test_a_forward_only_run_gets_no_backward_block():
    trace, _ = capture(attn.get_variant("naive"), TINY)
    assert "backward" not in summarize(trace, spec=specs.spec("naive"))[0]


def test_a_backward_on_another_thread_is_counted_in_its_range():
    """On a GPU autograd runs the backward on a thread of its own while the caller waits."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "attn_bwd", "ts": 0, "dur": 100, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 20, "tid": 2},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 150, "dur": 20, "tid": 2},
    ]
    trace = Trace({"traceEvents": events})
    assert [e.name for e in trace.forwards("attn_bwd", any_thread=True)[0].aten_ops] == ["aten::mm"]
    assert trace.forwards("attn_bwd")[0].aten_ops == []


@pytest.fixture(scope="module")
def rows():
    return training.sweep("cpu", (128, 512))


def test_the_sweep_measures_each_variant_it_names(rows):
    assert {r["variant"] for r in rows} == set(specs.in_sweep("training"))
    by = {(r["variant"], r["seq"]): r["saved_for_backward_bytes"] for r in rows}
    scores = {seq: training.score_matrix_bytes(r) for r in rows for seq in [r["seq"]]}
    assert all(by["train_naive", seq] > scores[seq] for seq in (128, 512))  # it keeps one
    assert by["train_sdpa_flash", 512] < scores[512]  # one number per row, and the inputs
    assert by["train_sdpa_flash", 512] == 4 * by["train_sdpa_flash", 128]  # linear in seq
    assert all(r["peak_memory_step_bytes"] > 0 for r in rows)


def test_the_sweep_writes_its_figure(rows, tmp_path):
    folder = training.write(tmp_path, "cpu", rows)
    assert json.loads((folder / "training.json").read_text()) == rows
    svg = (folder / "training.svg").read_text()
    assert "one score matrix" in svg and "train_naive" in svg


def test_keeps_times_reads_the_rows_from_a_length_on():
    rows = [
        {"variant": v, "seq": seq, "saved_for_backward_bytes": n}
        for seq, naive, flash in ((256, 7, 4), (1024, 80, 16))
        for v, n in (("naive", naive), ("flash", flash))
    ]
    check = keeps_times(4, "flash", 1024)
    assert check(BenchmarkEvidence("naive", rows)) == (
        True,
        "at least 4× at 1 of 1 lengths; naive ÷ flash: 5.0× at seq 1024",
    )
    assert keeps_times(4, "flash", 256)(BenchmarkEvidence("naive", rows))[0] is False
    assert keeps_times(4, "flash", 4096)(BenchmarkEvidence("naive", rows))[0] is None


@pytest.mark.parametrize("argv", [["--seqs", "0"], ["--out", ""]])
def test_bad_values_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        training.main(argv)
    assert exit_.value.code == 2 and argv[0] in capsys.readouterr().err
