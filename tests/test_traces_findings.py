"""The findings (attn.traces.findings): each record's advice and page, and each detector on the GPU
fixture, on hand-made traces, on CPU profiles recorded here, and on real traces recorded by others
(counted a second way from the raw JSON)."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile, record_function

from attn import specs
from attn.traces.findings import FINDINGS
from attn.traces.trace import Trace, read_trace
from attn.traces.units import time_text

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count  # noqa: E402
from diagnose_cases import (  # noqa: E402
    FP32,
    ROOT,
    diagnose,
    fixture,
    implementations,
    kinds,
    raw,
    sdpa_on_gpu,
    traced,
    with_backward,
)


def test_every_finding_points_at_a_page_and_gives_one_sentence():
    for f in FINDINGS:
        assert (ROOT / "docs" / f.chapter(specs.chapter_teaching)).is_file(), f.kind
        assert f.advice.endswith(".") and ". " not in f.advice, f.kind


def test_gpu_naive_is_eager_and_its_masked_fill_copies():
    result = diagnose(Trace(fixture()))
    (row,) = result["attention"]
    assert (row["implementation"], row["where"], row["calls"]) == ("eager", "attn_fwd", 2)
    # First product to last: bmm, mul (of the scores), masked_fill_, softmax, bmm; the Memcpy
    # is device work of the call, but no kernel.
    assert row["kernels_per_call"] == 5 and row["device_time_us_per_call"] > 0
    assert kinds(result) == {"out_of_place_masked_fill": 2, "eager_attention": 2}
    # The trace's synchronizes follow attn_fwd, in the step: not inside the attention.
    assert "sync_in_forward" not in kinds(result)


def test_a_synchronize_inside_the_forward_is_found():
    raw = fixture()
    for e in raw["traceEvents"]:
        if e.get("name") == "cudaDeviceSynchronize" and e["ts"] < 1300:
            e.update(ts=1130.0, dur=3.0)  # inside the first attn_fwd (1000 to 1134)
    result = diagnose(Trace(raw))
    assert kinds(result)["sync_in_forward"] == 1
    assert next(f for f in result["findings"] if f["kind"] == "sync_in_forward")["chapter"] == (
        "reading-a-profile.md"
    )


# --- hand-made traces: SDPA's math backend on a GPU, with and without shapes ----------------------


def test_math_on_a_gpu_is_a_fallback_with_its_reasons():
    result = diagnose(Trace(sdpa_on_gpu("aten::_scaled_dot_product_attention_math", FP32)))
    assert implementations(result) == ["sdpa_math"]
    assert kinds(result) == {"math_fallback": 1, "fp32_attention_on_gpu": 1}
    (math,) = [f for f in result["findings"] if f["kind"] == "math_fallback"]
    assert "float inputs" in math["detail"] and "attn_mask of shape [128, 128]" in math["detail"]
    assert math["chapter"] == "sdpa.md"


def test_without_shapes_the_reason_and_the_dtype_are_not_guessed():
    result = diagnose(Trace(sdpa_on_gpu("aten::_scaled_dot_product_attention_math", {})))
    (math,) = result["findings"]
    assert math["kind"] == "math_fallback" and "record_shapes" in math["detail"]
    assert [g["kind"] for g in result["not_checked"]] == ["fp32_attention_on_gpu"]


def test_a_fused_backend_on_bf16_is_no_finding():
    bf16 = {"Input Dims": [[1, 8, 128, 64]] * 3, "Input type": ["c10::BFloat16"] * 3}
    result = diagnose(Trace(sdpa_on_gpu("aten::_scaled_dot_product_efficient_attention", bf16)))
    assert implementations(result) == ["sdpa_efficient"] and result["findings"] == []


# --- a CPU profile of Hugging Face's repeat_kv, recorded here ---------------------------------------


def profiled(fn, tmp_path) -> Trace:
    q, k, v = torch.randn(1, 8, 4, 16), torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16)
    with profile(record_shapes=True) as prof, torch.no_grad(), record_function("attn_fwd"):
        fn(q, k, v)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    return read_trace(tmp_path / "trace.json")


def hf_repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    b, heads, s, d = x.shape
    return x[:, :, None, :, :].expand(b, heads, n_rep, s, d).reshape(b, heads * n_rep, s, d)


def test_kv_expanded_then_copied_before_sdpa_is_repeat_kv(tmp_path):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, hf_repeat_kv(k, 4), hf_repeat_kv(v, 4))

    result = diagnose(profiled(attention, tmp_path))
    assert implementations(result) == ["sdpa_flash"] and kinds(result) == {"repeat_kv": 2}
    assert result["findings"][0]["chapter"] == "decoding.md"


def test_enable_gqa_is_no_finding(tmp_path):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    assert diagnose(profiled(attention, tmp_path))["findings"] == []


def test_timesformer_is_eager_and_every_finding_is_checked():
    result = diagnose(traced("tracelens-h100-timesformer-eager-softmax"))
    assert kinds(result) == {"eager_attention": 24} and result["not_checked"] == []


def test_a_graph_replay_says_what_it_cannot_check():
    result = diagnose(traced("tracelens-mi300x-sglang-decode-graph"))
    assert result["findings"] == []
    assert {g["kind"] for g in result["not_checked"]} == {f.kind for f in FINDINGS}
    assert all("graph replay" in g["why"] for g in result["not_checked"])


def test_a_math_backward_on_a_gpu_is_linked_and_found():
    result = diagnose(Trace(with_backward(FP32)))
    forward, backward = result["attention"]
    assert (backward["implementation"], backward["pass"], backward["kernels_per_call"]) == (
        "sdpa_math", "backward", 2,
    )  # fmt: skip
    assert backward["backward_forward_ratio"]["median"] == pytest.approx((45 + 15) / 30)
    assert kinds(result)["math_backward"] == 1
    (math,) = [f for f in result["findings"] if f["kind"] == "math_backward"]
    assert "float inputs" in math["detail"] and math["chapter"] == "training.md"


# --- findings on copies and masks -----------------------------------------------------------------


def test_q_k_v_made_contiguous_before_sdpa_are_copies(tmp_path):
    def attention(q, k, v):
        q, k, v = (
            x.transpose(1, 2).contiguous() for x in (q, k, v)
        )  # [b, s, h, d] -> [b, h, s, d]
        return F.scaled_dot_product_attention(q, k, v)

    def views(q, k, v):
        return F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)))

    q = k = v = torch.randn(1, 32, 4, 16)
    for fn, found in ((attention, {"qkv_copies": 3}), (views, {})):
        with profile(record_shapes=True) as prof, torch.no_grad(), record_function("attn_fwd"):
            fn(q, k, v)
        prof.export_chrome_trace(str(tmp_path / "trace.json"))
        assert kinds(diagnose(read_trace(tmp_path / "trace.json"))) == found


def test_the_a100_multi_query_trace_and_its_findings_equal_a_count_of_the_raw_json():
    """Ten MultiQueryAttention calls: each masks out of place (an aten::clone, a Memcpy DtoD),
    builds its causal mask (aten::tril), and broadcasts K and V over eight heads in its two
    matmuls, which copy them."""
    folder = "switchtransformers-a100-eager-mqa-fp32"
    result = diagnose(traced(folder))
    events = [e for e in raw(folder)["traceEvents"] if e.get("ph") == "X"]
    names = [e["name"] for e in events]
    broadcast = [
        e for e in events if e["name"] == "aten::matmul"
        and [d[1] for d in e["args"]["Input Dims"]] in ([8, 1], [1, 8])
    ]  # fmt: skip
    assert kinds(result) == {
        "out_of_place_masked_fill": names.count("aten::masked_fill"),
        "eager_attention": 10,
        "repeat_kv": len(broadcast),
        "mask_per_call": names.count("aten::tril"),
        "fp32_attention_on_gpu": 10,
    }
    assert len(broadcast) == 20 and names.count("aten::masked_fill") == 10
    copies = [e for e in events if e["name"].startswith("Memcpy DtoD")]
    assert len(copies) == 10  # one per masked_fill's clone


def test_q_k_v_copies_before_each_sdpa_call_and_their_cost_equal_a_count_of_the_raw_json():
    """Qwen2's attention makes q, k and v contiguous before every SDPA call on CUDA: three copies
    per call, whose device time the finding sets beside the flash kernel's."""
    folder = "tracelens-h100-qwen1.5-sdpa-flash"
    result = diagnose(traced(folder))
    (found,) = result["findings"]
    count, copies_us = realtrace_count.ops_named(raw(folder), "aten::contiguous", [16, 16, 559, 64])
    calls, _, attention_us = realtrace_count.op_calls(
        raw(folder), "aten::_scaled_dot_product_flash_attention"
    ).popitem()[1]
    assert (found["kind"], found["count"]) == ("qkv_copies", count) and count == 3 * calls
    assert found["detail"] == (
        f"the copies take {time_text(copies_us / calls)} per call on the device, the attention "
        f"{time_text(attention_us)}"
    )


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": [1, 2, 3], "Input type": ["float"] * 3},
        {"Input Dims": [[1], None, "z"], "Input type": [None, 5, []]},
        {"Input Dims": [[2, 3, "a"], [], [], 7], "Input type": ["float"] * 3},
        {"Input Dims": "x", "Input type": "y"},
    ],
    ids=["ints", "nulls", "a string dim", "strings"],
)
def test_malformed_input_dims_are_not_read_not_a_traceback(args):
    """Each raised a TypeError deep in the math-fallback check."""
    result = diagnose(Trace(sdpa_on_gpu("aten::_scaled_dot_product_attention_math", args)))
    (math,) = result["findings"]
    assert math["kind"] == "math_fallback" and "record_shapes" in math["detail"]
    assert [g["kind"] for g in result["not_checked"]] == ["fp32_attention_on_gpu"]
