"""Claims are checked against real CPU traces and the CUDA-shaped fixture; a false claim is a finding."""

import json
from pathlib import Path

import pytest

import attn
from attn.profiling import ProfileConfig
from attn.profiling.analyze import summarize
from attn.profiling.capture import capture
from attn.profiling.claims import (
    BENCHMARK_CLAIMS,
    CLAIMS,
    Evidence,
    benchmark_shapes,
    claims_for,
    evaluate,
    evaluate_benchmark,
)
from attn.profiling.trace import Event, Forward, forwards, load_trace, per_forward

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
COMMITTED = Path(__file__).resolve().parents[1] / "profiles" / "cpu"
TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)


def evidence(trace):
    summary, fwds = summarize(trace)  # as a run writes it, first calls' time included
    return Evidence(summary, fwds)


@pytest.fixture(scope="module")
def cpu_evidence():
    found = {}
    for v in attn.variants():
        if v.why_unavailable("cpu") is None and claims_for(v.name, "cpu"):
            found[v.name] = evidence(capture(v, TINY)[0])
    return found


def test_every_variant_has_claims():
    assert set(CLAIMS) == {v.name for v in attn.variants()}


def test_every_cpu_claim_holds_on_a_fresh_tiny_run(cpu_evidence):
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(cpu_evidence)
    for name, ev in cpu_evidence.items():
        at_scale = {c.text for c in claims_for(name, "cpu") if c.at_scale}
        for result in evaluate(name, "cpu", ev):
            assert result["observed"]
            if result["text"] in at_scale:  # a tiny run times noise; tile buffers outweigh scores
                assert result["holds"] is not None, (name, result)
                continue
            assert result["holds"] is True, (name, result)


def test_cpu_claims_fail_on_the_wrong_trace(cpu_evidence):
    # The in-place claim must not hold for the naive trace, and the reverse: the checks can fail.
    # (Both keep two score matrices at the peak: those claims hold on either trace, by design.)
    assert evaluate("inplace", "cpu", cpu_evidence["naive"])[0]["holds"] is False
    assert evaluate("naive", "cpu", cpu_evidence["inplace"])[0]["holds"] is False
    speed = evaluate("naive", "cpu", cpu_evidence["inplace"])[1]  # no clone: nothing to time
    assert speed["holds"] is None and "aten::clone" in speed["observed"]
    copies = evaluate("naive", "cpu", cpu_evidence["inplace"])[5]  # only the scalar copy is left
    assert copies["holds"] is False and copies["observed"] == "aten::copy_ of []; under aten::mul"
    order = evaluate("naive", "cpu", cpu_evidence["inplace"])[6]  # masked_fill_, not masked_fill
    assert order["holds"] is False and "aten::masked_fill_ → aten::softmax" in order["observed"]
    assert not all(r["holds"] for r in evaluate("sdpa_flash", "cpu", cpu_evidence["sdpa_math"]))


def peak_claim(name: str) -> int:
    return next(i for i, c in enumerate(claims_for(name, "cpu")) if "Peak memory" in c.text)


def test_peak_claims_count_score_matrices(cpu_evidence):
    """Naive and in-place peak at two score matrices; SDPA flash never holds one at all."""
    for name in ("naive", "inplace"):
        result = evaluate(name, "cpu", cpu_evidence[name])[peak_claim(name)]
        assert result["holds"] is True and "× one score matrix" in result["observed"], result
    ev = cpu_evidence["naive"]
    scores = 1 * 2 * 64 * 64 * 4  # TINY's [batch, heads, seq_q, seq_k] in float32
    assert "[1, 2, 64, 64] float" in evaluate("naive", "cpu", ev)[peak_claim("naive")]["observed"]
    three = Evidence({**ev.summary, "peak_memory_bytes": 3 * scores + 100}, ev.forwards)
    assert evaluate("naive", "cpu", three)[peak_claim("naive")]["holds"] is False
    unrecorded = Evidence({**ev.summary, "peak_memory_bytes": None}, ev.forwards)
    result = evaluate("naive", "cpu", unrecorded)[peak_claim("naive")]
    assert result["holds"] is None and "profile_memory" in result["observed"]


def test_fused_peak_is_measured_against_the_score_matrix_q_and_k_imply(cpu_evidence):
    ev = cpu_evidence["sdpa_flash"]
    scores = (
        1 * 2 * 64 * 64 * 4
    )  # no softmax to read: the fused op's q [1, 2, 64, 32], k [.., 64, 32]
    claim = next(i for i, c in enumerate(claims_for("sdpa_flash", "cpu")) if "Peak" in c.text)
    small = evaluate(
        "sdpa_flash", "cpu", Evidence({**ev.summary, "peak_memory_bytes": scores // 4}, ev.forwards)
    )
    assert small[claim]["holds"] is True
    assert "= 0.25 × one score matrix (0.0 MiB: [1, 2, 64, 64] float)" in small[claim]["observed"]
    big = evaluate(
        "sdpa_flash", "cpu", Evidence({**ev.summary, "peak_memory_bytes": scores}, ev.forwards)
    )
    assert big[claim]["holds"] is False


def test_math_claims_name_the_ops_that_touch_the_scores(cpu_evidence):
    results = evaluate("sdpa_math", "cpu", cpu_evidence["sdpa_math"])
    scales, passes = results[2], results[3]
    assert (
        scales["holds"] is True
        and scales["observed"] == "aten::mul inputs: [1, 2, 64, 32], [1, 2, 32, 64]"
    )
    assert passes["holds"] is True and "aten::add_ on [1, 2, 64, 64]" in passes["observed"]
    # The naive forward never adds a mask: the check can fail.
    assert evaluate("sdpa_math", "cpu", cpu_evidence["naive"])[3]["holds"] is False


def op(name: str, ts: float, dur: float) -> Event:
    return Event(name, "cpu_op", ts, dur, 1, 1, {})


def test_the_clone_and_scale_comparison_reads_both_ways():
    def naive_like(clone_us: float, mul_us: float) -> Evidence:
        rng = Event("attn_fwd", "user_annotation", 0.0, 1000.0, 1, 1, {})
        events = [op("aten::mul", 1, mul_us), op("aten::clone", 300, clone_us)]
        return Evidence({}, [Forward(rng, events, []), Forward(rng, events, [])])

    index = next(i for i, c in enumerate(claims_for("naive", "cpu")) if c.at_scale)
    slow_clone = evaluate("naive", "cpu", naive_like(200.0, 50.0))[index]
    assert slow_clone["holds"] is True
    assert slow_clone["observed"] == "aten::clone 200.0 µs, aten::mul 50.0 µs per forward (4.0×)"
    assert evaluate("naive", "cpu", naive_like(20.0, 50.0))[index]["holds"] is False


@pytest.mark.parametrize("name", ["naive", "inplace", "sdpa_flash", "custom_cpu"])
def test_at_scale_claims_hold_on_the_committed_profile(name):
    """The committed runs (scores of 64 MiB): the clone well ahead of the scale step, the long
    gaps where score-sized tensors are freed, the fused ops' peak far under one score matrix."""
    if not (COMMITTED / name).is_dir():
        pytest.skip(f"no profiles/cpu/{name}/ in this checkout")
    trace = load_trace(COMMITTED / name / "trace.json.gz")
    results = evaluate(name, "cpu", Evidence(per_forward(trace), forwards(trace)))
    at_scale = [r for r, c in zip(results, claims_for(name, "cpu"), strict=True) if c.at_scale]
    assert at_scale and all(r["holds"] is True for r in at_scale), at_scale


def gap_claim(name: str) -> int:
    return next(i for i, c in enumerate(claims_for(name, "cpu")) if "gap" in c.text)


def test_gap_claims_find_where_no_op_runs():
    # attn_fwd from 0 to 180 µs; gaps of 20 after masked_fill and 30 at the end, 1-2 elsewhere.
    rng = Event("attn_fwd", "user_annotation", 0.0, 180.0, 1, 1, {})
    spans = [("aten::mul", 0, 10), ("aten::matmul", 12, 50), ("aten::masked_fill", 51, 80),
             ("aten::softmax", 100, 130), ("aten::matmul", 131, 150)]  # fmt: skip
    events = [op(name, start, end - start) for name, start, end in spans]
    ev = Evidence({}, [Forward(rng, events, [])])
    naive = evaluate("naive", "cpu", ev)[gap_claim("naive")]
    assert naive["holds"] is True
    assert naive["observed"] == (
        "54.0 µs per forward in no op (30% of attn_fwd); longest gaps: "
        "30.0 µs at the end, 20.0 µs after aten::masked_fill, 2.0 µs after aten::mul"
    )
    # In-place claims one long gap: a second one of 20 µs is not "one".
    assert evaluate("inplace", "cpu", ev)[gap_claim("inplace")]["holds"] is False
    lone = [op(name, start, end - start) for name, start, end in spans]
    lone[3] = op("aten::softmax", 81, 49)  # no gap after masking
    ev = Evidence({}, [Forward(rng, lone, [])])
    assert evaluate("inplace", "cpu", ev)[gap_claim("inplace")]["holds"] is True
    assert evaluate("naive", "cpu", ev)[gap_claim("naive")]["holds"] is False


def bench_rows(ratios: dict[tuple[int, bool], float], math_over_inplace: float = 2.0) -> list[dict]:
    """benchmark.json rows: sdpa_flash, custom_cpu (with its ratio), sdpa_math and inplace."""
    rows = []
    for (seq, causal), ratio in ratios.items():
        shape = {"batch": 1, "heads": 8, "seq": seq, "head_dim": 64, "is_causal": causal}
        rows += [
            {**shape, "variant": "sdpa_flash", "time_us": 100.0},
            {**shape, "variant": "custom_cpu", "time_us": 100.0 * ratio, "ratio_to_flash": ratio},
            {**shape, "variant": "inplace", "time_us": 300.0},
            {**shape, "variant": "sdpa_math", "time_us": 300.0 * math_over_inplace},
        ]
    return rows


def test_benchmark_claims_read_the_ratio_to_flash():
    rows = bench_rows({(512, True): 0.7, (4096, True): 0.9, (512, False): 1.1})
    faster, within, math = evaluate_benchmark(rows, "cpu")
    assert faster["holds"] is True
    assert faster["observed"] == (
        "0.70× (seq 512, head_dim 64) to 0.90× (seq 4096, head_dim 64) over 2 causal shapes: "
        "batch 1 × 8 heads, seq 512 to 4096, head_dim 64"
    )
    assert within["holds"] is True and "over 3 shapes" in within["observed"]
    assert math["holds"] is True and "2.00× to 2.00×" in math["observed"]
    slow = evaluate_benchmark(bench_rows({(512, True): 1.3}, math_over_inplace=0.9), "cpu")
    assert [r["holds"] for r in slow] == [False, False, False]


def test_benchmark_claims_cannot_tell_without_rows():
    assert all(r["holds"] is None for r in evaluate_benchmark([], "cpu"))
    assert {c.device_type for c in BENCHMARK_CLAIMS} == {"cpu", "cuda"}
    gpu = evaluate_benchmark(bench_rows({(512, True): 0.5}), "cuda")
    assert [r["holds"] for r in gpu] == [None, None, True]  # no custom_cuda/triton rows here
    assert benchmark_shapes([{"seq": 512, "head_dim": 64}]) == "seq 512, head_dim 64"


def test_gpu_naive_claim_holds_on_the_fixture():
    ev = evidence(json.loads(FIXTURE.read_text()))
    result = evaluate("naive", "cuda", ev)[0]
    assert result["holds"] is True
    assert "5 kernels" in result["observed"] and "1 DtoD" in result["observed"]


def test_gpu_claims_report_what_they_saw_when_they_fail():
    ev = evidence(json.loads(FIXTURE.read_text()))
    inplace = evaluate("inplace", "cuda", ev)[0]
    assert inplace["holds"] is False and "1 DtoD" in inplace["observed"]
    (flash,) = evaluate("sdpa_flash", "cuda", ev)
    assert flash["holds"] is False and "5 kernel(s)" in flash["observed"]


def renamed(trace: dict, old: str, new: str, cat: str | None = None) -> dict:
    trace = json.loads(json.dumps(trace))
    for e in trace["traceEvents"]:
        if e.get("name") == old:
            e["name"] = new
            if cat:
                e["cat"] = cat
    return trace


def test_dtod_means_dtod():
    """The naive claim names a device-to-device Memcpy: a host-to-device one does not count."""
    trace = renamed(
        json.loads(FIXTURE.read_text()),
        "Memcpy DtoD (Device -> Device)",
        "Memcpy HtoD (Pinned -> Device)",
    )
    result = evaluate("naive", "cuda", evidence(trace))[0]
    assert result["holds"] is False and "HtoD" in result["observed"]


def test_memsets_do_not_count_as_kernels():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [
        {**e, "cat": "gpu_memset", "name": "Memset (Device)"} if e.get("cat") == "gpu_memcpy" else e
        for e in trace["traceEvents"]
    ]
    s = per_forward(trace)
    assert s["kernels_per_forward"] == 5 and s["memset_per_forward"] == 1
    result = evaluate("inplace", "cuda", Evidence(s, forwards(trace)))[0]
    assert result["holds"] is True  # a cuBLAS-style memset does not break "5 kernels"


@pytest.mark.parametrize(
    ("name", "holds"),
    [
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4> >(Flash_fwd_params)",
            True,
        ),
        (
            "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64> >(Flash_fwd_params)",
            True,
        ),
        ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)", False),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", False),
        ("flash_fwd_kernel", False),  # our own CUDA kernel is not SDPA's
    ],
)
def test_flash_claim_matches_sdpa_flash_kernels_and_no_other(name, holds):
    trace = json.loads(FIXTURE.read_text())
    # One kernel per forward: keep the first kernel each forward launched, renamed.
    first = {f.of_kind("kernel")[0].correlation for f in forwards(trace)}
    trace["traceEvents"] = [
        {**e, "name": name} if e.get("cat") == "kernel" else e
        for e in trace["traceEvents"]
        if e.get("cat") not in ("kernel", "gpu_memcpy") or e["args"]["correlation"] in first
    ]
    fwds = forwards(trace)
    (result,) = evaluate("sdpa_flash", "cuda", Evidence(per_forward(trace), fwds))
    assert result["holds"] is holds, result


def test_a_claim_that_needs_shapes_says_they_were_not_recorded(cpu_evidence):
    """Recorded without record_shapes, the in-place claim cannot tell a scalar copy from a big one."""
    for f in cpu_evidence["inplace"].forwards:
        for e in f.cpu_events:
            e.args.pop("Input Dims", None)
    result = evaluate("inplace", "cpu", cpu_evidence["inplace"])[0]
    assert result["holds"] is None and "not recorded" in result["observed"]


def test_cudnn_claim_checks_the_launch_api():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "gpu_memcpy"]
    for e in trace["traceEvents"]:
        if e.get("name") == "cudaLaunchKernel":
            e["name"], e["cat"] = "cuLaunchKernelEx", "cuda_driver"
    (result,) = evaluate("sdpa_cudnn", "cuda", evidence(trace))
    assert not result["holds"]  # five generic kernels, none cudnn_generated
    assert "cuLaunchKernelEx" in result["observed"]


def test_claims_are_only_about_their_device_type():
    assert all(c.device_type == "cpu" for c in claims_for("naive", "cpu"))
    assert evaluate("sdpa_efficient", "cpu", Evidence({}, [])) == []


def test_committed_cpu_profiles_carry_claims_that_hold():
    folder = COMMITTED
    if not folder.is_dir():
        pytest.skip("no profiles/cpu/ in this checkout")
    checked = {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary["available"]:
            checked[summary["variant"]] = summary["claims"]
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(checked)
    for name, claims in checked.items():
        assert [c["text"] for c in claims] == [c.text for c in claims_for(name, "cpu")], name
        assert all(c["holds"] is True and c["observed"] for c in claims), (name, claims)


def test_committed_summaries_carry_the_claims_their_traces_give():
    """What `python -m attn.profiling recheck --check` checks: a new or changed claim must be
    re-evaluated on every committed set (and committed) before it lands."""
    from attn.profiling.analyze import recheck

    root = Path(__file__).resolve().parents[1] / "profiles"
    if not root.is_dir():
        pytest.skip("no profiles/ in this checkout")
    stale = recheck(root, write=False)
    assert stale == [], f"run: python -m attn.profiling recheck profiles ({stale[0]['path']})"
