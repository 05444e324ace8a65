"""Claims are checked against real CPU traces and the CUDA-shaped fixture; a false claim is a finding."""

import json
from pathlib import Path

import pytest

import attn
from attn import specs
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.analyze import summarize
from attn.traces.benchmark_checks import BenchmarkEvidence, benchmark_shapes
from attn.traces.claims import evaluate
from attn.traces.trace import Trace, forwards, per_forward, read_trace
from attn.traces.trace_checks import Evidence, runs_a_recompilation

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
COMMITTED = Path(__file__).resolve().parents[1] / "profiles" / "cpu-amd-epyc"
TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)


def evidence(trace, config: ProfileConfig | None = None):
    """As a run writes it: first calls' time included, and the shape it ran at."""
    summary, fwds = summarize(trace, base={"shape": config.shape()} if config else None)
    return Evidence(summary, fwds)


def check(name: str, device_type: str, ev: Evidence) -> dict[str, dict]:
    """The variant's trace claims about a device type, evaluated on `ev`, by key."""
    results = evaluate(specs.spec(name).trace_claims, device_type, ev)
    return {r["key"]: r for r in results}


def at_scale(name: str) -> set[str]:
    return {c.key for c in specs.spec(name).trace_claims if c.at_scale}


@pytest.fixture(scope="module")
def cpu_evidence():
    found = {}
    for spec in specs.SPECS:
        variant = attn.get_variant(spec.name)
        if variant.why_unavailable("cpu") is None and spec.inputs == "square":
            found[spec.name] = evidence(capture(variant, TINY)[0], TINY)
    return found


def test_every_variant_has_claims_with_keys_unique_within_it():
    for spec in specs.SPECS:
        keys = [c.key for c in spec.claims]
        assert keys and len(keys) == len(set(keys)), spec.name
        assert all(c.device_type in ("cpu", "cuda") for c in spec.claims), spec.name


def test_every_cpu_claim_holds_on_a_fresh_tiny_run(cpu_evidence):
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(cpu_evidence)
    for name, ev in cpu_evidence.items():
        for key, result in check(name, "cpu", ev).items():
            assert result["observed"]
            if key in at_scale(name):  # a tiny run times noise; tile buffers outweigh scores
                assert result["holds"] is not None, (name, result)
                continue
            assert result["holds"] is True, (name, result)


def test_cpu_claims_fail_on_the_wrong_trace(cpu_evidence):
    # The in-place claim must not hold for the naive trace, and the reverse: the checks can fail.
    # (Both keep two score matrices at the peak: those claims hold on either trace, by design.)
    assert check("inplace", "cpu", cpu_evidence["naive"])["no-clone"]["holds"] is False
    on_inplace = check("naive", "cpu", cpu_evidence["inplace"])
    assert on_inplace["clone-under-masked-fill"]["holds"] is False
    speed = on_inplace["clone-costs-more-than-scale"]  # no clone: nothing to time
    assert speed["holds"] is None and "aten::clone" in speed["observed"]
    copies = on_inplace["copy-row-adds-two-copies"]  # only the scalar copy is left
    assert copies["holds"] is False and copies["observed"] == "aten::copy_ of []; under aten::mul"
    order = on_inplace["ops-follow-the-code"]  # masked_fill_, not masked_fill
    assert order["holds"] is False and "aten::masked_fill_ → aten::softmax" in order["observed"]
    flash = check("sdpa_flash", "cpu", cpu_evidence["sdpa_math"])
    assert not all(r["holds"] for r in flash.values())


def test_the_recompilation_claim_reads_the_compile_number_not_the_frame(cpu_evidence):
    # The frame number counts what this process compiled before (other tests compile the same
    # forward too), so only the number after the slash is the variant's.
    naive = check("compiled_naive", "cpu", cpu_evidence["compiled_naive"])["runs-a-recompilation"]
    assert naive["holds"] is True and "Torch-Compiled Region" in naive["observed"]

    class Seen:  # just the event names a check reads
        def __init__(self, *names):
            self.names = lambda: set(names)

    assert runs_a_recompilation(Seen("Torch-Compiled Region: 3/1")) == (
        True,
        "Torch-Compiled Region: 3/1",
    )
    assert runs_a_recompilation(Seen("Torch-Compiled Region: 3/0"))[0] is False
    assert runs_a_recompilation(Seen("aten::bmm")) == (False, "no Torch-Compiled Region")


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


def cpu_forwards(*ranges: tuple[float, list[tuple[str, float, float]]]) -> list:
    """Forwards of a made-up CPU trace: per attn_fwd range, its duration and (op, start, end)."""
    events, start = [], 0.0
    for dur, ops in ranges:
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": start, "dur": dur}
        )
        events += [
            {"ph": "X", "cat": "cpu_op", "name": name, "ts": start + a, "dur": b - a}
            for name, a, b in ops
        ]
        start += dur + 100
    return Trace({"traceEvents": events}).forwards()


def test_the_clone_and_scale_comparison_reads_both_ways():
    def naive_like(clone_us: float, mul_us: float) -> Evidence:
        ops = [("aten::mul", 1, 1 + mul_us), ("aten::clone", 300, 300 + clone_us)]
        return Evidence({}, cpu_forwards((1000.0, ops), (1000.0, ops)))

    key = "clone-costs-more-than-scale"
    slow_clone = check("naive", "cpu", naive_like(200.0, 50.0))[key]
    assert slow_clone["holds"] is True
    assert slow_clone["observed"] == "aten::clone 200.0 µs, aten::mul 50.0 µs per forward (4.0×)"
    assert check("naive", "cpu", naive_like(20.0, 50.0))[key]["holds"] is False


@pytest.mark.parametrize("name", [s.name for s in specs.SPECS if any(c.at_scale for c in s.claims)])
def test_at_scale_claims_hold_on_the_committed_profile(name):
    """The committed runs (scores of 64 MiB): the clone well ahead of the scale step, the long
    gaps where score-sized tensors are freed, the fused ops' peak far under one score matrix."""
    if not (COMMITTED / name).is_dir():
        pytest.skip(f"no profiles/cpu-amd-epyc/{name}/ in this checkout")
    trace = read_trace(COMMITTED / name / "trace.json.gz")
    stored = json.loads((COMMITTED / name / "summary.json").read_text())  # its shape, as recheck
    results = check(name, "cpu", Evidence(*summarize(trace, spec=specs.spec(name), base=stored)))
    found = [results[key] for key in at_scale(name) if key in results]
    assert found and all(r["holds"] is True for r in found), found


def test_gap_claims_find_where_no_op_runs():
    # attn_fwd from 0 to 180 µs; gaps of 20 after masked_fill and 30 at the end, 1-2 elsewhere.
    spans = [("aten::mul", 0, 10), ("aten::matmul", 12, 50), ("aten::masked_fill", 51, 80),
             ("aten::softmax", 100, 130), ("aten::matmul", 131, 150)]  # fmt: skip
    ev = Evidence({}, cpu_forwards((180.0, spans)))
    naive = check("naive", "cpu", ev)["gaps-after-masking-and-at-end"]
    assert naive["holds"] is True
    assert naive["observed"] == (
        "54.0 µs per forward in no op (30% of attn_fwd); longest gaps: "
        "30.0 µs at the end, 20.0 µs after aten::masked_fill, 2.0 µs after aten::mul"
    )
    # In-place claims one long gap: a second one of 20 µs is not "one".
    assert check("inplace", "cpu", ev)["one-gap-at-end"]["holds"] is False
    lone = [*spans[:3], ("aten::softmax", 81, 130), spans[4]]  # no gap after masking
    ev = Evidence({}, cpu_forwards((180.0, lone)))
    assert check("inplace", "cpu", ev)["one-gap-at-end"]["holds"] is True
    assert check("naive", "cpu", ev)["gaps-after-masking-and-at-end"]["holds"] is False


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


def bench(rows: list[dict], device_type: str) -> dict[tuple[str, str], dict]:
    """Every benchmark claim about a device type, checked on these rows, by (variant, key)."""
    return {
        (spec.name, r["key"]): r
        for spec in specs.SPECS
        for r in evaluate(
            [c for c in spec.benchmark_claims if c.figure == "benchmark"],
            device_type,
            BenchmarkEvidence(spec.name, rows),
        )
    }


def test_benchmark_claims_read_the_ratio_to_flash():
    rows = bench_rows({(512, True): 0.7, (4096, True): 0.9, (512, False): 1.1})
    results = bench(rows, "cpu")
    faster = results[("custom_cpu", "under-flash-causal-head-dim-64")]
    assert faster["holds"] is True
    assert faster["observed"] == (
        "0.70× (seq 512, head_dim 64) to 0.90× (seq 4096, head_dim 64) over 2 causal shapes: "
        "batch 1 × 8 heads, seq 512 to 4096, head_dim 64"
    )
    within = results[("custom_cpu", "within-1.25x-of-flash")]
    assert within["holds"] is True and "over 3 shapes" in within["observed"]
    math = results[("sdpa_math", "slower-than-inplace")]
    assert math["holds"] is True and "2.00× to 2.00×" in math["observed"]
    slow = bench(bench_rows({(512, True): 1.3}, math_over_inplace=0.9), "cpu")
    assert [r["holds"] for r in slow.values()] == [False, False, False]


def test_benchmark_claims_cannot_tell_where_the_intervals_overlap():
    rows = bench_rows({(512, True): 0.95}, math_over_inplace=1.05)
    spread = {"sdpa_flash": (90.0, 110.0), "custom_cpu": (85.0, 105.0), "inplace": (280.0, 320.0),
              "sdpa_math": (300.0, 330.0)}  # fmt: skip
    for r in rows:
        r["low_us"], r["high_us"] = spread[r["variant"]]
        if r["variant"] == "custom_cpu":  # as benchmark.ratios writes it: the ranges' widest ratio
            r["ratio_low"], r["ratio_high"] = 85.0 / 110.0, 105.0 / 90.0
    results = bench(rows, "cpu")
    assert results[("custom_cpu", "under-flash-causal-head-dim-64")]["holds"] is None
    assert results[("custom_cpu", "within-1.25x-of-flash")]["holds"] is True  # 1.17 < 1.25
    assert results[("sdpa_math", "slower-than-inplace")]["holds"] is None  # 300-330 vs 280-320
    apart = [{**r, "low_us": r["time_us"], "high_us": r["time_us"]} for r in rows]
    assert bench(apart, "cpu")[("sdpa_math", "slower-than-inplace")]["holds"] is True


def test_benchmark_claims_pick_their_rows_and_name_the_dtype():
    def rows(dtype, head_dim, ratio):
        return [
            {**r, "dtype": dtype, "head_dim": head_dim}
            for r in bench_rows({(2048, True): ratio, (2048, False): ratio})
        ]

    mixed = rows("float32", 64, 0.8) + rows("bfloat16", 64, 0.9) + rows("float32", 128, 1.2)
    under = bench(mixed, "cpu")[("custom_cpu", "under-flash-causal-head-dim-64")]
    assert under["holds"] is True  # head_dim 128 and the non-causal rows are not its business
    assert under["observed"] == (
        "0.80× (float32, seq 2048, head_dim 64) to 0.90× (bfloat16, seq 2048, head_dim 64) over 2 "
        "causal shapes: batch 1 × 8 heads, seq 2048, head_dim 64, float32 and bfloat16"
    )
    assert bench(mixed, "cpu")[("custom_cpu", "within-1.25x-of-flash")]["holds"] is True
    # sdpa_math against inplace is compared within a dtype, never across.
    math = bench(mixed, "cpu")[("sdpa_math", "slower-than-inplace")]
    assert "over 6 shapes" in math["observed"]


def test_benchmark_claims_cannot_tell_without_rows():
    assert all(r["holds"] is None for r in bench([], "cpu").values())
    device_types = {c.device_type for s in specs.SPECS for c in s.benchmark_claims}
    assert device_types == {"cpu", "cuda"}
    gpu = bench(bench_rows({(512, True): 0.5}), "cuda")  # no custom_cuda/triton rows here
    assert {key: r["holds"] for key, r in gpu.items()} == {
        ("sdpa_math", "gpu-slower-than-inplace"): True,
        ("custom_cuda", "gpu-within-2x-of-flash"): None,
        ("custom_triton", "gpu-within-2x-of-flash"): None,
    }
    assert benchmark_shapes([{"seq": 512, "head_dim": 64}]) == "seq 512, head_dim 64"


def test_gpu_naive_claim_holds_on_the_fixture():
    ev = evidence(json.loads(FIXTURE.read_text()))
    result = check("naive", "cuda", ev)["gpu-five-kernels-and-a-memcpy"]
    assert result["holds"] is True
    assert "5 kernels" in result["observed"] and "1 DtoD" in result["observed"]


def test_gpu_claims_report_what_they_saw_when_they_fail():
    ev = evidence(json.loads(FIXTURE.read_text()))
    inplace = check("inplace", "cuda", ev)["gpu-five-kernels-no-memcpy"]
    assert inplace["holds"] is False and "1 DtoD" in inplace["observed"]
    (flash,) = check("sdpa_flash", "cuda", ev).values()
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
    result = check("naive", "cuda", evidence(trace))["gpu-five-kernels-and-a-memcpy"]
    assert result["holds"] is False and "HtoD" in result["observed"]


def test_memsets_do_not_count_as_kernels():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [
        {**e, "cat": "gpu_memset", "name": "Memset (Device)"} if e.get("cat") == "gpu_memcpy" else e
        for e in trace["traceEvents"]
    ]
    s = per_forward(trace)
    assert s["kernels_per_forward"] == 5 and s["memset_per_forward"] == 1
    result = check("inplace", "cuda", Evidence(s, forwards(trace)))["gpu-five-kernels-no-memcpy"]
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
    (result,) = check("sdpa_flash", "cuda", Evidence(per_forward(trace), fwds)).values()
    assert result["holds"] is holds, result


def test_a_claim_that_needs_shapes_says_they_were_not_recorded(cpu_evidence):
    """Recorded without record_shapes, the in-place claim cannot tell a scalar copy from a big one."""
    for f in cpu_evidence["inplace"].forwards:
        for e in f.cpu_events:
            e.args.pop("Input Dims", None)
    result = check("inplace", "cpu", cpu_evidence["inplace"])["no-clone"]
    assert result["holds"] is None and "not recorded" in result["observed"]


def test_cudnn_claim_checks_the_launch_api():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "gpu_memcpy"]
    for e in trace["traceEvents"]:
        if e.get("name") == "cudaLaunchKernel":
            e["name"], e["cat"] = "cuLaunchKernelEx", "cuda_driver"
    (result,) = check("sdpa_cudnn", "cuda", evidence(trace)).values()
    assert not result["holds"]  # five generic kernels, none cudnn_generated
    assert "cuLaunchKernelEx" in result["observed"]


def test_claims_are_only_about_their_device_type():
    results = evaluate(specs.spec("naive").trace_claims, "cpu", Evidence({}, []))
    cpu_keys = {c.key for c in specs.spec("naive").trace_claims if c.device_type == "cpu"}
    assert {r["key"] for r in results} == cpu_keys
    assert check("sdpa_efficient", "cpu", Evidence({}, [])) == {}


def test_committed_cpu_profiles_carry_claims_that_hold():
    folder = COMMITTED
    if not folder.is_dir():
        pytest.skip("no profiles/cpu-amd-epyc/ in this checkout")
    checked = {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary["available"]:
            checked[summary["variant"]] = summary["claims"]
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(checked)
    for name, claims in checked.items():
        expected = [
            (c.key, c.text) for c in specs.spec(name).trace_claims if c.device_type == "cpu"
        ]
        assert [(c["key"], c["text"]) for c in claims] == expected, name
        assert all(c["holds"] is True and c["observed"] for c in claims), (name, claims)


def test_committed_summaries_carry_the_claims_their_traces_give():
    """What `python -m attn.profiling recheck --check` checks: a new or changed claim must be
    re-evaluated on every committed set (and committed) before it lands."""
    from attn.traces.analyze import recheck

    root = Path(__file__).resolve().parents[1] / "profiles"
    if not root.is_dir():
        pytest.skip("no profiles/ in this checkout")
    stale = recheck(root, specs, write=False)
    assert stale == [], f"run: python -m attn.profiling recheck profiles ({stale[0]['path']})"
