import json

import pytest

from attn.profiling import scaling


@pytest.fixture(scope="module")
def rows():
    return scaling.sweep("cpu", (128, 256, 512), budget_s=0.01)


def by(rows, variant):
    return {r["seq"]: r for r in rows if r["variant"] == variant}


def test_rows_cover_every_available_variant(rows):
    names = {r["variant"] for r in rows}
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash"} <= names
    assert "sdpa_cudnn" not in names
    fields = {"variant", "seq", "time_us", "low_us", "high_us", "repeats", "calls"}
    assert all(set(r) == fields | {"peak_memory_bytes"} for r in rows)
    assert all(0 < r["low_us"] <= r["time_us"] <= r["high_us"] for r in rows)


def test_materialised_scores_grow_quadratically(rows):
    for name in ("naive", "sdpa_math"):
        mem = by(rows, name)
        assert mem[512]["peak_memory_bytes"] / mem[128]["peak_memory_bytes"] > 10  # 16x ideal


def test_fused_kernels_grow_near_linearly(rows):
    for name in ("sdpa_flash", "custom_cpu"):
        mem = by(rows, name)
        if not mem:
            continue
        assert mem[512]["peak_memory_bytes"] / mem[128]["peak_memory_bytes"] < 6  # 4x ideal


def test_write_makes_json_and_picture(rows, tmp_path):
    folder = scaling.write(tmp_path, "cpu", rows)
    assert json.loads((folder / "scaling.json").read_text()) == rows
    svg = (folder / "scaling.svg").read_text()
    assert "sequence length" in svg and "naive" in svg
    # and the verdicts of the claims on its rows, decided as they are written
    assert sorted(p.name for p in folder.iterdir()) == [
        "claims.json",
        "scaling.json",
        "scaling.svg",
    ]


@pytest.mark.parametrize("argv", [["--seqs", "0"], ["--seqs", "-5"], ["--out", ""]])
def test_bad_values_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        scaling.main(argv)
    assert exit_.value.code == 2 and argv[0] in capsys.readouterr().err
