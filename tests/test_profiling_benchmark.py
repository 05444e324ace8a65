import json

import pytest

from attn.profiling import benchmark


def test_flops_count_two_matmuls_and_halve_for_causal():
    full = benchmark.attention_flops(1, 1, 128, 64, is_causal=False)
    assert full == 4 * 128 * 128 * 64
    assert benchmark.attention_flops(1, 1, 128, 64, is_causal=True) == full / 2


def test_ratios_compare_custom_variants_with_flash_in_the_same_configuration():
    rows = [
        {"variant": "sdpa_flash", "seq": 512, "head_dim": 64, "is_causal": True, "time_us": 200.0},
        {"variant": "custom_cpu", "seq": 512, "head_dim": 64, "is_causal": True, "time_us": 150.0},
        {"variant": "custom_cpu", "seq": 512, "head_dim": 64, "is_causal": False, "time_us": 90.0},
        {"variant": "inplace", "seq": 512, "head_dim": 64, "is_causal": True, "time_us": 900.0},
    ]
    (only,) = benchmark.ratios(rows)  # no flash row for the non-causal one; inplace is no custom
    assert only["variant"] == "custom_cpu" and only["ratio_to_flash"] == pytest.approx(0.75)


def test_a_tiny_run_writes_rows_plot_and_prints_ratios(tmp_path, capsys):
    argv = [
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        "--seqs",
        "64",
        "--head-dims",
        "32",
        "--repeats",
        "1",
        "--causal-only",
    ]
    assert benchmark.main(argv) == 0
    rows = json.loads((tmp_path / "cpu" / "benchmark.json").read_text())
    assert {r["variant"] for r in rows} == {"custom_cpu", "sdpa_flash", "sdpa_math", "inplace"}
    assert all(r["time_us"] > 0 and r["tflops"] > 0 and r["is_causal"] for r in rows)
    assert "sequence length" in (tmp_path / "cpu" / "benchmark.svg").read_text()
    assert "custom_cpu" in capsys.readouterr().out
    (custom,) = [r for r in rows if r["variant"] == "custom_cpu"]
    (flash,) = [r for r in rows if r["variant"] == "sdpa_flash"]
    assert custom["ratio_to_flash"] == pytest.approx(custom["time_us"] / flash["time_us"], rel=1e-2)
    assert (custom["batch"], custom["heads"]) == (1, 8)  # the shape is stated in every row


def test_tflops_of_a_slow_run_is_not_rounded_to_zero():
    """On a loaded machine a tiny run can take long: its rate must stay a positive number."""
    assert benchmark.significant(4 * 64 * 64 * 32 / 2 / 250_000.0 / 1e6) > 0


@pytest.mark.parametrize(
    "argv", [["--seqs", "0"], ["--seqs", "-5"], ["--repeats", "0"], ["--device", "meta"]]
)
def test_bad_values_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        benchmark.main(argv)
    assert exit_.value.code == 2 and argv[0] in capsys.readouterr().err
