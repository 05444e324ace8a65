"""attn.profiling.peaks: the probes return rates, with the keys the benchmark reads; no speeds."""

import json

import pytest
import torch

from attn.custom_ops import build_problem, load_ops
from attn.profiling import peaks

needs_ops = pytest.mark.skipif(
    build_problem() is not None, reason=f"custom ops cannot be built here: {build_problem()}"
)
SMALL = dict(budget_s=0.02, repeats=2, array_bytes=2**20)  # the fields, not the rates


@needs_ops
def test_cpu_peaks_are_positive_rates_with_the_keys_the_benchmark_reads():
    found = peaks.cpu_peaks(**SMALL)
    probes = load_ops().cpu_peak_probes()
    assert {"fp32_fma_tflops", "bf16_tflops", "bf16_path", "triad_gbs", "threads"} <= set(found)
    assert found["triad_gbs"] > 0 and found["threads"] == torch.get_num_threads()
    if "fp32_fma" in probes:  # a CPU with AVX2 or AVX-512, in the ISA torch runs
        assert found["fp32_fma_tflops"] > 0 and found["fp32_isa"] in ("AVX2", "AVX512")
    else:
        assert found["fp32_fma_tflops"] is None
    bf16 = {path for path, probe in peaks.BF16_PROBES.items() if probe in probes}
    assert all(found[f"{path}_tflops"] > 0 for path in bf16)
    if bf16:  # the best of the CPU's bf16 paths is its bf16 peak
        assert found["bf16_path"] in bf16
        assert found["bf16_tflops"] == max(found[f"{path}_tflops"] for path in bf16)
    else:
        assert found["bf16_path"] is None and found["bf16_tflops"] is None


@needs_ops
def test_probes_the_cpu_cannot_run_are_refused_by_name():
    with pytest.raises(ValueError, match="no_such_probe cannot run on this CPU"):
        load_ops().cpu_peak_probe("no_such_probe", 1)
    with pytest.raises(ValueError, match="iterations must be positive"):
        load_ops().cpu_peak_probe("fp32_fma", 0)


@needs_ops
def test_the_triad_computes_stream_s_triad_and_returns_bytes_per_second():
    n = 100_003  # not a multiple of the threads' shares
    a, b, c = torch.zeros(n), torch.arange(n, dtype=torch.float32), torch.full((n,), 2.0)
    rate = load_ops().cpu_triad(a, b, c, 3.0)
    assert rate > 0
    torch.testing.assert_close(a, b + 3.0 * c)
    with pytest.raises(ValueError, match="float32"):
        load_ops().cpu_triad(a.double(), b.double(), c.double(), 1.0)


def test_a_rate_is_a_share_of_its_dtype_s_peak():
    found = {"fp32_fma_tflops": 0.5, "bf16_tflops": 7.0, "bf16_path": "amx"}
    assert peaks.peak_of(found, "float32") == ("fp32_fma", 0.5)
    assert peaks.peak_of(found, "bfloat16") == ("bf16_amx", 7.0)
    # Without bf16 units, bf16 work runs on the fp32 FMA units.
    no_bf16 = {**found, "bf16_tflops": None, "bf16_path": None}
    assert peaks.peak_of(no_bf16, "bfloat16") == ("fp32_fma", 0.5)
    assert peaks.peak_of({"fp32_fma_tflops": None}, "float32") is None


def test_the_gpu_probe_times_a_bf16_gemm():
    """Written for cuBLAS; run here on the meta device (no GPU): the keys, not the rate."""
    found = peaks.gpu_peaks("meta", budget_s=0.01, n=64)
    assert found["bf16_path"] == "cublas" and found["bf16_tflops"] > 0
    assert found["fp32_fma_tflops"] is None and found["triad_gbs"] is None


def test_largest_cache_is_read_where_linux_reports_it():
    size = peaks.largest_cache_bytes()
    assert size is None or size >= 2**10


@needs_ops
def test_main_prints_the_peaks_as_json(capsys, monkeypatch):
    monkeypatch.setattr(peaks, "measure_peaks", lambda device: peaks.cpu_peaks(**SMALL))
    assert peaks.main(["--device", "cpu"]) == 0
    assert "bf16_path" in json.loads(capsys.readouterr().out)
