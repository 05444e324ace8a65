"""peaks.svg from benchmark.json's rows: each variant's lowest and highest share of its dtype's
peak, ours first with the path it took, torch.mm last; none without the peaks; recheck redraws it."""

import json
import xml.etree.ElementTree as ElementTree

import pytest
from committed import PROFILES  # the committed sets, as HEAD holds them

from attn.traces import peaks_figure
from attn.traces.analyze import recheck_peaks
from attn.traces.layout import BrokenSet

PEAKS = {"fp32_fma_tflops": 0.5, "fp32_isa": "AVX512", "bf16_tflops": 8.0, "bf16_path": "amx",
         "triad_gbs": 20.0}  # fmt: skip


def row(variant: str, dtype: str, share: float, seq: int = 512, **more) -> dict:
    peak = ("fp32_fma", 0.5) if dtype == "float32" else ("bf16_amx", 8.0)
    return {"variant": variant, "batch": 1, "heads": 8, "seq": seq, "head_dim": 64,
            "is_causal": True, "dtype": dtype, "time_us": 100.0, "peaks": PEAKS,
            "peak": peak[0], "peak_tflops": peak[1], "peak_share": share,
            "mm_peak_share": 0.8 if dtype == "float32" else 0.2, **more}  # fmt: skip


ROWS = [
    row("inplace", "float32", 0.1), row("sdpa_flash", "float32", 0.3),
    row("custom_cpu", "float32", 0.4, path="fp32", ratio_to_flash=0.9),
    row("custom_cpu", "float32", 0.6, seq=1024, path="fp32", ratio_to_flash=0.8),
    row("sdpa_flash", "bfloat16", 0.05), row("custom_cpu", "bfloat16", 0.1, path="amx",
                                            ratio_to_flash=0.7),
]  # fmt: skip


def test_groups_per_dtype_ours_first_with_its_path_then_the_others_then_torch_mm():
    f32, bf16 = peaks_figure.groups(ROWS)
    assert f32.peak == "float32: share of the fp32 FMA peak, 0.5 TFLOP/s, AVX512"
    assert [(b.label, b.low, b.high, b.ours) for b in f32.bars] == [
        ("custom_cpu (fp32)", 0.4, 0.6, True),
        ("sdpa_flash", 0.3, 0.3, False),
        ("inplace", 0.1, 0.1, False),
        ("torch.mm", 0.8, 0.8, False),
    ]
    assert bf16.peak == "bfloat16: share of the bf16 amx peak, 8 TFLOP/s"
    assert [b.label for b in bf16.bars] == ["custom_cpu (amx)", "sdpa_flash", "torch.mm"]


def test_the_picture_is_svg_at_the_pages_width_with_every_label():
    svg = peaks_figure.svg_text(ROWS)
    ElementTree.fromstring(svg.encode())  # parses
    assert 'width="518.4pt"' in svg  # 7.2 in
    for label in ("custom_cpu (amx)", "torch.mm", "40%–60%", "80%", "5%"):
        assert f">{label}</text>" in svg


def test_no_picture_without_shares_of_measured_peaks(tmp_path):
    old = [{"variant": "custom_cpu", "seq": 512, "head_dim": 64, "is_causal": True,
            "time_us": 9.0, "matmul_tflops": 0.2, "ceiling_share": 1.3}]  # fmt: skip
    assert peaks_figure.svg_text(old) is None
    (tmp_path / peaks_figure.FILE).write_text("stale")
    assert peaks_figure.write(tmp_path, old) is False
    assert not (tmp_path / peaks_figure.FILE).exists()  # never shows older rows


def test_recheck_draws_it_from_benchmark_json_and_then_finds_it_current(tmp_path):
    assert recheck_peaks(tmp_path) == []  # no benchmark: nothing to draw
    (tmp_path / "benchmark.json").write_text(json.dumps(ROWS))
    assert recheck_peaks(tmp_path, write=False) == [
        {"path": tmp_path / peaks_figure.FILE, "before": None, "after": None}
    ]
    assert not (tmp_path / peaks_figure.FILE).exists()  # --check writes nothing
    assert len(recheck_peaks(tmp_path)) == 1
    assert (tmp_path / peaks_figure.FILE).read_text() == peaks_figure.svg_text(ROWS)
    assert recheck_peaks(tmp_path) == []


def test_recheck_names_a_benchmark_json_that_is_not_rows(tmp_path):
    (tmp_path / "benchmark.json").write_text('{"not": "rows"}')
    with pytest.raises(BrokenSet, match="benchmark.json is not a benchmark's rows"):
        recheck_peaks(tmp_path)


def test_every_committed_set_has_the_picture_its_rows_give():
    """A set benchmarked with the peaks shows them (recheck draws what is missing); one from
    before has none."""
    for rows_path in sorted(PROFILES.glob("*/benchmark.json")):
        assert recheck_peaks(rows_path.parent, write=False) == [], rows_path.parent
