"""Benchmark claims on made-up benchmark.json and training.json rows: ratios to the baseline, one
variant against another, saved bytes, and None where the intervals or the rows cannot tell."""

import pytest

from attn import specs
from attn.traces.claims.benchmark_checks import (
    BenchmarkClaim,
    BenchmarkEvidence,
    benchmark_shapes,
    bound_by,
    keeps_times,
    ratio_to_baseline_below,
    slower_than,
)
from attn.traces.claims.claim import Claim, evaluate


def benchmark_claims(spec) -> list[BenchmarkClaim]:
    """The spec's claims checked on a set's figure rows (attn.traces.sets.set_claims decides them)."""
    return [c for c in spec.claims if isinstance(c, BenchmarkClaim)]


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
            [c for c in benchmark_claims(spec) if c.figure == "benchmark"],
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
        "under 1× at 2 of 2 shapes; 0.70× (seq 512, head_dim 64) to 0.90× (seq 4096, head_dim 64) over 2 causal shapes: "
        "batch 1 × 8 heads, seq 512 to 4096, head_dim 64"
    )
    within = results[("custom_cpu", "within-1.25x-of-flash")]
    assert within["holds"] is True and "over 3 shapes" in within["observed"]
    math = results[("sdpa_math", "slower-than-inplace")]
    assert math["holds"] is True and "2.00× to 2.00×" in math["observed"]
    slow = bench(bench_rows({(512, True): 1.3}, math_over_inplace=0.9), "cpu")
    timed = {key: r for key, r in slow.items() if key[1] != "compute-bound-float32"}
    assert [r["holds"] for r in timed.values()] == [False, False, False]


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
        "under 1× at 2 of 2 shapes; 0.80× (float32, seq 2048, head_dim 64) to 0.90× (bfloat16, seq 2048, head_dim 64) over 2 "
        "causal shapes: batch 1 × 8 heads, seq 2048, head_dim 64, float32 and bfloat16"
    )
    assert bench(mixed, "cpu")[("custom_cpu", "within-1.25x-of-flash")]["holds"] is True
    # sdpa_math against inplace is compared within a dtype, never across.
    math = bench(mixed, "cpu")[("sdpa_math", "slower-than-inplace")]
    assert "over 6 shapes" in math["observed"]


def test_benchmark_claims_cannot_tell_without_rows():
    assert all(r["holds"] is None for r in bench([], "cpu").values())
    device_types = {c.device_type for s in specs.SPECS for c in benchmark_claims(s)}
    assert device_types == {"cpu", "cuda"}
    gpu = bench(bench_rows({(512, True): 0.5}), "cuda")  # no custom_cuda/triton rows here
    assert {key: r["holds"] for key, r in gpu.items()} == {
        ("sdpa_math", "gpu-slower-than-inplace"): True,
        ("custom_cuda", "gpu-within-2x-of-flash"): None,
        ("custom_triton", "gpu-within-2x-of-flash"): None,
    }
    assert benchmark_shapes([{"seq": 512, "head_dim": 64}]) == "seq 512, head_dim 64"


def row(variant: str, seq: int, time_us: float, **more) -> dict:
    return {"variant": variant, "batch": 1, "heads": 8, "seq": seq, "head_dim": 64,
            "is_causal": True, "time_us": time_us, **more}  # fmt: skip


def test_benchmark_shapes_name_sizes_lengths_head_dims_and_dtypes():
    rows = [
        {"batch": 1, "heads": 8, "seq": 4096, "head_dim": 128, "dtype": "float32"},
        {"batch": 1, "heads": 8, "seq": 512, "head_dim": 64, "dtype": "bfloat16"},
        {"batch": 2, "heads": 4, "seq": 1024, "head_dim": 64, "dtype": "float32"},
    ]
    assert benchmark_shapes(rows) == (
        "batch 1 × 8 heads, batch 2 × 4 heads, seq 512 to 4096, head_dim 64, 128, "
        "float32 and bfloat16"  # dtypes in the order the rows first give them
    )


def test_a_ratio_is_read_only_from_the_rows_the_claim_is_about():
    rows = [
        row("custom_cpu", 512, 80.0, ratio_to_flash=0.8),
        row("custom_cpu", 512, 150.0, ratio_to_flash=1.5, is_causal=False),
        row("custom_cpu", 512, 140.0, ratio_to_flash=1.4, head_dim=128),
        row("other", 512, 10.0, ratio_to_flash=0.1),
    ]
    ev = BenchmarkEvidence("custom_cpu", rows)
    assert ratio_to_baseline_below(1.0, is_causal=True, head_dim=64)(ev) == (
        True,
        "under 1× at 1 of 1 shapes; 0.80× (seq 512, head_dim 64) to 0.80× (seq 512, head_dim 64) over 1 causal shapes: "
        "batch 1 × 8 heads, seq 512, head_dim 64",
    )
    holds, observed = ratio_to_baseline_below(1.0)(ev)  # every row of the variant
    assert holds is False and observed.startswith(
        "under 1× at 1 of 3 shapes, over 1× at 2 (seq 512, head_dim 64, full; "
        "seq 512, head_dim 128, causal); 0.80× (seq 512, head_dim 64) to 1.50×"
    )
    assert "over 3 shapes" in observed
    assert ratio_to_baseline_below(1.0)(BenchmarkEvidence("custom_cuda", rows)) == (
        None,
        "no custom_cuda row with a ratio to the baseline in benchmark.json",
    )


def test_a_ratio_whose_interval_holds_the_limit_cannot_tell():
    rows = [row("custom_cpu", 512, 95.0, ratio_to_flash=0.95, ratio_low=0.9, ratio_high=1.05)]
    ev = BenchmarkEvidence("custom_cpu", rows)
    assert ratio_to_baseline_below(1.0)(ev)[0] is None
    assert ratio_to_baseline_below(1.1)(ev)[0] is True
    assert ratio_to_baseline_below(0.85)(ev)[0] is False


def test_slower_than_compares_the_same_shapes_only():
    rows = [
        row("sdpa_math", 512, 300.0),
        row("inplace", 512, 100.0),
        row("sdpa_math", 1024, 900.0),  # no inplace row at 1024: not compared
    ]
    assert slower_than("inplace")(BenchmarkEvidence("sdpa_math", rows)) == (
        True,
        "slower at 1 of 1 shapes; sdpa_math ÷ inplace: 3.00× to 3.00× over 1 shapes: batch 1 × 8 heads, seq 512, "
        "head_dim 64",
    )
    assert slower_than("sdpa_math")(BenchmarkEvidence("inplace", rows))[0] is False
    assert slower_than("naive")(BenchmarkEvidence("sdpa_math", rows)) == (
        None,
        "no shape in benchmark.json has both sdpa_math and naive",
    )


def test_keeps_times_reads_the_saved_bytes_from_a_length_on():
    rows = [
        {"variant": "train_naive", "seq": 512, "saved_for_backward_bytes": 1000},
        {"variant": "train_sdpa_flash", "seq": 512, "saved_for_backward_bytes": 1000},
        {"variant": "train_naive", "seq": 1024, "saved_for_backward_bytes": 4500},
        {"variant": "train_sdpa_flash", "seq": 1024, "saved_for_backward_bytes": 1000},
    ]
    ev = BenchmarkEvidence("train_naive", rows)
    assert keeps_times(4, "train_sdpa_flash", 1024)(ev) == (
        True,
        "at least 4× at 1 of 1 lengths; train_naive ÷ train_sdpa_flash: 4.5× at seq 1024",
    )
    assert keeps_times(4, "train_sdpa_flash", 512)(ev)[0] is False  # 1.0× at seq 512
    assert keeps_times(4, "train_sdpa_flash", 2048)(ev) == (
        None,
        "no length from 2048 on has both train_naive and train_sdpa_flash",
    )


def test_a_benchmark_claim_is_a_claim_about_a_figure():
    claim = BenchmarkClaim("k", "cpu", "A sentence.", slower_than("inplace"))
    assert isinstance(claim, Claim) and claim.figure == "benchmark"
    (result,) = evaluate([claim], "cpu", BenchmarkEvidence("sdpa_math", []))
    assert result["holds"] is None and "no shape in benchmark.json" in result["observed"]
    figures = {c.figure for s in specs.SPECS for c in benchmark_claims(s)}
    assert figures == {"benchmark", "training", "timing", "dispatch", "overhead"}


def grid(math_spreads: list[tuple[float, float]]) -> list[dict]:
    """sdpa_math and inplace at one shape per spread given: inplace at 100-110 µs, sdpa_math at
    the (low, high) given, so each shape is slower (all above 110), faster, or cannot tell."""
    rows = []
    for seq, (low, high) in zip((256, 512, 1024, 2048, 4096), math_spreads, strict=False):
        rows.append(row("inplace", seq, 105.0, low_us=100.0, high_us=110.0, repeats=5))
        rows.append(row("sdpa_math", seq, (low + high) / 2, low_us=low, high_us=high, repeats=5))
    return rows


def test_a_grid_claim_says_how_many_shapes_went_each_way():
    slower, overlap, faster = (200.0, 220.0), (105.0, 130.0), (50.0, 60.0)
    check = slower_than("inplace")
    math = lambda rows: check(BenchmarkEvidence("sdpa_math", rows))  # noqa: E731
    holds, observed = math(grid([slower, slower, slower, overlap]))
    assert holds is None  # one shape cannot tell: the claim as a whole cannot either ...
    assert observed.startswith(  # ... but the reader learns that three of four were slower
        "slower at 3 of 4 shapes, cannot tell at 1 (seq 2048, head_dim 64, causal); "
        "sdpa_math ÷ inplace: "
    )
    holds, observed = math(grid([slower, faster, overlap, slower]))
    assert holds is False  # one shape faster for sure
    assert observed.startswith(
        "slower at 2 of 4 shapes, faster at 1 (seq 512, head_dim 64, causal), cannot tell at 1 "
        "(seq 1024, head_dim 64, causal); "
    )
    holds, observed = math(grid([slower] * 3))
    assert holds is True and observed.startswith("slower at 3 of 3 shapes; ")
    holds, observed = math(grid([overlap] * 5))
    assert holds is None
    assert observed.startswith(
        "slower at 0 of 5 shapes, cannot tell at 5 (seq 256, head_dim 64, causal; seq 512, "
        "head_dim 64, causal; seq 1024, head_dim 64, causal and 2 more); "
    )


def test_a_ratio_claim_counts_its_shapes_too():
    rows = [
        row("custom_cpu", 512, 90.0, ratio_to_flash=0.9, ratio_low=0.8, ratio_high=1.0),
        row("custom_cpu", 1024, 120.0, ratio_to_flash=1.2, ratio_low=1.1, ratio_high=1.3),
        row("custom_cpu", 2048, 140.0, ratio_to_flash=1.4, ratio_low=1.3, ratio_high=1.5),
    ]
    ev = BenchmarkEvidence("custom_cpu", rows)
    holds, observed = ratio_to_baseline_below(1.25)(ev)
    assert holds is False
    assert observed.startswith(
        "under 1.25× at 1 of 3 shapes, over 1.25× at 1 (seq 2048, head_dim 64, causal), "
        "cannot tell at 1 (seq 1024, head_dim 64, causal); 0.90× (seq 512, head_dim 64) to "
    )
    holds, observed = ratio_to_baseline_below(1.6)(ev)
    assert holds is True and observed.startswith("under 1.6× at 3 of 3 shapes; ")


def roofline_row(seq: int, dtype: str = "float32", **more) -> dict:
    """custom_cpu at seq (head_dim 64, one head): intensity seq / 4 in float32, against a balance
    of 100 FLOP per byte (1 TFLOP/s over a triad of 10 GB/s)."""
    peaks = {"fp32_fma_tflops": 1.0, "triad_gbs": 10.0}
    return {"variant": "custom_cpu", "batch": 1, "heads": 1, "seq": seq, "head_dim": 64,
            "is_causal": False, "dtype": dtype, "time_us": 1000.0, "peaks": peaks,
            "peak_tflops": 1.0, **more}  # fmt: skip


def test_bound_by_reads_intensity_against_the_balance():
    compute = BenchmarkEvidence("custom_cpu", [roofline_row(512), roofline_row(1024)])
    holds, seen = bound_by("compute")(compute)
    assert holds is True and seen.startswith("in float32, intensity 128 to 256 FLOP/byte against")
    assert "above it at 2 of 2 shapes" in seen
    assert bound_by("memory")(compute)[0] is False
    mixed = BenchmarkEvidence("custom_cpu", [roofline_row(256), roofline_row(1024)])  # 64, 256
    assert bound_by("compute")(mixed)[0] is False
    assert "above it at 1 of 2 shapes" in bound_by("compute")(mixed)[1]
    # Only the rows it is about: a bfloat16 row below the balance does not count for float32.
    picked = BenchmarkEvidence("custom_cpu", [roofline_row(1024), roofline_row(64, "bfloat16")])
    assert bound_by("compute", dtype="float32")(picked)[0] is True
    assert bound_by("compute")(picked)[0] is False


def test_bound_by_cannot_tell_in_a_set_without_the_peaks():
    old = {"variant": "custom_cpu", "seq": 512, "head_dim": 64, "is_causal": True,
           "time_us": 9.0, "matmul_tflops": 0.2, "ceiling_share": 1.3}  # fmt: skip
    holds, seen = bound_by("compute")(BenchmarkEvidence("custom_cpu", [old]))
    assert holds is None and seen.startswith("not measured in this set")
    claim = specs.claim("custom_cpu", "compute-bound-float32")
    assert claim.check(BenchmarkEvidence("custom_cpu", [roofline_row(1024)]))[0] is True
    assert claim.check(BenchmarkEvidence("custom_cpu", [roofline_row(256)]))[0] is False


def test_bound_by_names_a_roof_it_does_not_know():
    with pytest.raises(ValueError, match="roof 'disk'"):
        bound_by("disk")
