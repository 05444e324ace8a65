"""attn/traces/claims/figure_tables.py: the benchmark's and the decoding sweep's rows as Markdown tables."""

from __future__ import annotations

import json

from committed import PROFILES  # the committed sets, as HEAD holds them

from attn import specs
from attn.traces.claims.figure_tables import (
    benchmark_table,
    decoding_table,
    monotonic_lines,
    scaling_table,
    table_head,
)

BENCH = [
    {
        "variant": v,
        "batch": 1,
        "heads": 8,
        "seq": 512,
        "head_dim": 64,
        "is_causal": True,
        "dtype": "float32",
        "time_us": t,
        "tflops": 0.1,
        **extra,
    }
    for v, t, extra in (
        ("sdpa_flash", 200.0, {}),
        ("custom_cpu", 150.0, {"ratio_to_flash": 0.75}),
        ("inplace", 900.0, {}),
        ("sdpa_math", 1800.0, {}),
    )
]  # fmt: skip  (benchmark.json's rows, as the benchmark writes them)


def test_a_tables_head_aligns_text_left_and_numbers_right():
    assert table_head(["a", "b", "c"]) == ["| a | b | c |", "|---|--:|--:|"]
    assert table_head(["a", "b", "c"], 2)[1] == "|---|---|--:|"


def test_benchmark_table_lists_ratios_to_flash_with_the_shape():
    out = benchmark_table(BENCH, specs.BENCHMARK_BASELINE)
    head = f"| variant | dtype, seq × head_dim | time | ÷ {specs.BENCHMARK_BASELINE} |"
    assert head in out
    shape = "float32<br><small>512 × 64, causal</small>"
    assert f"| `custom_cpu` | {shape} | 150.0 µs | 0.75 |" in out
    assert "Batch × heads: 1 × 8." in out  # the same for every row: said once, above
    assert "`inplace` |" not in out  # only our kernels get a ratio row
    assert "Vector ISA" not in out  # a run from before benchmark.json recorded it
    isa = [{**r, "cpu_capability": "AVX2"} for r in BENCH]
    out = benchmark_table(isa, specs.BENCHMARK_BASELINE)
    assert "Vector ISA of this run: AVX2 (`torch.backends.cpu.get_cpu_capability()`)" in out
    assert "and so did `custom_cpu`" in out
    old = [{**r, "matmul_tflops": 0.5, "ceiling_share": 1.8} for r in BENCH]
    out = benchmark_table(old, specs.BENCHMARK_BASELINE)  # a set from before the peaks
    assert "benchmarked before the peaks were measured" in out and "1.80" not in out
    assert "share of peak" not in out
    peaks = {
        "fp32_fma_tflops": 0.48,
        "fp32_isa": "avx512",
        "bf16_tflops": 7.0,
        "bf16_path": "amx",
        "triad_gbs": 29.0,
    }
    timed = [
        {**r, "low_us": r["time_us"] * 0.9, "high_us": r["time_us"] * 1.1, "cpu_capability": "AVX2",
         "peaks": peaks, "peak": "fp32_fma", "peak_tflops": 0.48, "mm_tflops": 0.12,
         "mm_peak_share": 0.25, "peak_share": 0.2,
         **({"ratio_low": 0.61, "ratio_high": 0.92, "path": "fp32"} if "ratio_to_flash" in r else {})}
        for r in BENCH
    ]  # fmt: skip
    out = benchmark_table(timed, specs.BENCHMARK_BASELINE)
    assert (
        "Peaks measured in this run: fp32 FMA 0.48 TFLOP/s (avx512), bf16 7 TFLOP/s (amx), "
        "memory 29 GB/s (a triad). A large `torch.mm`, timed beside the kernels, reaches 25% of "
        "the float32 peak."
    ) in out
    assert "`custom_cpu` multiplied its tiles with: fp32 in float32." in out
    row = (
        "| `custom_cpu` | float32<br><small>512 × 64, causal</small> | 150.0 µs<br><small>135.0 µs–165.0 µs</small> "
        "| 0.75×<br><small>0.61–0.92×, faster</small> | 0.20 |"
    )
    assert row in out


def test_benchmark_table_gives_a_verdict_per_shape_and_counts_them():
    def mine(seq, low, high, causal=True):
        ratio = (low + high) / 2
        return {**BENCH[1], "seq": seq, "is_causal": causal, "low_us": 140.0, "high_us": 160.0,
                "ratio_to_flash": ratio, "ratio_low": low, "ratio_high": high}  # fmt: skip

    rows = [mine(512, 0.6, 0.9), mine(1024, 0.7, 0.95), mine(2048, 0.9, 1.1)]
    rows.append(mine(512, 1.2, 1.4, causal=False))
    out = benchmark_table(rows, "sdpa_flash")
    assert (
        "- `custom_cpu` against `sdpa_flash`: faster at 2 of 4 shapes, slower at 1 "
        "(float32 512 × 64, full), cannot tell at 1 (float32 2048 × 64, causal)."
    ) in out
    verdicts = [line.split("×, ")[1].split("<")[0] for line in out.splitlines() if "×, " in line]
    assert verdicts == ["faster", "faster", "cannot tell", "slower"]
    # Rows from before ratios had ranges give no verdict: a ratio alone cannot tell.
    bare = [{**BENCH[1], "ratio_to_flash": 0.75}]
    assert "against" not in benchmark_table(bare, "sdpa_flash")


def test_benchmark_table_gives_the_backward_its_stored_verdicts_and_its_ratio_to_the_forward():
    def backward(variant, verdict, ratio, seq=512):
        timed = {"time_us": 300.0, "low_us": 280.0, "high_us": 330.0, "repeats": 5}
        ranges = {"ratio_to_flash": ratio, "ratio_low": ratio - 0.1, "ratio_high": ratio + 0.1}
        own = {"over_forward": 2.0, "over_forward_low": 1.8, "over_forward_high": 2.2}
        row = {**BENCH[0 if variant == "sdpa_flash" else 1], "seq": seq}
        return {**row, "backward": {**timed, **ranges, **own, "verdict": verdict}}

    rows = [backward("sdpa_flash", "cannot tell", 1.0), backward("custom_cpu", "faster", 0.5)]
    rows.append(backward("custom_cpu", "cannot tell", 1.0, seq=1024))
    out = benchmark_table(rows, "sdpa_flash")
    assert (
        "- `custom_cpu`: faster at 1 of 2 shapes, cannot tell at 1 (float32 1024 × 64, causal)."
        in out
    )
    below = out[out.index("**The backward**") :].splitlines()  # the forward's table comes first
    lines = [line for line in below if line.startswith("| `custom_cpu` | float32")]
    assert len(lines) == 2 and "0.50×<br><small>0.40–0.60×, faster" in lines[0]
    assert "2.00×<br><small>1.80–2.20×</small>" in lines[0]  # over its own forward: no verdict
    assert not any(line.startswith("| `sdpa_flash`") for line in below)
    # A set benchmarked before the backward was timed says so, and shows no backward row.
    assert "**The backward.** Not measured in this set" in benchmark_table(BENCH, "sdpa_flash")


def test_no_committed_set_shows_a_rate_above_its_peak():
    """A share above 1 means a probe or a FLOP count is wrong (the benchmark refuses to write one);
    a set from before the peaks shows none."""
    for path in sorted(PROFILES.glob("*/benchmark.json")):
        rows = json.loads(path.read_text())
        shares = [r[k] for r in rows for k in ("peak_share", "mm_peak_share") if r.get(k)]
        assert all(0 < s <= 1 for s in shares), path
        if not any("peaks" in r for r in rows):
            assert "share of peak" not in benchmark_table(rows, specs.BENCHMARK_BASELINE)


def test_decoding_says_where_a_longer_cache_took_less_time():
    def step(length, median, low, high):
        return {"kind": "step", "impl": "way", "batch": 1, "cache_len": length,
                "time_us": median, "low_us": low, "high_us": high}  # fmt: skip

    grows = [step(64, 10.0, 9.0, 11.0), step(256, 20.0, 19.0, 21.0)]
    assert monotonic_lines(grows) == [
        "Every way's step time grows with the cache (medians), at every batch."
    ]
    tie = monotonic_lines([step(64, 10.0, 9.0, 12.0), step(256, 9.5, 8.0, 11.0)])
    assert (
        "- way, batch 1: cache 64 10.0 µs → cache 256 9.5 µs, within the interquartile" in tie[-1]
    )
    slow = [step(64, 27874.0, 27000.0, 29000.0), step(1024, 1194.0, 1100, 1300)]
    drop = monotonic_lines(slow)
    assert "beyond both interquartile ranges, as for every way" in drop[-1]
    assert "cache 64 27.87 ms" in drop[-1]
    other = [
        {**r, "impl": "other"} for r in grows
    ]  # a second way that grew: this drop is the way's
    alone = monotonic_lines(slow + other)
    assert "for this way alone" in alone[-1] and len(alone) == 3


def test_decoding_table_gives_the_roofs_and_each_ways_shortest_and_longest_cache():
    rows = [
        {"kind": "ceiling", "name": "copy", "gb_per_s": 20.0},
        {"kind": "ceiling", "name": "matmul", "gflop_per_s": 500.0},
        *(
            {"kind": "step", "impl": "way", "batch": 1, "cache_len": n, "time_us": t,
             "bandwidth_ratio": r, "overhead_share": 0.5}
            for n, t, r in ((16, 10.0, 0.01), (4096, 90.0, 0.4))
        ),
    ]  # fmt: skip
    out = decoding_table(rows).splitlines()  # a set from before the peaks: torch.mm, no ceiling
    assert out[0] == (
        "Measured in this run: copy ceiling 20.0 GB/s, and a large `torch.mm` at 500 GFLOP/s, "
        "drawn as the compute roof, which meets the copy's at 25.0 FLOPs per byte. This set "
        "predates the measured peaks: a GEMM's rate is not the machine's compute peak, which can "
        "be higher."
    )
    peak = {"kind": "ceiling", "name": "compute", "peak": "fp32_fma", "gflop_per_s": 800.0}
    out = decoding_table([rows[0], peak, *rows[2:]]).splitlines()
    assert out[0] == (
        "Measured in this run: copy ceiling 20.0 GB/s, compute peak 800 GFLOP/s (fp32_fma), so the "
        "roofs meet at 40.0 FLOPs per byte."
    )
    assert "| way | 16 | 0.01 | 4096 | 0.40 | 50% |" in out
    assert out[-1] == "Every way's step time grows with the cache (medians), at every batch."


def test_names_from_rows_are_text_in_every_line():
    """A way's name in the drops' list and a dtype in the peaks' line went in raw."""
    tag = "<img src=x onerror=alert(1)>"
    rows = [
        {"kind": "step", "impl": tag, "batch": 1, "cache_len": n, "time_us": t}
        for n, t in ((64, 10.0), (256, 5.0))
    ]
    assert "&lt;img" in monotonic_lines(rows)[-1] and "<img" not in monotonic_lines(rows)[-1]
    peaks = {"fp32_fma_tflops": 0.5, "fp32_isa": tag}
    measured = [
        {**r, "dtype": tag, "peaks": peaks, "mm_peak_share": 0.2, "path": tag} for r in BENCH
    ]
    out = benchmark_table(measured, specs.BENCHMARK_BASELINE)
    assert "0.5 TFLOP/s (&lt;img" in out and "20% of the &lt;img" in out and "<img" not in out


def test_scaling_table_gives_each_length_a_speedup_and_a_verdict():
    def at(variant, seq, median, low, high):
        return {"variant": variant, "seq": seq, "time_us": median, "low_us": low, "high_us": high,
                "repeats": 9, "calls": 9, "peak_memory_bytes": 2**20}  # fmt: skip

    rows = [
        at("naive", 256, 100.0, 95.0, 105.0), at("fast", 256, 50.0, 48.0, 52.0),
        at("naive", 512, 400.0, 390.0, 410.0), at("fast", 512, 405.0, 380.0, 420.0),
        at("naive", 1024, 1600.0, 1580.0, 1620.0), at("fast", 1024, 2000.0, 1900.0, 2100.0),
    ]  # fmt: skip
    out = scaling_table(rows, "naive")
    assert (
        "- `fast`: faster at 1 of 3 lengths, slower at 1 (seq 1024), cannot tell at 1 (seq 512)."
        in out
    )
    assert "| `naive` | 256 | 100.0 µs<br><small>95.0 µs–105.0 µs</small> | 1× | 1.0 MiB |" in out
    assert (
        "| `fast` | 256 | 50.0 µs<br><small>48.0 µs–52.0 µs</small> | 2.00×<br><small>1.83–2.19×, faster</small> |"
        in out
    )
    assert "| 0.99×<br><small>0.93–1.08×, cannot tell</small> |" in out
    assert "| 0.80×<br><small>0.75–0.85×, slower</small> |" in out
    # A set swept before times had ranges: its times alone, no verdict.
    bare = [{k: v for k, v in r.items() if k not in ("low_us", "high_us")} for r in rows]
    out = scaling_table(bare, "naive")
    assert "| `fast` | 256 | 50.0 µs | 1.0 MiB |" in out and "faster" not in out
