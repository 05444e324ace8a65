"""attn.profiling.decoding on tiny sizes: structure and sane ratios, never speed."""

import json
import math
import re

import pytest
import torch

import attn
from attn import specs
from attn.profiling import decoding, run
from attn.profiling.config import ProfileConfig, config_for, decode_config
from attn.profiling.decoding import (
    bandwidth_probe,
    ceilings,
    compute_ceiling,
    expanded,
    groups_as_rows,
    implementations,
    make_step,
    sweep,
    write,
)
from attn.profiling.environment import hardware_slug


def overhead_bound(rows: list[dict], share: float = 0.5) -> list[dict]:
    """The steps where a cache of length 1 already costs at least `share` of the step's time."""
    return [r for r in rows if r["kind"] == "step" and r["overhead_share"] >= share]


# Hand-made peaks: the sweep's fields, not a probe's rate (tests/test_profiling_peaks.py probes).
PEAKS = {"fp32_fma_tflops": 0.5, "fp32_isa": "AVX2", "bf16_tflops": None, "bf16_path": None,
         "triad_gbs": 20.0, "threads": 1}  # fmt: skip
TINY = dict(heads=4, kv_heads=2, head_dim=16, probe_bytes=2**20, peaks=PEAKS, budget_s=0.001)


def positive_finite(x):
    return isinstance(x, float | int) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def rows():
    return sweep("cpu", (8, 32), (1, 2), **TINY)


def test_probes_report_positive_rates():
    copy = bandwidth_probe("cpu", 2**20)
    assert copy["kind"] == "ceiling" and copy["bytes"] == 2 * 2**20
    assert positive_finite(copy["gb_per_s"]) and positive_finite(copy["time_us"])


def test_the_compute_roof_is_the_measured_peak_of_the_dtype():
    roof = compute_ceiling(PEAKS, torch.float32)
    assert (roof["name"], roof["peak"], roof["gflop_per_s"]) == ("compute", "fp32_fma", 500.0)
    amx = {**PEAKS, "bf16_tflops": 8.0, "bf16_path": "amx"}
    assert (compute_ceiling(amx, torch.bfloat16)["peak"], compute_ceiling(amx, torch.bfloat16)["gflop_per_s"]) == ("bf16_amx", 8000.0)  # fmt: skip
    assert compute_ceiling(PEAKS, torch.bfloat16)["peak"] == "fp32_fma"  # no bf16 units: FMAs
    with pytest.raises(ValueError, match="no compute peak was measured for float32"):
        compute_ceiling({"fp32_fma_tflops": None, "bf16_tflops": None}, torch.float32)


def test_a_set_from_before_the_peaks_reads_its_matmul_row():
    old = [{"kind": "ceiling", "name": "copy", "gb_per_s": 20.0},
           {"kind": "ceiling", "name": "matmul", "gflop_per_s": 300.0}]  # fmt: skip
    copy, roof = ceilings(old)
    assert (copy["name"], roof["name"]) == ("copy", "matmul")
    assert decoding.compute_label(roof) == "torch.mm (timed, not a peak)"


def test_sweep_rows_have_the_contract(rows):
    copy, compute, read, read_small, *steps = rows
    assert (copy["name"], compute["name"], compute["peaks"]) == ("copy", "compute", PEAKS)
    assert compute["gflop_per_s"] == 500.0 and compute["peak"] == "fp32_fma"
    assert (read["kind"], read["name"], read_small["name"]) == ("probe", "read", "read_small")
    assert read["bytes"] == 2**20 and read_small["bytes"] == 2**16
    for probe in (read, read_small):
        assert positive_finite(probe["ratio_to_copy"]) and positive_finite(probe["gb_per_s"])
    assert len(copy["samples_gb_per_s"]) == 2 and copy["gb_per_s"] == max(copy["samples_gb_per_s"])
    ways = implementations("cpu", torch.float32)
    assert {*specs.in_sweep("decoding"), "SDPA enable_gqa, math only"} <= set(ways)
    cells = {(r["impl"], r["batch"], r["cache_len"]) for r in steps}
    assert cells == {(w, b, n) for w in ways for b in (1, 2) for n in (8, 32)}
    for r in steps:
        # bytes of K and V read once, and 2 FLOPs per multiply-add of q.k and p.v
        assert r["kv_bytes"] == 2 * r["batch"] * 2 * r["cache_len"] * 16 * 4
        assert r["flops"] == 4 * r["batch"] * 4 * r["cache_len"] * 16
        assert r["intensity"] == pytest.approx(2 * (4 / 2) / 4)  # 2 x group / bytes per element
        for key in ("time_us", "gb_per_s", "gflop_per_s", "bandwidth_ratio", "compute_ratio"):
            assert positive_finite(r[key]), (key, r)
        assert r["bandwidth_ratio"] == pytest.approx(r["gb_per_s"] / copy["gb_per_s"])
        assert r["compute_ratio"] == pytest.approx(r["gflop_per_s"] / 500.0)
        assert 0 < r["overhead_share"] <= 1 and positive_finite(r["overhead_us"])
        assert r["threads"] == torch.get_num_threads()
    assert all(r in steps for r in overhead_bound(rows, share=0.0))
    json.dumps(rows)  # plain data


def test_a_slow_way_is_not_run_at_longer_caches(monkeypatch):
    monkeypatch.setattr(decoding, "SLOW_SECONDS", 0.0)  # every way counts as slow after one length
    found = sweep("cpu", (8, 16), (1,), **TINY)
    assert {r["cache_len"] for r in found if r["kind"] == "step"} == {8}


def test_threads_are_restored():
    before = torch.get_num_threads()
    found = sweep("cpu", (8,), (1,), threads=1, **TINY)
    assert torch.get_num_threads() == before
    assert {r["threads"] for r in found} == {1}


def test_write_puts_json_and_a_readable_svg(tmp_path, rows):
    folder = write(tmp_path, "cpu", rows)
    assert folder == tmp_path / hardware_slug("cpu")
    assert json.loads((folder / "decoding.json").read_text()) == json.loads(json.dumps(rows))
    svg = (folder / "decoding.svg").read_text()
    assert 'width="518.4pt"' in svg  # 7.2 in at 72 pt per inch
    sizes = [float(s) for s in re.findall(r"font-size: ([\d.]+)px", svg)]
    assert sizes and min(sizes) >= 8.5
    assert "copy ceiling" in svg and "ridge" in svg and "SDPA enable_gqa" in svg
    assert "fp32 FMA peak 500 GFLOP/s" in svg and "matmul" not in svg
    assert "sum of 1 MiB" in svg
    # and the verdicts of the claims on its rows, decided as they are written
    assert sorted(p.name for p in folder.iterdir()) == [
        "claims.json",
        "decoding.json",
        "decoding.svg",
    ]


@pytest.mark.parametrize("shape", [(1, 8, 2, 40, 32), (2, 6, 3, 17, 64), (1, 4, 1, 5, 16)])
def test_custom_kernel_ways_match_the_reference(shape):
    custom = attn.get_variant("custom_cpu")
    if custom.why_unavailable("cpu") is not None:
        pytest.skip(custom.why_unavailable("cpu"))
    batch, heads, kv_heads, cache_len, head_dim = shape
    q, k, v = make_step("cpu", torch.float32, batch=batch, cache_len=cache_len, heads=heads,
                        kv_heads=kv_heads, head_dim=head_dim)  # fmt: skip
    groups = heads // kv_heads
    expected = attn.reference_attention(
        q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1), is_causal=False
    )
    for way in (groups_as_rows(custom), expanded(custom)):
        out = way(q, k, v)
        assert out.shape == q.shape
        torch.testing.assert_close(out.double(), expected, atol=2e-5, rtol=0)


def test_expanded_keys_have_stride_zero_across_a_group():
    seen = {}

    class Spy(attn.Variant):
        name, title = "spy", "spy"

        def forward(self, q, k, v, *, is_causal=True):
            seen["k"] = k
            return q.clone()

        def _attention(self, q, k, v, *, is_causal):  # pragma: no cover
            raise AssertionError

    q, k, v = make_step("cpu", torch.float32, batch=2, cache_len=5, heads=8, kv_heads=2,
                        head_dim=4)  # fmt: skip
    expanded(Spy())(q, k, v)
    assert seen["k"].shape == (4, 4, 5, 4) and seen["k"].stride(1) == 0
    assert seen["k"].data_ptr() == k.data_ptr()  # a view: no copy of the cache


def test_decode_config_makes_gqa_inputs():
    config = decode_config("cpu")
    assert config.kv_heads and config.seq_q == 1 and not config.is_causal
    small = ProfileConfig(batch=2, heads=4, kv_heads=2, seq_q=1, seq_k=7, head_dim=8)
    q, k, v = small.make_inputs()
    assert q.shape == (2, 4, 1, 8) and k.shape == v.shape == (2, 2, 7, 8)
    assert small.shape()["kv_heads"] == 2
    for name in specs.names():
        decoded = config_for(name, small)
        if specs.spec(name).inputs == "decode":
            assert decoded.kv_heads == decode_config("cpu").kv_heads and decoded.seq_q == 1
        else:
            assert decoded is small
    flags = run.example_flags(small)
    assert flags[flags.index("--kv-heads") + 1] == "2" and "--no-causal" not in flags


def test_command_line_writes_both_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(decoding.PROBE_BYTES, "cpu", 2**20)
    monkeypatch.setattr(decoding, "measure_peaks", lambda device: PEAKS)
    monkeypatch.setattr(decoding, "CELL_SECONDS", 0.001)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--lengths", "8", "--batches", "1",
            "--threads", "1"]  # fmt: skip
    assert decoding.main(argv) == 0
    assert (tmp_path / hardware_slug("cpu") / "decoding.json").is_file()
    assert (tmp_path / hardware_slug("cpu") / "decoding.svg").is_file()
    out = capsys.readouterr().out
    assert "copy ceiling" in out and "fp32 FMA peak 500.0 GFLOP/s" in out
    with pytest.raises(SystemExit):
        decoding.main(["--lengths", "0"])
