"""Shape checks on made-up traces (a few ops with their input shapes, [memory] events), on tiny
CPU runs of every variant, and the decoding claims on fresh runs (ours and the example's): which ops
take the scores, the peak in score matrices, what is copied and freed, what autograd keeps."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest

import attn
from attn import specs
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.claims.claim import evaluate
from attn.traces.claims.shape_checks import (
    INPUT_SIZED,
    NO_SHAPES,
    ROW_STATISTIC,
    SCORE_SIZED,
    copies_of_scores_and_scalar,
    frees_a_score_matrix,
    keeps,
    never_on_scores,
    on_scores,
    only_scalar_copies,
    passes_over_scores,
    peak_holds_the_copies,
    peak_in_score_matrices,
    repeat_copies,
    score_matrix_bytes,
    score_shape,
    score_sized_input,
)
from attn.traces.claims.trace_checks import Evidence
from attn.traces.read.patterns import FUSED_CPU
from attn.traces.read.range_counts import per_forward
from attn.traces.read.trace import Trace, forwards, load_trace

ROOT = Path(__file__).resolve().parents[1]
EQUAL_HEADS = ProfileConfig(
    batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32
)  # as the shared tests
DECODE = specs.in_sweep("decoding")
GQA_STEP = ProfileConfig(batch=2, heads=8, kv_heads=2, seq_q=1, seq_k=256, head_dim=32,
                        is_causal=False)  # fmt: skip


def evidence(trace):
    return Evidence(per_forward(trace), forwards(trace))


def in_order(name, device_type, ev):
    """(text, holds, observed) of the variant's trace claims about a device type, in order."""
    claims = specs.spec(name).trace_claims
    return [(c.text, *c.check(ev)) for c in claims if c.device_type == device_type]


def check(name: str, device_type: str, ev: Evidence) -> dict[str, dict]:
    """The variant's trace claims about a device type, evaluated on `ev`, by key."""
    results = evaluate(specs.spec(name).trace_claims, device_type, ev)
    return {r["key"]: r for r in results}


@pytest.fixture(scope="module")
def runs():
    return {
        (name, config): evidence(capture(attn.get_variant(name), config)[0])
        for name in DECODE
        for config in (EQUAL_HEADS, GQA_STEP)
    }


def test_decode_variants_have_claims_about_both_devices():
    assert DECODE == ["decode_repeat_kv", "decode_enable_gqa"]
    for name in DECODE:
        assert specs.spec(name).inputs == "decode"
        assert {c.device_type for c in specs.spec(name).claims} == {"cpu", "cuda"}


@pytest.mark.parametrize("config", [EQUAL_HEADS, GQA_STEP], ids=["equal_heads", "gqa_step"])
@pytest.mark.parametrize("name", DECODE)
def test_every_cpu_claim_holds_on_its_own_run(runs, name, config):
    for text, holds, observed in in_order(name, "cpu", runs[(name, config)]):
        assert holds is True, (text, observed)
        assert observed


def test_the_repeat_copy_is_group_times_the_cache(runs):
    (_, holds, observed), *_ = in_order(
        "decode_repeat_kv", "cpu", runs[("decode_repeat_kv", GQA_STEP)]
    )
    assert holds and "[2, 2, 4, 256, 32]" in observed and "4x" in observed


def test_claims_fail_on_the_other_run(runs):
    repeat = runs[("decode_repeat_kv", GQA_STEP)]
    gqa = runs[("decode_enable_gqa", GQA_STEP)]
    no_copy, _ = in_order("decode_enable_gqa", "cpu", repeat)
    assert no_copy[1] is False and "aten::repeat_interleave" in no_copy[2]
    copies, peak, _ = in_order("decode_repeat_kv", "cpu", gqa)
    assert copies[1] is False and "0 aten::repeat_interleave" in copies[2]
    assert peak[1] is None  # nothing to size: cannot tell, not a pass


@pytest.mark.parametrize("gqa", ["repeat", "enable_gqa"])
def test_example_writes_a_trace_the_claims_hold_on(tmp_path, gqa):
    name = {"repeat": "decode_repeat_kv", "enable_gqa": "decode_enable_gqa"}[gqa]
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "decode_attention.py"), "--gqa", gqa,
         "--device", "cpu", "--batch", "1", "--heads", "8", "--kv-heads", "2",
         "--cache-len", "128", "--head-dim", "32", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "attn_fwd" in run.stdout and "Self CPU" in run.stdout
    trace = load_trace(tmp_path / name / "trace.json.gz")
    assert (tmp_path / name / "table.txt").read_text().strip()
    for text, holds, observed in in_order(name, "cpu", evidence(trace)):
        assert holds is True, (text, observed)


def test_example_refuses_heads_that_do_not_group(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "decode_attention.py"), "--gqa", "repeat",
         "--device", "cpu", "--heads", "6", "--kv-heads", "4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 2 and "--kv-heads" in run.stderr


def test_peak_claims_count_score_matrices(cpu_evidence):
    """Naive and in-place peak at two score matrices; SDPA flash never holds one at all."""
    for name, key in (
        ("naive", "peak-two-score-matrices"),
        ("inplace", "peak-still-two-score-matrices"),
    ):
        result = check(name, "cpu", cpu_evidence[name])[key]
        assert result["holds"] is True and "× one score matrix" in result["observed"], result
    ev = cpu_evidence["naive"]
    key = "peak-two-score-matrices"
    scores = 1 * 2 * 64 * 64 * 4  # TINY's [batch, heads, seq_q, seq_k] in float32
    assert "[1, 2, 64, 64] float" in check("naive", "cpu", ev)[key]["observed"]
    three = Evidence({**ev.summary, "peak_memory_bytes": 3 * scores + 100}, ev.forwards)
    assert check("naive", "cpu", three)[key]["holds"] is False
    unrecorded = Evidence({**ev.summary, "peak_memory_bytes": None}, ev.forwards)
    result = check("naive", "cpu", unrecorded)[key]
    assert result["holds"] is None and "profile_memory" in result["observed"]


def test_fused_peak_is_measured_against_the_score_matrix_q_and_k_imply(cpu_evidence):
    ev = cpu_evidence["sdpa_flash"]
    # No softmax to read: the fused op's q [1, 2, 64, 32] and k [.., 64, 32] imply the scores.
    scores = 1 * 2 * 64 * 64 * 4
    key = "peak-under-one-score-matrix"
    small = check(
        "sdpa_flash", "cpu", Evidence({**ev.summary, "peak_memory_bytes": scores // 4}, ev.forwards)
    )
    assert small[key]["holds"] is True
    assert "= 0.25 × one score matrix (32 KiB: [1, 2, 64, 64] float)" in small[key]["observed"]
    big = check(
        "sdpa_flash", "cpu", Evidence({**ev.summary, "peak_memory_bytes": scores}, ev.forwards)
    )
    assert big[key]["holds"] is False


def test_math_claims_name_the_ops_that_touch_the_scores(cpu_evidence):
    results = check("sdpa_math", "cpu", cpu_evidence["sdpa_math"])
    scales, passes = results["scales-q-and-k"], results["extra-passes-over-scores"]
    assert (
        scales["holds"] is True
        and scales["observed"] == "aten::mul inputs: [1, 2, 64, 32], [1, 2, 32, 64]"
    )
    assert passes["holds"] is True and "aten::add_ on [1, 2, 64, 64]" in passes["observed"]
    # The naive forward never adds a mask: the check can fail.
    on_naive = check("sdpa_math", "cpu", cpu_evidence["naive"])
    assert on_naive["extra-passes-over-scores"]["holds"] is False


def test_a_claim_that_needs_shapes_says_they_were_not_recorded(cpu_evidence):
    """Recorded without record_shapes, the in-place claim cannot tell a scalar copy from a big one."""
    ev = cpu_evidence["inplace"]
    raw = copy.deepcopy(ev.forwards[0].trace.raw)  # the run is shared: change a copy
    for e in raw["traceEvents"]:
        (e.get("args") or {}).pop("Input Dims", None)
    result = check("inplace", "cpu", Evidence(ev.summary, Trace(raw).forwards()))["no-clone"]
    assert result["holds"] is None and "not recorded" in result["observed"]


# --- each check on a made-up forward -------------------------------------------------------------

SCORES, Q, K = [1, 2, 8, 16], [1, 2, 8, 4], [1, 2, 16, 4]  # one score matrix: 256 floats, 1 KiB
SHAPE = {"batch": 1, "heads": 2, "seq_q": 8, "seq_k": 16, "head_dim": 4}
SOFTMAX = ("aten::softmax", 60, 70, [SCORES, []])


def forward_of(*ops, memory=(), **summary) -> Evidence:
    """One made-up CPU forward of 100 µs: ops as (name, start, end, input dims or None[, dtype]),
    [memory] events as (ts, bytes), and the summary's fields given."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": 0.0, "dur": 100.0}]
    for name, start, end, dims, *dtype in ops:
        args = {} if dims is None else {"Input Dims": dims, "Input type": dtype or ["float"]}
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": start, "dur": end - start,
                       "args": args})  # fmt: skip
    events += [{"ph": "i", "name": "[memory]", "ts": ts, "args": {"Device Type": 0, "Bytes": n}}
               for ts, n in memory]  # fmt: skip
    return Evidence(summary, Trace({"traceEvents": events}).forwards())


def test_the_score_matrix_is_the_softmax_input_else_what_q_and_k_imply():
    ev = forward_of(SOFTMAX)
    assert score_shape(ev) == (SCORES, "float")
    assert score_matrix_bytes(ev) == (1024, "[1, 2, 8, 16] float")
    fused = forward_of((FUSED_CPU, 10, 20, [Q, K, K], "c10::BFloat16"))  # no softmax to read
    assert score_shape(fused) == (SCORES, "c10::BFloat16")
    assert score_matrix_bytes(fused) == (512, "[1, 2, 8, 16] c10::BFloat16")
    unshaped = forward_of(("aten::softmax", 60, 70, None))
    assert score_shape(unshaped) is None and score_matrix_bytes(unshaped) is None
    assert score_matrix_bytes(forward_of(("aten::softmax", 60, 70, [SCORES], "long"))) is None


def test_an_op_is_on_the_scores_when_its_first_input_is_the_score_matrix():
    ev = forward_of(
        SOFTMAX,
        ("aten::add_", 30, 40, [SCORES, [8, 16]]),
        ("aten::mul", 10, 15, [Q, []]),
        ("aten::mul", 16, 20, [[1, 2, 4, 16], []]),
    )
    assert on_scores("aten::add_")(ev) == (True, "aten::add_ on [1, 2, 8, 16]")
    assert on_scores("aten::add_", "aten::isneginf")(ev) == (
        False,
        "aten::add_ on [1, 2, 8, 16]; aten::isneginf on nothing",
    )
    assert never_on_scores("aten::mul")(ev) == (
        True,
        "aten::mul inputs: [1, 2, 8, 4], [1, 2, 4, 16]",
    )
    assert never_on_scores("aten::add_")(ev) == (False, "aten::add_ inputs: [1, 2, 8, 16]")
    assert never_on_scores("aten::clone")(ev) == (False, "aten::clone inputs: none")
    unshaped = forward_of(("aten::add_", 30, 40, None))
    assert on_scores("aten::add_")(unshaped) == never_on_scores("aten::add_")(unshaped)
    assert on_scores("aten::add_")(unshaped) == (None, NO_SHAPES)


def test_a_pass_over_the_scores_is_counted_per_forward_with_its_bytes():
    q_scaled = forward_of(SOFTMAX, ("aten::mul", 10, 15, [Q, []]))
    scores_scaled = forward_of(SOFTMAX, ("aten::mul", 20, 30, [SCORES, []]))
    assert passes_over_scores("aten::mul", 1)(scores_scaled) == (
        True,
        "1 aten::mul per forward on the [1, 2, 8, 16] float scores: reads 1 KiB and writes 1 KiB",
    )
    holds, observed = passes_over_scores("aten::mul", 1)(q_scaled)
    assert holds is False and observed.startswith("0 aten::mul per forward")
    assert passes_over_scores("aten::mul", 0)(q_scaled)[0] is True
    unshaped = forward_of(("aten::mul", 20, 30, None))
    assert passes_over_scores("aten::mul", 1)(unshaped) == (None, NO_SHAPES)


def test_copies_are_told_apart_by_what_they_copy():
    scale = [("aten::mul", 10, 20, [Q, []]), ("aten::copy_", 12, 14, [[], []])]
    assert only_scalar_copies(forward_of(*scale)) == (
        True,
        "1 aten::copy_ per forward, each of a 0-dim tensor",
    )
    big = forward_of(("aten::copy_", 12, 14, [SCORES, SCORES]))
    assert only_scalar_copies(big) == (False, "aten::copy_ of shape [1, 2, 8, 16]")
    assert only_scalar_copies(forward_of(("aten::copy_", 12, 14, None))) == (None, NO_SHAPES)
    clone = [("aten::clone", 30, 40, [SCORES]), ("aten::copy_", 31, 39, [SCORES, SCORES])]
    assert copies_of_scores_and_scalar(forward_of(SOFTMAX, *scale, *clone)) == (
        True,
        "aten::copy_ of [1, 2, 8, 16] and of []; under aten::clone, aten::mul",
    )
    assert copies_of_scores_and_scalar(forward_of(SOFTMAX, *scale)) == (
        False,
        "aten::copy_ of []; under aten::mul",
    )
    assert copies_of_scores_and_scalar(forward_of(*scale)) == (None, NO_SHAPES)  # no scores


def test_the_peak_is_counted_in_score_matrices():
    ev = forward_of(SOFTMAX, peak_memory_bytes=2 * 1024 + 100)
    assert peak_in_score_matrices(2)(ev) == (
        True,
        "peak 2 KiB = 2.10 × one score matrix (1 KiB: [1, 2, 8, 16] float)",
    )
    assert peak_in_score_matrices(1)(ev)[0] is False
    assert peak_in_score_matrices(1, at_least=True)(ev)[0] is True
    assert peak_in_score_matrices(3, at_least=True)(ev)[0] is False
    step = forward_of(SOFTMAX, backward={"peak_memory_step_bytes": 4096})  # the backward's block
    assert peak_in_score_matrices(4, key="peak_memory_step_bytes")(step)[0] is True
    assert peak_in_score_matrices(2)(forward_of(SOFTMAX, peak_memory_bytes=None)) == (
        None,
        "memory not recorded (the trace was taken without profile_memory)",
    )
    unshaped = forward_of(("aten::softmax", 60, 70, None), peak_memory_bytes=100)
    assert peak_in_score_matrices(0)(unshaped) == (None, NO_SHAPES)


def test_a_free_of_a_score_matrix_is_a_memory_event_inside_the_forward():
    freed = forward_of(SOFTMAX, memory=[(15, 1024), (80, -1024)])
    assert frees_a_score_matrix(freed) == (
        True,
        "each forward frees 1 KiB or more at once; one score matrix is 1 KiB ([1, 2, 8, 16] float)",
    )
    halves = forward_of(SOFTMAX, memory=[(15, 1024), (80, -512), (90, -512)])
    assert frees_a_score_matrix(halves)[0] is False
    assert "frees 512 B or more" in frees_a_score_matrix(halves)[1]
    later = forward_of(SOFTMAX, memory=[(15, 1024), (150, -1024)])  # after the forward
    assert frees_a_score_matrix(later)[0] is False
    assert frees_a_score_matrix(forward_of(SOFTMAX)) == (
        None,
        "memory not recorded (the trace was taken without profile_memory)",
    )
    assert frees_a_score_matrix(forward_of(memory=[(80, -1024)])) == (None, NO_SHAPES)


CACHE, REPEATED = [1, 2, 16, 4], [1, 2, 2, 16, 4]  # K or V, and each head repeated twice


def repeat(start: float, copied: list = REPEATED, dtype: str = "float") -> list[tuple]:
    """A repeat_interleave of the cache and the copy_ it runs."""
    return [("aten::repeat_interleave", start, start + 10, [CACHE]),
            ("aten::copy_", start + 2, start + 8, [copied, copied], dtype)]  # fmt: skip


def test_a_repeat_must_copy_the_whole_cache_and_the_peak_must_hold_it():
    ev = forward_of(*repeat(10), *repeat(30), peak_memory_bytes=2048)
    assert repeat_copies(2)(ev) == (
        True,
        "2 aten::repeat_interleave per forward, each an aten::copy_ of [1, 2, 2, 16, 4] "
        "(2x the cache it repeats, [1, 2, 16, 4])",
    )
    assert repeat_copies(1)(ev) == (False, "2 aten::repeat_interleave per forward")
    assert repeat_copies(1)(forward_of(*repeat(10, copied=[1, 2, 8, 4]))) == (
        False,
        "aten::repeat_interleave of [1, 2, 16, 4] copied less",
    )
    unshaped = forward_of(("aten::repeat_interleave", 10, 20, None))
    assert repeat_copies(1)(unshaped) == (None, NO_SHAPES)
    assert peak_holds_the_copies(ev) == (True, "peak 2 KiB; the copies 2 KiB")  # 2 × 1 KiB
    small = forward_of(*repeat(10), *repeat(30), peak_memory_bytes=1024)
    assert peak_holds_the_copies(small) == (False, "peak 1 KiB; the copies 2 KiB")
    half = forward_of(*repeat(10, dtype="c10::BFloat16"), *repeat(30, dtype="c10::BFloat16"),
                      peak_memory_bytes=1024)  # fmt: skip
    assert peak_holds_the_copies(half) == (True, "peak 1 KiB; the copies 1 KiB")
    assert peak_holds_the_copies(forward_of(*repeat(10), peak_memory_bytes=None)) == (
        None,
        "no memory events (the trace was taken without profile_memory)",
    )
    assert peak_holds_the_copies(forward_of(SOFTMAX, peak_memory_bytes=100)) == (
        None,
        "no recorded repeat_interleave copies to size",
    )


def test_saved_tensors_are_told_apart_by_their_size():
    saved = [{"shape": [1, 2, 8, 16], "dtype": "float32", "bytes": 1024},
             {"shape": [1, 2, 8], "dtype": "float32", "bytes": 64},
             {"shape": [1, 2, 8, 4], "dtype": "float32", "bytes": 256},
             {"shape": [8, 16], "dtype": "bool", "bytes": 128},
             {"shape": [3], "dtype": "int64", "bytes": 24}]  # fmt: skip
    ev = Evidence({"shape": SHAPE, "backward": {"saved_for_backward": saved}}, [])
    assert keeps(SCORE_SIZED, INPUT_SIZED, "seq_q × seq_k", "other")(ev) == (
        True,
        "1 KiB saved in 5 tensor(s): [1, 2, 8, 16] float32 (score-sized); [1, 2, 8] float32 "
        "(one per query row); [1, 2, 8, 4] float32 (q-sized); [8, 16] bool (seq_q × seq_k); "
        "[3] int64 (other)",
    )
    assert keeps(ROW_STATISTIC, lacks=(SCORE_SIZED,))(ev)[0] is False
    flash = Evidence({"shape": SHAPE, "backward": {"saved_for_backward": saved[1:3]}}, [])
    assert keeps(ROW_STATISTIC, INPUT_SIZED, lacks=(SCORE_SIZED,))(flash)[0] is True
    assert keeps(SCORE_SIZED)(Evidence({"shape": SHAPE}, [])) == (
        None,
        "no saved tensors recorded (a training run records them)",
    )


def test_a_score_sized_input_counts_elements_not_dims():
    flat = forward_of(("aten::clone", 10, 20, [[2, 8, 16]]), shape=SHAPE)  # [batch * heads, ...]
    assert score_sized_input("aten::clone")(flat) == (True, "aten::clone of [2, 8, 16]")
    small = forward_of(("aten::clone", 10, 20, [[2, 8, 4]]), shape=SHAPE)
    assert score_sized_input("aten::clone")(small) == (False, "aten::clone of [2, 8, 4]")
    assert score_sized_input("aten::clone")(forward_of(shape=SHAPE)) == (
        False,
        "aten::clone of nothing",
    )
    assert score_sized_input("aten::clone")(forward_of(("aten::clone", 10, 20, [[2, 8, 16]]))) == (
        None,
        "the run's shape is not recorded",
    )
