"""Benchmark claims on made-up benchmark.json and training.json rows: ratios to the baseline, one
variant against another, saved bytes, and None where the intervals or the rows cannot tell."""

from attn import specs
from attn.traces.benchmark_checks import (
    BenchmarkClaim,
    BenchmarkEvidence,
    benchmark_shapes,
    keeps_times,
    ratio_to_baseline_below,
    slower_than,
)
from attn.traces.claims import Claim, evaluate


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
        "0.80× (seq 512, head_dim 64) to 0.80× (seq 512, head_dim 64) over 1 causal shapes: "
        "batch 1 × 8 heads, seq 512, head_dim 64",
    )
    holds, observed = ratio_to_baseline_below(1.0)(ev)  # every row of the variant
    assert holds is False and observed.startswith("0.80× (seq 512, head_dim 64) to 1.50×")
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
        "sdpa_math ÷ inplace: 3.00× to 3.00× over 1 shapes: batch 1 × 8 heads, seq 512, "
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
        "train_naive ÷ train_sdpa_flash: 4.5× at seq 1024",
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
    assert {c.figure for s in specs.SPECS for c in s.benchmark_claims} == {
        "benchmark",
        "training",
        "dispatch",
    }
