"""attn.profiling.dispatch: what an unpinned SDPA call ran, and torch's reasons for each refusal,
captured on the CPU at small shapes."""

from __future__ import annotations

import json

import pytest
import torch

from attn.profiling import dispatch
from attn.profiling.environment import hardware_slug
from attn.traces.claims.dispatch_tables import INPUTS, backend_of


@pytest.mark.parametrize("inputs", INPUTS)
def test_every_kind_of_input_runs_unpinned(inputs):
    q, k, v, kwargs = dispatch.make_inputs("cpu", torch.float32, 64, inputs)
    ops = dispatch.sdpa_ops(q, k, v, kwargs)
    assert ops[0] == "aten::scaled_dot_product_attention"  # the front op, then its backend's
    assert backend_of(ops) in ("sdpa_flash", "sdpa_math")


def test_a_padding_mask_is_a_model_s_a_boolean_and_an_additive_one():
    _, _, _, bool_mask = dispatch.make_inputs("cpu", torch.bfloat16, 64, "bool mask")
    _, _, _, float_mask = dispatch.make_inputs("cpu", torch.bfloat16, 64, "float mask")
    keep, add = bool_mask["attn_mask"], float_mask["attn_mask"]
    assert keep.shape == (dispatch.BATCH, 1, 1, dispatch.SEQ) and keep.dtype == torch.bool
    assert keep[0].all() and not keep[1].all()  # the second sequence is padded
    assert add.dtype == torch.bfloat16 and bool((add == 0).eq(keep).all())


def test_dropout_runs_math_and_pinned_flash_says_why_without_paths():
    q, k, v, kwargs = dispatch.make_inputs("cpu", torch.float32, 64, "dropout")
    assert backend_of(dispatch.sdpa_ops(q, k, v, kwargs)) == "sdpa_math"
    said = dispatch.refusal("flash", q, k, v, kwargs)
    assert said and any("dropout" in line for line in said)
    assert said[-1] == "No available kernel. Aborting execution."  # what it raised, last
    assert not any("Triggered internally" in line or "/" in line for line in said)
    assert dispatch.refusal("math", q, k, v, kwargs) is None  # math runs anything


def test_torchs_words_lose_the_build_machines_paths():
    message = (
        "Flash attention kernel not used because: (Triggered internally at "
        "/__w/pytorch/pytorch/aten/src/ATen/native/transformers/sdp_utils_cpp.cpp:99.)"
    )
    assert dispatch.plain(message) == "Flash attention kernel not used because:"
    assert dispatch.plain("see /home/someone/x.py\nfor more") == "see <path> for more"


def test_the_sweep_writes_its_rows_and_picture(tmp_path, monkeypatch):
    monkeypatch.setattr(dispatch, "HEAD_DIMS", (64,))
    monkeypatch.setattr(dispatch, "DTYPES", {"float32": torch.float32})
    assert dispatch.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    folder = tmp_path / hardware_slug("cpu")
    rows = json.loads((folder / "dispatch.json").read_text())
    assert [r["inputs"] for r in rows] == list(INPUTS)
    assert {r["backend"] for r in rows} == {"sdpa_flash", "sdpa_math"}
    assert set(rows[0]["refused"]) == {"math", "efficient", "flash", "cudnn"}
    assert rows[0]["refused"]["flash"] is None and rows[0]["refused"]["efficient"]
    svg = (folder / "dispatch.svg").read_text()
    assert ">flash<" in svg and ">math<" in svg and "head_dim 64" in svg
