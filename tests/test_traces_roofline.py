"""What limits a kernel, by the roofline, on hand-made benchmark rows: intensity, balance and the
verdict are exact; the sentence follows the verdicts; a row without the peaks has none."""

import pytest

from attn.traces.claims.roofline import fewest_bytes, limit_of, limit_sentence, limits, observed

# fp32 peak 1 TFLOP/s over a triad of 10 GB/s: a balance of 100 FLOP per byte.
PEAKS = {"fp32_fma_tflops": 1.0, "bf16_tflops": 4.0, "bf16_path": "amx", "triad_gbs": 10.0}


def row(seq: int, is_causal: bool = False, dtype: str = "float32", time_us: float = 1000.0,
        variant: str = "custom_cpu", **more) -> dict:  # fmt: skip
    peak = {"float32": 1.0, "bfloat16": 4.0}[dtype]
    return {"variant": variant, "batch": 1, "heads": 1, "seq": seq, "head_dim": 64,
            "is_causal": is_causal, "dtype": dtype, "time_us": time_us, "peaks": PEAKS,
            "peak_tflops": peak, **more}  # fmt: skip


def test_intensity_is_the_flops_over_q_k_v_read_and_the_output_written_once():
    # 4 * s * s * d FLOPs over 4 tensors of s * d elements: s / (bytes per element)
    assert fewest_bytes(1, 1, 1024, 64, "float32") == 4 * 1024 * 64 * 4
    assert limit_of(row(1024)).intensity == 256.0
    assert limit_of(row(1024, is_causal=True)).intensity == 128.0  # the triangle's FLOPs
    assert limit_of(row(1024, dtype="bfloat16")).intensity == 512.0
    assert limit_of(row(1024)).balance == 100.0
    assert limit_of(row(1024, dtype="bfloat16")).balance == 400.0


def test_above_the_balance_compute_bounds_it_at_or_below_memory_does():
    assert limit_of(row(1024)).bound == "compute"  # 256 > 100
    assert limit_of(row(256, is_causal=True)).bound == "memory"  # 32 < 100
    assert limit_of(row(400)).bound == "memory"  # 100 = 100: not above
    assert limit_of(row(1024, dtype="bfloat16", is_causal=True)).bound == "memory"  # 256 < 400


def test_the_shares_are_of_the_compute_peak_and_of_the_triad():
    lim = limit_of(row(1024, time_us=4 * 1024 * 1024 * 64 / 0.5e12 * 1e6))  # 0.5 TFLOP/s
    assert lim.compute_share == pytest.approx(0.5)
    assert lim.memory_share == pytest.approx(0.5e12 / 256 / 10e9)  # bytes/s over the triad's


def test_a_row_without_the_peaks_or_the_triad_has_no_verdict():
    assert limit_of({**row(1024), "peaks": None}) is None
    assert limit_of({**row(1024), "peak_tflops": None}) is None
    assert limit_of({**row(1024), "peaks": {**PEAKS, "triad_gbs": None}}) is None  # a GPU's
    assert limits([row(1024, variant="sdpa_flash")], "custom_cpu") == []
    assert limit_of({**row(1024), "dtype": "int8"}) is None  # bytes per element unknown
    assert limit_of({**row(1024), "batch": None}) is None


def test_the_sentence_says_compute_memory_or_both():
    # 0.5 and 0.25 TFLOP/s: 268,435,456 FLOPs in 536.870912 µs, four times that in 4294.967296 µs
    half, quarter = row(1024, time_us=536.870912), row(2048, time_us=4294.967296)
    compute = limit_sentence([half, quarter], "custom_cpu")
    assert compute.startswith("By the roofline, compute bounds custom_cpu, not memory: ")
    assert "q, k and v read once and the output written once" in compute
    assert compute.endswith(
        "In float32, intensity 256 to 512 FLOP/byte against a balance of 100: above it at 2 of 2 "
        "shapes, reaching 25% to 50% of the compute peak."
    )
    memory = limit_sentence([row(256, is_causal=True)], "custom_cpu")
    assert memory.startswith("By the roofline, memory bounds custom_cpu, not compute: ")
    assert "above it at 0 of 1 shapes, reaching" in memory and "of the triad's bandwidth." in memory
    both = limit_sentence([row(1024), row(256, is_causal=True)], "custom_cpu")
    assert both.startswith(
        "By the roofline, compute bounds custom_cpu at 1 of 2 shapes, memory at the other 1: "
    )
    assert "where compute bounds it and" in both and "where memory does." in both


def test_observed_is_said_per_dtype():
    found = limits([row(1024), row(1024, dtype="bfloat16")], "custom_cpu")
    text = observed(found)
    assert text.startswith("in float32, intensity 256 FLOP/byte against a balance of 100: above")
    assert "; in bfloat16, intensity 512 FLOP/byte against a balance of 400: above it at 1" in text


def test_a_set_without_the_peaks_says_not_measured():
    old = [{**row(1024), "peaks": None, "peak_tflops": None, "matmul_tflops": 0.2}]
    assert "not measured in this set (its benchmark ran before" in limit_sentence(old, "custom_cpu")
    gpu = [{**row(1024), "peaks": {"bf16_tflops": 900.0, "triad_gbs": None}}]  # a GEMM alone
    assert limit_sentence(gpu, "custom_cpu").endswith(
        "not measured in this set (it measured no memory bandwidth beside the compute peak)."
    )


def test_an_unknown_dtype_is_named():
    with pytest.raises(ValueError, match="dtype 'int8' has no known size"):
        fewest_bytes(1, 1, 8, 8, "int8")
