import json

import pytest
import torch

from attn.custom_ops import load_ops
from attn.profiling import benchmark, config, peaks
from attn.profiling.environment import hardware_slug
from attn.profiling.flags import ProfilingError
from attn.traces.figures import peaks_figure


@pytest.fixture
def small_peaks(monkeypatch):
    """Probes short enough for a test: their fields, not their rates."""
    found = peaks.cpu_peaks(budget_s=0.02, repeats=2, array_bytes=2**20)
    monkeypatch.setattr(benchmark, "measure_peaks", lambda device: found)
    return found


def test_flops_count_two_matmuls_and_the_triangle_for_causal():
    full = benchmark.attention_flops(1, 1, 128, 64, is_causal=False)
    assert full == 4 * 128 * 128 * 64
    assert benchmark.attention_flops(1, 1, 128, 64, is_causal=True) == full / 2


def test_ratios_compare_custom_variants_with_flash_in_the_same_configuration():
    shape = {"seq": 512, "head_dim": 64, "is_causal": True, "dtype": "float32"}
    rows = [
        {**shape, "variant": "sdpa_flash", "time_us": 200.0},
        {**shape, "variant": "custom_cpu", "time_us": 150.0},
        {**shape, "variant": "custom_cpu", "is_causal": False, "time_us": 90.0},
        {**shape, "variant": "custom_cpu", "dtype": "bfloat16", "time_us": 60.0},
        {**shape, "variant": "inplace", "time_us": 900.0},
    ]
    # No flash row for the non-causal one, nor for bfloat16; inplace is no custom kernel.
    (only,) = benchmark.ratios(rows)
    assert only["variant"] == "custom_cpu" and only["ratio_to_flash"] == pytest.approx(0.75)


def test_a_tiny_run_writes_rows_plot_and_prints_ratios(tmp_path, capsys, monkeypatch, small_peaks):
    monkeypatch.setitem(benchmark.MATMUL_N, "cpu", 64)  # a small torch.mm: the fields, not the rate
    argv = [
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        "--seqs",
        "64",
        "--head-dims",
        "32",
        "--budget",
        "0.01",
        "--causal-only",
    ]
    assert benchmark.main(argv) == 0
    rows = json.loads((tmp_path / hardware_slug("cpu") / "benchmark.json").read_text())
    variants = {"custom_cpu", "sdpa_flash", "sdpa_math", "inplace"}
    # The CPU grid's dtypes, each with every variant.
    assert {(r["variant"], r["dtype"]) for r in rows} == {
        (v, d) for v in variants for d in ("float32", "bfloat16")
    }
    assert all(r["time_us"] > 0 and r["tflops"] > 0 and r["is_causal"] for r in rows)
    # Each time with its interval; each row's FLOP/s, and torch.mm's, as a share of the measured
    # peak of its dtype, never above 1; the peaks themselves in every row.
    assert all(0 < r["low_us"] <= r["time_us"] <= r["high_us"] and r["repeats"] >= 1 for r in rows)
    for r in rows:
        assert r["peaks"] == small_peaks
        assert (r["peak"], r["peak_tflops"]) == peaks.peak_of(small_peaks, r["dtype"])
        assert r["peak_share"] == pytest.approx(r["tflops"] / r["peak_tflops"], rel=0.01)
        assert r["mm_peak_share"] == pytest.approx(r["mm_tflops"] / r["peak_tflops"], rel=0.01)
        assert 0 < r["peak_share"] <= 1 and 0 < r["mm_peak_share"] <= 1
        assert "ceiling_share" not in r and "matmul_tflops" not in r
    # custom_cpu's rows say how it multiplied its tiles: bf16 on the path this CPU offers first.
    paths = {r["dtype"]: r["path"] for r in rows if r["variant"] == "custom_cpu"}
    assert paths == {"float32": "fp32", "bfloat16": load_ops().cpu_bf16_path(32, 64)}
    assert all("path" not in r for r in rows if r["variant"] != "custom_cpu")
    # Which vector ISA torch's kernels (and custom_cpu's softmax) ran with, in every row.
    assert {r["cpu_capability"] for r in rows} == {torch.backends.cpu.get_cpu_capability()}
    assert (
        "bfloat16, head_dim 32, causal"
        in (tmp_path / hardware_slug("cpu") / "benchmark.svg").read_text()
    )
    # Each variant's share of the peaks, drawn from the rows as recheck draws it.
    peaks_svg = tmp_path / hardware_slug("cpu") / "peaks.svg"
    assert peaks_svg.read_text() == peaks_figure.svg_text(rows)
    assert f">custom_cpu ({paths['bfloat16']})</text>" in peaks_svg.read_text()
    assert "custom_cpu" in capsys.readouterr().out
    for dtype in ("float32", "bfloat16"):
        (custom,) = [r for r in rows if r["variant"] == "custom_cpu" and r["dtype"] == dtype]
        (flash,) = [r for r in rows if r["variant"] == "sdpa_flash" and r["dtype"] == dtype]
        ratio = custom["time_us"] / flash["time_us"]
        assert custom["ratio_to_flash"] == pytest.approx(ratio, rel=1e-2)
        assert custom["ratio_low"] <= custom["ratio_to_flash"] <= custom["ratio_high"]
        assert (custom["batch"], custom["heads"]) == (1, 8)  # the shape is stated in every row


def test_a_share_above_1_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    """A rate above its machine's peak means a wrong probe or FLOP count: no file, one error."""
    tiny = {"fp32_fma_tflops": 1e-9, "bf16_tflops": None, "bf16_path": None, "triad_gbs": 1.0}
    monkeypatch.setattr(benchmark, "measure_peaks", lambda device: tiny)
    monkeypatch.setitem(benchmark.MATMUL_N, "cpu", 64)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--seqs", "64", "--head-dims", "32"]
    argv += ["--budget", "0.01", "--causal-only", "--dtypes", "float32", "--variants", "sdpa_math"]
    assert benchmark.main(argv) == 1
    err = capsys.readouterr().err
    assert "the peak's probe (attn.profiling.peaks) or the FLOP count" in err
    assert not (tmp_path / hardware_slug("cpu") / "benchmark.json").exists()


def test_check_shares_names_the_row_and_passes_rows_without_shares():
    row = {"variant": "custom_cpu", "dtype": "bfloat16", "seq": 2048, "head_dim": 64}
    old = {**row, "ceiling_share": 1.83, "matmul_tflops": 0.19}  # a row from before the peaks
    benchmark.check_shares([old, {**row, "peak_share": 1.0, "mm_peak_share": 0.2}])
    with pytest.raises(ProfilingError, match="custom_cpu, bfloat16, seq 2048"):
        benchmark.check_shares([{**row, "tflops": 9.0, "peak_share": 1.2, "peak": "bf16_amx"}])
    with pytest.raises(ProfilingError, match="mm_peak_share|times the measured"):
        benchmark.check_shares([{**row, "mm_tflops": 9.0, "mm_peak_share": 1.01}])


def test_rows_from_before_the_peaks_are_kept_as_they_are(tmp_path):
    """An earlier benchmark.json (matmul_tflops, ceiling_share) stays readable and merged."""
    old = {"variant": "custom_cpu", "seq": 4096, "head_dim": 64, "is_causal": True,
           "dtype": "float32", "time_us": 600.0, "tflops": 0.2, "matmul_tflops": 0.19,
           "ceiling_share": 1.05}  # fmt: skip
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps([old]))
    now = [{"variant": "custom_cpu", "seq": 64, "head_dim": 64, "is_causal": True,
            "dtype": "float32", "time_us": 9.0, "tflops": 0.05, "peak_share": 0.1}]  # fmt: skip
    assert benchmark.merged(path, now) == [old, *now]


def test_tflops_of_a_slow_run_is_not_rounded_to_zero():
    """On a loaded machine a tiny run can take long: its rate must stay a positive number."""
    assert benchmark.significant(4 * 64 * 64 * 32 / 2 / 250_000.0 / 1e6) > 0


@pytest.mark.parametrize(
    "argv", [["--seqs", "0"], ["--seqs", "-5"], ["--budget", "x"], ["--device", "meta"]]
)
def test_bad_values_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        benchmark.main(argv)
    assert exit_.value.code == 2 and argv[0] in capsys.readouterr().err


def test_no_runnable_variant_leaves_the_previous_rows(tmp_path, capsys):
    rows = tmp_path / hardware_slug("cpu") / "benchmark.json"
    rows.parent.mkdir()
    kept = '[{"variant": "kept", "seq": 64, "head_dim": 32, "is_causal": true}]\n'
    rows.write_text(kept)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--variants", "sdpa_efficient"]
    assert benchmark.main([*argv, "--seqs", "64", "--head-dims", "32", "--budget", "0.01"]) == 1
    assert rows.read_text() == kept
    assert "sdpa_efficient" in capsys.readouterr().err


def test_a_run_of_a_few_rows_keeps_the_configurations_it_did_not_measure(tmp_path):
    """nox -s benchmark -- --seqs 64 replaced the committed benchmark.json with its own rows."""
    row = {"head_dim": 64, "is_causal": True, "dtype": "float32"}
    before = [
        {**row, "seq": 64, "variant": "sdpa_flash", "time_us": 9.0},
        {**row, "seq": 64, "variant": "custom_cpu", "time_us": 8.0},
        {**row, "seq": 4096, "variant": "sdpa_flash", "time_us": 900.0},
        {**row, "seq": 4096, "variant": "custom_cpu", "time_us": 600.0},
    ]
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(before))
    now = [{**row, "seq": 64, "variant": "sdpa_flash", "time_us": 10.0}]
    assert benchmark.merged(path, now) == [*before[2:], *now]  # seq 64: this run's rows only


def test_an_earlier_file_that_is_not_rows_is_named_before_timing(tmp_path, capsys):
    rows = tmp_path / hardware_slug("cpu") / "benchmark.json"
    rows.parent.mkdir()
    rows.write_text('{"not": "rows"}')
    argv = ["--out", str(tmp_path), "--device", "cpu", "--seqs", "64", "--budget", "0.01"]
    assert benchmark.main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{hardware_slug('cpu')}/benchmark.json is not a benchmark's rows" in line


def test_a_shape_that_cannot_fit_is_one_line_before_any_timing(tmp_path, monkeypatch, capsys):
    """`--seqs 3000000` ended in a RuntimeError traceback. The memory free is made small here."""
    monkeypatch.setattr(config, "available_bytes", lambda device: 2**16)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--variants", "sdpa_math", "--seqs", "64"]
    assert (
        benchmark.main([*argv, "--head-dims", "32", "--dtypes", "float32", "--budget", "0.01"]) == 1
    )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the shape 1 x 8 x 64 x 64 x 32 (float32) needs")
    assert line.endswith("give a smaller --seqs or --head-dims")
    assert not (tmp_path / hardware_slug("cpu")).exists()


@pytest.mark.parametrize("where", ["benchmark.json", "benchmark.svg", "peaks.svg"])
def test_an_output_that_is_a_folder_is_refused_before_any_timing(
    tmp_path, monkeypatch, capsys, where
):
    """benchmark.json as a folder crashed after the timing; benchmark.svg as one left the pair
    half written."""
    monkeypatch.setattr(benchmark, "run", lambda *a, **k: pytest.fail("timed before the check"))
    (tmp_path / hardware_slug("cpu") / where).mkdir(parents=True)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--seqs", "64", "--budget", "0.01"]
    assert benchmark.main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{where} is not a plain file" in line


def test_the_pair_is_written_whole_or_not_at_all(tmp_path):
    """A drawing that fails leaves benchmark.json as it was (it was replaced before the svg)."""
    folder = tmp_path / hardware_slug("cpu")
    folder.mkdir()
    (folder / "benchmark.json").write_text("[]\n")

    def cannot_draw(rows, title, path):
        raise ValueError("no figure")

    with pytest.raises(ValueError, match="no figure"):
        benchmark.sweeps.write(tmp_path, "cpu", "benchmark", [{"seq": 64}], cannot_draw, "t")
    assert (folder / "benchmark.json").read_text() == "[]\n"
    assert sorted(p.name for p in folder.iterdir()) == ["benchmark.json"]  # no scratch left


def test_the_backward_is_timed_beside_the_forward_for_the_kernels_that_train(
    tmp_path, capsys, monkeypatch, small_peaks
):
    monkeypatch.setitem(benchmark.MATMUL_N, "cpu", 64)
    argv = ["--out", str(tmp_path), "--device", "cpu", "--seqs", "64", "--head-dims", "32",
            "--budget", "0.01", "--causal-only", "--dtypes", "float32",
            "--variants", "custom_cpu", "sdpa_flash", "sdpa_math"]  # fmt: skip
    assert benchmark.main(argv) == 0
    rows = json.loads((tmp_path / hardware_slug("cpu") / "benchmark.json").read_text())
    by_name = {r["variant"]: r for r in rows}
    assert "backward" not in by_name["sdpa_math"]  # neither a custom kernel nor the baseline
    custom, flash = by_name["custom_cpu"], by_name["sdpa_flash"]
    for r in (custom, flash):
        for key in benchmark.TRAINING_KEYS:
            t = r[key]
            assert 0 < t["low_us"] <= t["time_us"] <= t["high_us"] and t["repeats"] >= 1, key
        assert r["backward"]["peak_memory_bytes"] > 0
        over = r["backward"]["time_us"] / r["time_us"]
        # Stored to three decimals: at a tiny shape the ratio can be 0.029, where 1% is less.
        assert r["backward"]["over_forward"] == pytest.approx(over, rel=1e-2, abs=5e-4)
        assert r["backward"]["over_forward_low"] <= over <= r["backward"]["over_forward_high"]
    for key in benchmark.TRAINING_KEYS:
        ours, theirs = custom[key], flash[key]
        assert ours["ratio_to_flash"] == pytest.approx(
            ours["time_us"] / theirs["time_us"], rel=1e-2
        )
        assert ours["ratio_low"] <= ours["ratio_to_flash"] <= ours["ratio_high"]
        assert ours["verdict"] in ("faster", "slower", "cannot tell")
        assert flash[key]["ratio_to_flash"] == 1.0
    assert "backward ms (IQR)" in capsys.readouterr().out


def test_a_backward_verdict_needs_its_whole_interval_on_one_side():
    shape = {"seq": 512, "head_dim": 64, "is_causal": True, "dtype": "float32"}

    def row(name, backward):
        timed = {"time_us": 100.0, "low_us": 90.0, "high_us": 110.0, "repeats": 5}
        return {**shape, "variant": name, **timed,
                "backward": {**timed, **backward}, "training_step": timed}  # fmt: skip

    flash = row("sdpa_flash", {})
    clear = row("custom_cpu", {"time_us": 50.0, "low_us": 45.0, "high_us": 55.0})
    close = row("custom_cpu", {"time_us": 95.0, "low_us": 85.0, "high_us": 105.0})
    (_, found) = benchmark.training_ratios([flash, clear])
    assert found["backward"]["verdict"] == "faster"
    assert found["backward"]["over_forward"] == 0.5
    assert found["training_step"]["verdict"] == "cannot tell"
    (_, found) = benchmark.training_ratios([flash, close])
    assert found["backward"]["verdict"] == "cannot tell"
