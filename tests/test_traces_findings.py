"""The findings (attn.traces.diagnosis.findings): each record's advice and page, and each detector on the GPU
fixture, on hand-made traces, on CPU profiles recorded here, and on real traces recorded by others
(counted a second way from the raw JSON)."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile, record_function

from attn.traces.common.units import time_text
from attn.traces.diagnosis.findings import FINDINGS
from attn.traces.read.trace import Trace, read_trace

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count  # noqa: E402
from diagnose_cases import (  # noqa: E402
    BF16,
    COPY,
    CUTLASS,
    FILL,
    FP32,
    ROOT,
    Q,
    diagnose,
    fixture,
    implementations,
    kinds,
    made,
    op,
    raw,
    sdpa_call,
    sdpa_on_gpu,
    traced,
    with_backward,
)


def test_every_finding_points_at_a_page_and_gives_one_sentence():
    for f in FINDINGS:
        assert (ROOT / "docs" / f.page).is_file(), f.kind
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


@pytest.mark.parametrize(
    "folder", ["tracelens-h100-timesformer-eager-softmax", "tracelens-mi300x-timesformer-eager"]
)
def test_timesformer_is_eager_and_every_finding_is_checked(folder):
    """TimeSformer scales its scores out of place (scores * scale): a new score matrix per call,
    as many as the raw JSON holds muls of a softmax's input; on an H100 and, held out from the
    changes of issue 54, on an MI300X."""
    result = diagnose(traced(folder))
    events = [e for e in raw(folder)["traceEvents"] if e.get("ph") == "X"]
    softmaxed = [e["args"]["Input Dims"][0] for e in events if e["name"] == "aten::softmax"]
    scaled = [e for e in events
              if e["name"] == "aten::mul" and e["args"]["Input Dims"][0] in softmaxed]  # fmt: skip
    assert kinds(result) == {"eager_attention": 24, "out_of_place_score_ops": len(scaled)} and (
        len(scaled) == 24
    )
    assert result["not_checked"] == []


def test_a_graph_replay_says_what_it_cannot_check():
    result = diagnose(traced("tracelens-mi300x-sglang-decode-graph"))
    assert result["findings"] == []
    # The kernels' names say bfloat16: the dtype is checked; what needs CPU ops is not.
    assert {g["kind"] for g in result["not_checked"]} == {f.kind for f in FINDINGS if f.needs_cpu}
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
    scaled = [e for e in events if e["name"] == "aten::mul"
              and e["args"]["Input Dims"][0] == [8, 8, 1024, 1024]]  # fmt: skip
    assert kinds(result) == {
        "out_of_place_masked_fill": names.count("aten::masked_fill"),
        "eager_attention": 10,
        "out_of_place_score_ops": len(scaled),  # scores * scale, a new [8, 8, 1024, 1024]
        "repeat_kv": len(broadcast),
        "mask_per_call": names.count("aten::tril"),
        "fp32_attention_on_gpu": 10,
    }
    assert len(scaled) == 10
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
    calls, _, attention_us, _ = realtrace_count.op_calls(
        raw(folder), "aten::scaled_dot_product_attention"
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
    """Each raised a TypeError deep in the math-fallback check. Input types read as such are
    read (float: fp32), and only those."""
    result = diagnose(Trace(sdpa_on_gpu("aten::_scaled_dot_product_attention_math", args)))
    math = found(result, "math_fallback")
    assert "record_shapes" in math["detail"]
    typed = args["Input type"][0] == "float"
    assert kinds(result) == {"math_fallback": 1} | ({"fp32_attention_on_gpu": 1} if typed else {})
    assert [g["kind"] for g in result["not_checked"]] == (
        [] if typed else ["fp32_attention_on_gpu"]
    )


# --- the findings of attention as application code runs it, each on a small hand-made trace -------


def found(result: dict, kind: str) -> dict:
    return next(f for f in result["findings"] if f["kind"] == kind)


def test_a_mask_sdpa_pads_is_found_with_its_cost_and_an_aligned_one_is_not():
    """SDPA's memory-efficient backend takes a mask whose last dimension is a multiple of 16:
    SDPA's front op pads one of 77 (a fill and a copy) in every call, around the backend op."""
    padded = diagnose(Trace(made(*sdpa_call(0, [1, 1, 128, 77], pad=True))))
    assert kinds(padded) == {"mask_padded_in_sdpa": 1}
    detail = found(padded, "mask_padded_in_sdpa")["detail"]
    assert "[1, 1, 128, 77]" in detail and "12.0 µs per call" in detail and "40.0 µs" in detail
    aligned = diagnose(Trace(made(*sdpa_call(0, [1, 1, 128, 80]))))
    assert kinds(aligned) == {}


def test_a_mask_converted_before_every_call_is_found_and_one_passed_as_it_is_is_not():
    """Two calls, each casting a [1, 1, 128, 128] mask before SDPA: a score-sized tensor written
    in every call. The same calls given the mask as it is find nothing."""
    cast = [op("aten::to", 5, 10, [[1, 1, 128, 128], [], [], [], []], ["float"], [(COPY, 6)])]
    trace = made(*sdpa_call(0, [1, 1, 128, 128], cast), *sdpa_call(200, [1, 1, 128, 128], [
        {**cast[0], "ts": 205}]))  # fmt: skip
    result = diagnose(Trace(trace))
    assert kinds(result) == {"mask_per_call": 2}
    assert found(result, "mask_per_call")["detail"] == (
        "a [1, 1, 128, 128] float tensor (64 KiB) in 2 call(s), 6.0 µs of device work per call"
    )
    plain = made(*sdpa_call(0, [1, 1, 128, 128]), *sdpa_call(200, [1, 1, 128, 128]))
    assert kinds(diagnose(Trace(plain))) == {}


def scores_trace(inplace: bool = False) -> dict:
    """Eager attention whose scores are scaled, then given a bias: out of place, or in place."""
    scores = [1, 8, 128, 128]
    under = "_" if inplace else ""
    return made(
        op("nn.Module: SelfAttention_0", 0, 200, cat="python_function"),
        op("aten::matmul", 10, 10, [Q, [1, 8, 64, 128]], BF16[:2], [("gemm_qk", 50)]),
        op(f"aten::mul{under}", 30, 10, [scores, []], BF16[:1], [("mul_kernel", 8)]),
        op(f"aten::add{under}", 50, 10, [scores, scores, []], BF16[:2], [("add_kernel", 9)]),
        op("aten::softmax", 70, 10, [scores, [], []], BF16[:1], [("softmax_kernel", 20)]),
        op("aten::matmul", 90, 10, [scores, Q], BF16[:2], [("gemm_pv", 40)]),
    )


def test_out_of_place_ops_on_the_scores_are_found_and_in_place_ones_are_not():
    result = diagnose(Trace(scores_trace()))
    assert kinds(result) == {"eager_attention": 1, "out_of_place_score_ops": 2}
    detail = found(result, "out_of_place_score_ops")["detail"]
    assert detail.startswith("2 in 1 call(s) (aten::mul, aten::add)") and "256 KiB" in detail
    assert kinds(diagnose(Trace(scores_trace(inplace=True)))) == {"eager_attention": 1}


def padded_head_dim(head_dim: int) -> dict:
    """q, k and v padded from `head_dim` up to 128 before a custom op whose kernel is Triton's
    tutorial's (its name says no attention)."""
    wide = [1, 8, 128, 128]
    pads = [op("aten::pad", 5 + 10 * i, 8, [[1, 8, 128, head_dim], []], BF16[:1],
               [(FILL, 3), (COPY, 4)]) for i in range(3)]  # fmt: skip
    return made(
        op("nn.Module: Attention_0", 0, 100, cat="python_function"),
        *(pads if head_dim != 128 else []),
        op("mylib::flash_attention", 50, 40, [wide] * 3, BF16[:3], [("_fwd_kernel", 30)]),
    )


def test_q_k_v_padded_to_a_head_dim_the_kernel_takes_is_found():
    result = diagnose(Trace(padded_head_dim(80)))
    (row,) = result["attention"]
    assert (row["implementation"], row["attention_kernel_time_us_per_call"]) == ("custom", 30.0)
    assert kinds(result) == {"head_dim_padding": 3}
    assert found(result, "head_dim_padding")["detail"] == (
        "head dim 80 to 128; the padding takes 21.0 µs per call, the call 30.0 µs"
    )
    assert kinds(diagnose(Trace(padded_head_dim(128)))) == {}


def repeated(dims: list[int], before: bool = False) -> dict:
    """A repeat_interleave of a tensor of `dims` in a cross-attention module (or before it, in
    the model: once for all its layers) that calls SDPA on q of batch 8 and 77 keys."""
    q, k = [8, 8, 128, 64], [8, 8, 77, 64]
    at = -30 if before else 5
    return made(
        op("nn.Module: Model_0", -50, 300, cat="python_function"),
        op("aten::repeat_interleave", at, 10, [dims, [], []], BF16[:1], [(COPY, 9)]),
        op("nn.Module: CrossAttention_0", 0, 100, cat="python_function"),
        op("aten::scaled_dot_product_attention", 40, 50, [q, k, k], BF16[:3]),
        op("aten::_scaled_dot_product_efficient_attention", 45, 40, [q, k, k], BF16[:3],
           [(CUTLASS, 30)]),
    )  # fmt: skip


def test_k_v_repeated_over_the_batch_is_not_taken_for_a_repeat_over_heads():
    """The text a cross-attention reads, repeated over the batch, in the module or before the
    model's first attention; K repeated over heads; a tensor of another length."""
    for before in (False, True):
        over_batch = diagnose(Trace(repeated([1, 77, 768], before)))
        assert kinds(over_batch) == {"kv_repeated_over_batch": 1}
        assert found(over_batch, "kv_repeated_over_batch")["detail"].startswith(
            "repeated: [1, 77, 768] up to a batch of 8"
        )
    assert kinds(diagnose(Trace(repeated([8, 2, 77, 64])))) == {"repeat_kv": 1}
    assert kinds(diagnose(Trace(repeated([1, 128, 768], before=True)))) == {}


def synced(direction: str, *more: dict) -> dict:
    """An index built on the CPU and copied over (from pageable memory), and an .item()
    (a copy to the host, then a synchronize), inside an attention module before SDPA; then the
    ops `more`."""
    module = sdpa_call(0)
    return made(
        module[0],
        op("aten::to", 2, 10, [[128]], ["long int"], [(f"Memcpy {direction}", 2)],
           runtime_dur=30),
        op("aten::_local_scalar_dense", 15, 20, [[]], ["long int"],
           [("Memcpy DtoH (Device -> Pageable)", 1)], runtime_dur=5),
        op("cudaStreamSynchronize", 36, 3, cat="cuda_runtime"),
        *module[1:],
        *more,
    )  # fmt: skip


def test_what_blocks_the_cpu_inside_attention_is_found_with_its_time():
    result = diagnose(Trace(synced("HtoD (Pageable -> Device)")))
    assert kinds(result) == {"sync_in_forward": 3}
    assert found(result, "sync_in_forward")["detail"] == (
        "3 per call, 38.0 µs of CPU time blocked in all, 38.0 µs per call"
    )
    result = diagnose(Trace(synced("DtoD (Device -> Device)")))  # asynchronous: no wait
    assert kinds(result) == {"sync_in_forward": 2}


@pytest.mark.parametrize(
    ("kernel", "fp32"),
    [
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)", 3),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)", 0),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, cutlass::half_t> >", 0),
        ("attn_fwd", None),  # AOTriton's name says no dtype
    ],
)
def test_without_shapes_the_dtype_is_read_from_the_kernel_names(kernel, fp32):
    """Kernels alone, no CPU op: every call's dtype is its kernel's name's."""
    trace = {"traceEvents": [{"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": kernel,
                              "ts": 100 * i, "dur": 50} for i in range(3)]}  # fmt: skip
    result = diagnose(Trace(trace))
    assert kinds(result) == ({"fp32_attention_on_gpu": 3} if fp32 else {})
    unchecked = {g["kind"]: g["why"] for g in result["not_checked"]}
    assert ("fp32_attention_on_gpu" in unchecked) is (fp32 is None)
    assert all("no CPU ops" in why for k, why in unchecked.items() if k != "fp32_attention_on_gpu")


def test_an_op_without_recorded_types_takes_its_kernel_s_dtype():
    f32 = "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)"
    trace = made(op("aten::_scaled_dot_product_efficient_attention", 0, 50, kernels=[(f32, 40)]))
    result = diagnose(Trace(trace))
    assert found(result, "fp32_attention_on_gpu") == {
        "kind": "fp32_attention_on_gpu", "count": 1, "chapter": "sdpa.md",
        "advice": found(result, "fp32_attention_on_gpu")["advice"],
        "detail": "read from kernel names for 1 call(s)",
    }  # fmt: skip


# --- no finding from work that is no call's: an MLP, a router, the data before the model --------


def outside_attention(inside: bool = False) -> dict:
    """A step: a repeat of the text before the model, an MLP's .contiguous(), a MoE router's
    out-of-place masked_fill, then an op whose name says nothing, found as attention by the
    kernel it launches (so its look-back was once the trace's start). With `inside`, the same
    .contiguous() runs in the call's own attention module, where it is the call's."""
    q, k = [8, 8, 128, 64], [8, 8, 77, 64]
    copy = [(COPY, 9)]
    contiguous = [op("aten::contiguous", 0, 10), op("aten::clone", 1, 8, [k], BF16[:1], copy)]
    return made(
        op("aten::repeat_interleave", 100, 10, [[1, 77, 768], [], []], BF16[:1], copy),
        op("ProfilerStep#1", 200, 500, cat="user_annotation"),
        op("nn.Module: Model_0", 210, 480, cat="python_function"),
        op("nn.Module: MLP_0", 220, 30, cat="python_function"),
        *[dict(o, ts=o["ts"] + 225) for o in contiguous],
        op("nn.Module: Router_0", 260, 30, cat="python_function"),
        op("aten::masked_fill", 265, 20, [[64, 8], [64, 8], []], BF16[:1]),
        op("aten::clone", 266, 10, [[64, 8]], BF16[:1], copy),
        op("nn.Module: Attention_0", 300, 100, cat="python_function"),
        *([dict(o, ts=o["ts"] + 305) for o in contiguous] if inside else []),
        op("mylib::block", 340, 50, [q, k, k], BF16[:3], [(CUTLASS, 30)]),
    )  # fmt: skip


def test_work_outside_a_call_found_by_its_kernel_is_no_finding_of_it():
    """Calls found through the op that launched a known kernel look back only over their own
    module (never from the trace's start): the MLP's copy, the router's masked_fill and the
    repeat before the step are counted nowhere; the same copy in the call's module is."""
    result = diagnose(Trace(outside_attention()))
    assert [r["calls"] for r in result["attention"]] == [1]
    assert kinds(result) == {}
    assert kinds(diagnose(Trace(outside_attention(inside=True)))) == {"qkv_copies": 1}


# --- nn.MultiheadAttention's fast path: one op, all its kernels, and need_weights -----------------


def mha_fastpath(need_weights: bool) -> dict:
    """nn.MultiheadAttention in inference on a GPU (aten::_native_multi_head_attention): the
    in-projection, q, k and v given their bias and scale, then the scores, softmax and P.V (or,
    without weights, SDPA), the heads made contiguous, the out-projection, and the weights
    averaged over the heads."""
    x, scores = [2, 16, 64], [2, 4, 16, 16]
    concrete = ["", "", "", "64", "4", "", "", "", "", "", str(need_weights), "True", ""]
    heads = [op("aten::bmm", 30, 8, [[8, 16, 16]] * 2, BF16[:2], [("gemm_qk", 6)]),
             op("aten::_softmax", 40, 8, [scores, [], []], BF16[:1], [("softmax_kernel", 5)]),
             op("aten::bmm", 50, 8, [[8, 16, 16]] * 2, BF16[:2], [("gemm_pv", 6)])]  # fmt: skip
    sdpa = [op("aten::scaled_dot_product_attention", 30, 28, [[2, 4, 16, 16]] * 3, BF16[:3]),
            op("aten::_scaled_dot_product_efficient_attention", 32, 24, [[2, 4, 16, 16]] * 3,
               BF16[:3], [(CUTLASS, 9)])]  # fmt: skip
    weights = [op("aten::sum", 80, 5, [scores, [], [], []], BF16[:1], [("reduce_kernel", 3)]),
               op("aten::div_", 86, 5, [[2, 16, 16], []], BF16[:1], [("div_kernel", 2)])]  # fmt: skip
    mha = op("aten::_native_multi_head_attention", 5, 90, [x, x, x], BF16[:3])
    return made(
        op("nn.Module: MultiheadAttention_0", 0, 100, cat="python_function"),
        dict(mha, args=mha["args"] | {"Concrete Inputs": concrete}),
        op("aten::mm", 6, 8, [[32, 64], [64, 192]], BF16[:2], [("gemm_in", 7)]),
        op("aten::_transform_bias_rescale_qkv", 16, 8, [[2, 16, 192], [192], []], BF16[:2],
           [("transform_kernel", 4)]),
        *(heads if need_weights else sdpa),
        op("aten::contiguous", 60, 8),
        op("aten::clone", 61, 6, [[2, 16, 4, 16]], BF16[:1], [(COPY, 3)]),
        op("aten::addmm", 70, 8, [[64], [32, 64], [64, 64]], BF16[:3], [("gemm_out", 5)]),
        *(weights if need_weights else []),
    )  # fmt: skip


def test_the_multihead_attention_fast_path_is_one_call_with_all_its_kernels():
    """Its nine kernels are the call's (none unattributed), the products and softmax its
    attention, the projections their own kind; weights asked for are a finding, and without
    them the SDPA inside is the fast path's, not a call of its own."""
    result = diagnose(Trace(mha_fastpath(need_weights=True)))
    (row,) = result["attention"]
    assert (row["implementation"], row["calls"], row["kernels_per_call"]) == ("mha_fastpath", 1, 9)
    assert row["attention_kernel_time_us_per_call"] == 6 + 5 + 6
    work = {w["what"]: w["kernels_per_call"] for w in row["other_work"]}
    assert work == {"projections": 3, "copies": 1, "other": 2}  # other: the weights averaged
    assert result["unattributed"] == []
    assert kinds(result) == {"mha_need_weights": 1}
    assert found(result, "mha_need_weights")["chapter"] == "sdpa.md"
    without = diagnose(Trace(mha_fastpath(need_weights=False)))
    assert [(r["implementation"], r["kernels_per_call"]) for r in without["attention"]] == [
        ("mha_fastpath", 5)
    ]
    assert kinds(without) == {}


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_in_inference_on_this_cpu_is_its_fast_path(tmp_path, need_weights):
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 16, 64)
    with profile(record_shapes=True) as prof, torch.no_grad(), record_function("attn_fwd"):
        mha(x, x, x, need_weights=need_weights)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    result = diagnose(read_trace(tmp_path / "trace.json"))
    assert implementations(result) == ["mha_fastpath"]
    assert kinds(result) == ({"mha_need_weights": 1} if need_weights else {})


# --- advice that reads the trace: float32 under autocast -------------------------------------------


def autocast_calls(cast_both: bool) -> dict:
    """Two SDPA calls recorded with float32 inputs: the first cast to bfloat16 under its front op,
    as autocast does (aten::to with dtype 15 just under it); the second too with `cast_both`, else
    given float32 q, k and v past autocast."""
    fp32 = ["float"] * 3
    f32_kernel = "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)"

    def call(ts: float, cast: bool) -> list:
        casts = [dict(o, args=o["args"] | {"Concrete Inputs": ["", "15", "False", "False", ""]})
                 for o in (op("aten::to", ts + 42 + 4 * i, 3, [Q, [], [], [], []], fp32[:1],
                              [(COPY, 2)]) for i in range(3))]  # fmt: skip
        backend = op("aten::_scaled_dot_product_efficient_attention", ts + 60, 25, [Q] * 3,
                     BF16[:3] if cast else fp32, [(CUTLASS if cast else f32_kernel, 40)])  # fmt: skip
        return [op("nn.Module: Attention_0", ts, 100, cat="python_function"),
                op("aten::scaled_dot_product_attention", ts + 40, 50, [Q] * 3, fp32),
                *(casts if cast else []), backend]  # fmt: skip

    return made(*call(0, True), *call(200, cast_both))


def test_float32_recorded_under_autocast_is_no_finding_and_past_it_is_said_so():
    assert "fp32_attention_on_gpu" not in kinds(diagnose(Trace(autocast_calls(cast_both=True))))
    result = diagnose(Trace(autocast_calls(cast_both=False)))
    assert kinds(result)["fp32_attention_on_gpu"] == 1
    assert found(result, "fp32_attention_on_gpu")["detail"].startswith(
        "autocast is on (it casts the inputs of 1 op(s)): the float32 reaches these calls past it"
    )


def test_a_synchronize_is_charged_to_the_calls_that_block_not_spread_over_all():
    """One attention module blocks (an index copied from pageable memory, an .item()); another
    kind of call, in its own module after it, does not: the time per call is the first's."""
    other = [dict(o, ts=o["ts"] + 200) for o in sdpa_call(0)]
    other[0] = dict(other[0], name="nn.Module: CrossAttention_0")
    result = diagnose(Trace(synced("HtoD (Pageable -> Device)", *other)))
    assert kinds(result) == {"sync_in_forward": 3}
    detail = found(result, "sync_in_forward")["detail"]
    assert detail.startswith("in 1 of 2 calls (sdpa_efficient in nn.Module: Attention): ")
    assert detail.endswith("3 per call, 38.0 µs of CPU time blocked in all, 38.0 µs per call")


@pytest.mark.parametrize(("backward_us", "slow"), [(45, False), (285, True)])
def test_a_backward_far_beyond_its_forward_s_flops_is_found(backward_us, slow):
    """with_backward's pair: the forward's kernel 30 µs, the backward's two 15 µs and this; 2.0
    times the forward is within its FLOPs (2.5 times), 10.0 times is not."""
    trace = with_backward(FP32)
    for e in trace["traceEvents"]:
        if e["name"] == "softmax_backward_kernel":
            e["dur"] = backward_us
    result = diagnose(Trace(trace))
    assert ("backward_beyond_its_flops" in kinds(result)) == slow
    if slow:
        assert found(result, "backward_beyond_its_flops")["detail"] == (
            "the backward takes 10.0 times its forward's device time (median of 1), their FLOPs "
            "2.5 times; linked by sequence numbers"
        )


def test_relative_position_terms_added_on_a_five_dimensional_view_of_the_scores_are_found():
    """The scores [1, 8, 128, 128] viewed as [1, 8, 8, 16, 128] (an 8 by 16 image's queries),
    a term added over its rows and one over its columns, out of place: both write new scores."""
    scores, view = [1, 8, 128, 128], [1, 8, 8, 16, 128]
    result = diagnose(Trace(made(
        op("nn.Module: Attention_0", 0, 200, cat="python_function"),
        op("aten::matmul", 10, 10, [Q, [1, 8, 64, 128]], BF16[:2], [("gemm_qk", 50)]),
        op("aten::add", 30, 10, [view, [1, 8, 8, 16, 1], []], BF16[:2], [("add_kernel", 9)]),
        op("aten::add", 45, 10, [view, [1, 8, 8, 1, 128], []], BF16[:2], [("add_kernel", 9)]),
        op("aten::softmax", 70, 10, [scores, [], []], BF16[:1], [("softmax_kernel", 20)]),
        op("aten::matmul", 90, 10, [scores, Q], BF16[:2], [("gemm_pv", 40)]),
    )))  # fmt: skip
    assert kinds(result) == {"eager_attention": 1, "out_of_place_score_ops": 2}
    assert found(result, "out_of_place_score_ops")["detail"].startswith(
        "2 in 1 call(s) (aten::add)"
    )


def test_q_k_v_padded_before_each_of_several_calls_in_one_range_are_each_call_s():
    """Two calls of a custom op in one range (no module of their own), each after q, k and v
    padded from 80 to 128, and a pad of a tensor no call takes: the six pads are the calls'
    preparation, the other pad nobody's."""

    def pads(ts: float) -> list:
        return [op("aten::pad", ts + 10 * i, 8, [[1, 8, 128, 80], []], BF16[:1],
                   [(FILL, 3), (COPY, 4)]) for i in range(3)]  # fmt: skip

    wide = [[1, 8, 128, 128]] * 3
    result = diagnose(Trace(made(
        op("nn.Module: Decoder_0", 0, 400, cat="python_function"),
        op("aten::pad", 2, 2, [[1, 4, 77, 30], []], BF16[:1], [(FILL, 3)]),
        *pads(5),
        op("mylib::flash_attention", 50, 40, wide, BF16[:3], [("_fwd_kernel", 30)]),
        *pads(105),
        op("mylib::flash_attention", 150, 40, wide, BF16[:3], [("_fwd_kernel", 30)]),
    )))  # fmt: skip
    assert [r["calls"] for r in result["attention"]] == [2]
    assert kinds(result) == {"head_dim_padding": 6}
    assert found(result, "head_dim_padding")["detail"].startswith("head dim 80 to 128; ")


def test_a_bias_built_before_each_of_several_calls_in_one_range_is_found():
    """Two SDPA calls in one range (a block with no attention module), each after a
    [1, 8, 128, 128] float32 bias is built (an add of two score-sized tensors): a bias rebuilt
    in every call. An add of the block's hidden states is no call's."""
    bias = [1, 8, 128, 128]
    dims = [Q, Q, Q, bias]

    def call(ts: float) -> list:
        return [op("aten::add", ts, 10, [bias, bias, []], ["float"] * 2, [("add_kernel", 20)]),
                op("aten::add", ts + 15, 5, [[1, 128, 512], [1, 128, 512], []], BF16[:2],
                   [("add_kernel", 2)]),
                op("aten::scaled_dot_product_attention", ts + 40, 50, dims, BF16),
                op("aten::_scaled_dot_product_efficient_attention", ts + 60, 25, dims, BF16,
                   [(CUTLASS, 40)])]  # fmt: skip

    result = diagnose(Trace(made(
        op("nn.Module: Block_0", 0, 300, cat="python_function"), *call(5), *call(150)
    )))  # fmt: skip
    assert kinds(result) == {"mask_per_call": 2}
    assert found(result, "mask_per_call")["detail"] == (
        "a [1, 8, 128, 128] float tensor (512 KiB) in 2 call(s), 20.0 µs of device work per call"
    )


SAM_Q, SAM_K = [4, 8, 7, 16], [4, 8, 4096, 16]  # 4 prompts' tokens; a 64 by 64 image's keys


def prompts_read_an_image(image: list[int]) -> dict:
    """A mask decoder's image embedding `image` repeat_interleaved once per prompt (4), then two
    attention modules whose keys are the image's positions: the repeat is the first call's
    preparation (as one of a SAM decoder's two-way transformer's calls)."""
    return made(
        op("nn.Module: MaskDecoder_0", 0, 1000, cat="python_function"),
        op("aten::repeat_interleave", 5, 20, [image, [], []], BF16[:1], [(COPY, 50)]),
        *[
            o
            for ts in (100, 400)
            for o in (
                op("nn.Module: Attention_0", ts, 200, cat="python_function"),
                op("aten::scaled_dot_product_attention", ts + 40, 50, [SAM_Q, SAM_K, SAM_K],
                   BF16[:3]),
                op("aten::_scaled_dot_product_efficient_attention", ts + 45, 40,
                   [SAM_Q, SAM_K, SAM_K], BF16[:3], [(CUTLASS, 30)]),
            )
        ],
    )  # fmt: skip


def test_an_image_repeated_per_prompt_is_the_first_call_s_preparation():
    """[1, 256, 64, 64] up to 4 prompts: the keys are its 64 by 64 positions. Its copy is charged
    to the call as K/V repeated, with its time, and is no longer an unexplained copy."""
    result = diagnose(Trace(prompts_read_an_image([1, 256, 64, 64])))
    assert kinds(result) == {"kv_repeated_over_batch": 1}
    assert found(result, "kv_repeated_over_batch")["detail"].startswith(
        "repeated: [1, 256, 64, 64] up to a batch of 4; the copies take 25.0 µs per call"
    )
    (row,) = result["attention"]
    assert row["calls"] == 2
    assert row["preparation"] == [
        {"what": "K/V repeated", "ops_per_call": 0.5, "kernels_per_call": 0.5,
         "device_time_us_per_call": 25.0},
    ]  # fmt: skip
    assert [u["name"] for u in result["unattributed"]] == []
    # An image of other positions than the keys' is no call's: still unexplained, no finding.
    other = diagnose(Trace(prompts_read_an_image([1, 256, 32, 32])))
    assert kinds(other) == {} and "preparation" not in other["attention"][0]
    assert [u["name"] for u in other["unattributed"]] == [COPY]


def test_k_v_repeated_over_heads_before_each_of_several_calls_in_one_range_are_each_call_s():
    """Two SDPA calls in one block (no attention module: the range is shared), each after K and
    V repeat_interleaved from 2 heads to 8; a repeat of the block's hidden states is no call's."""
    kv, q = [1, 2, 128, 64], [1, 8, 128, 64]

    def call(ts: float) -> list:
        return [
            op("aten::repeat_interleave", ts, 10, [[1, 128, 512], [], []], BF16[:1], [(COPY, 3)]),
            op("aten::repeat_interleave", ts + 12, 10, [kv, [], []], BF16[:1], [(COPY, 6)]),
            op("aten::repeat_interleave", ts + 24, 10, [kv, [], []], BF16[:1], [(COPY, 6)]),
            op("aten::scaled_dot_product_attention", ts + 40, 50, [q, q, q], BF16[:3]),
            op("aten::_scaled_dot_product_efficient_attention", ts + 45, 40, [q, q, q],
               BF16[:3], [(CUTLASS, 30)]),
        ]  # fmt: skip

    result = diagnose(Trace(made(
        op("nn.Module: Block_0", 0, 300, cat="python_function"), *call(5), *call(150)
    )))  # fmt: skip
    assert kinds(result) == {"repeat_kv": 4}
    assert found(result, "repeat_kv")["detail"] == (
        "the copies take 12.0 µs per call on the device, the attention 30.0 µs"
    )
    (row,) = result["attention"]
    assert row["preparation"] == [
        {"what": "K/V repeated", "ops_per_call": 2, "kernels_per_call": 2,
         "device_time_us_per_call": 12.0},
    ]  # fmt: skip


def relative_bias(ts: float, seq: int = 128) -> list:
    """A relative position bias built from arange as T5's is: the positions, their differences,
    bucketed, looked up for 8 heads and laid out as [1, 8, seq, seq] (each op's kernel 4 µs)."""
    k = [(FILL, 4)]
    return [
        op("aten::arange", ts, 3, [[], [], [], [], []], kernels=k),
        op("aten::arange", ts + 4, 3, [[], [], [], [], []], kernels=k),
        op("aten::sub", ts + 8, 3, [[1, seq], [seq, 1], []], ["long int"] * 2, k),
        op("aten::abs", ts + 12, 3, [[seq, seq]], ["long int"], k),
        op("aten::embedding", ts + 16, 3, [[32, 8], [seq, seq]], ["float", "long int"], k),
        op("aten::permute", ts + 20, 1, [[seq, seq, 8], []], ["float"]),
        op("aten::unsqueeze", ts + 22, 1, [[8, seq, seq], []], ["float"]),
    ]


def biased_calls(*before: list, after: list = ()) -> dict:
    """SDPA calls in one block, each given a [1, 8, 128, 128] bias as its mask and preceded by
    the ops in its `before`; then the ops `after` in the block's MLP, after the last call."""
    mask = [1, 8, 128, 128]
    dims = [Q, Q, Q, mask]
    ops, ts = [op("nn.Module: Block_0", 0, 200 * len(before) + 100, cat="python_function")], 5
    for ahead in before:
        ops += [
            *ahead,
            op("aten::scaled_dot_product_attention", ts + 60, 50, dims, BF16 + ["float"]),
            op("aten::_scaled_dot_product_efficient_attention", ts + 65, 40, dims,
               BF16 + ["float"], [(CUTLASS, 40)]),
        ]  # fmt: skip
        ts += 200
    return made(*ops, *after)


def test_a_bias_rebuilt_from_arange_before_every_call_is_charged_to_each():
    """Two calls, each after its own relative position bias: five ops a call that work, 20 µs,
    charged to the call that takes the bias."""
    result = diagnose(Trace(biased_calls(relative_bias(5), relative_bias(205))))
    assert found(result, "bias_from_arange_per_call")["count"] == 2
    assert found(result, "bias_from_arange_per_call")["detail"] == (
        "in 2 of 2 calls, 5 ops a call (aten::arange, aten::sub, aten::abs, aten::embedding); "
        "20.0 µs of device work per call, the call 40.0 µs"
    )
    (row,) = result["attention"]
    assert row["preparation"] == [
        {"what": "mask or bias built from arange", "ops_per_call": 5, "kernels_per_call": 5,
         "device_time_us_per_call": 20.0},
    ]  # fmt: skip


def test_arange_outside_attention_is_no_call_s_bias():
    """The same arange work where no call takes it: position ids looked up into embeddings
    before a call (not the scores' size), a bias built after the last call (no call follows),
    and a bias built once for three calls (the first call's preparation, no cost of each)."""
    ids = [
        op("aten::arange", 5, 3, [[], [], [], [], []], kernels=[(FILL, 4)]),
        op("aten::embedding", 9, 3, [[512, 768], [1, 128]], ["float", "long int"], [(FILL, 4)]),
        op("aten::add", 13, 3, [[1, 128, 768], [1, 128, 768], []], ["float"] * 2, [(FILL, 4)]),
    ]
    after = relative_bias(900)
    result = diagnose(Trace(biased_calls(ids + relative_bias(20), [], after=after)))
    assert found(result, "bias_from_arange_per_call")["detail"].startswith(
        "in 1 of 2 calls, 5 ops a call"
    )  # the ids' arange and lookup are not the bias's
    once = diagnose(Trace(biased_calls(relative_bias(5), [], [])))
    assert "bias_from_arange_per_call" not in kinds(once)
    (row,) = once["attention"]
    assert row["preparation"][0]["ops_per_call"] == pytest.approx(5 / 3)


def test_held_out_sd3_5_s_findings_equal_a_count_of_the_raw_json():
    """Stable Diffusion 3.5 (held out from the changes of issue 54): its T5 encoder's eager calls
    cast their scores to float32 for the softmax and back (aten::to, then aten::type_as: a new
    score matrix each); the first layer builds its position bias from arange inside its call,
    after Q.K^T, so nothing before a call is charged to it and no bias is rebuilt per call; the
    CLIP, MMDiT and VAE calls are SDPA's, in bfloat16, with nothing to find."""
    folder = "tracelens-mi300x-sd3.5-xdit"
    result = diagnose(traced(folder))
    events = realtrace_count._x(raw(folder))
    scores = [1, 64, 256, 256]
    casts = realtrace_count._outer([
        e for e in events if e.get("cat") == "cpu_op"
        and e["name"] in ("aten::to", "aten::type_as")
        and (e.get("args") or {}).get("Input Dims", [None])[0] == scores
    ])  # fmt: skip
    calls = sum(
        n for n, *_ in realtrace_count.eager_calls(raw(folder), "nn.Module: T5Attention").values()
    )
    assert kinds(result) == {"eager_attention": calls, "out_of_place_score_ops": len(casts)}
    assert (calls, len(casts)) == (48, 96)
    assert not any("preparation" in r for r in result["attention"])
    aranges = [e for e in events if e.get("name") == "aten::arange" and e.get("cat") == "cpu_op"]
    t5 = [e for e in events if str(e.get("name", "")).startswith("nn.Module: T5Attention")]
    inside = [a for a in realtrace_count._outer(aranges)
              if any(float(m["ts"]) <= float(a["ts"]) <= realtrace_count._end(m) for m in t5)]  # fmt: skip
    assert len(inside) == 4  # two forwards' first layer, two aranges each: in the call's window


def test_owlv2_s_text_mask_built_from_arange_is_its_first_call_s_preparation():
    """OWL-ViT's text encoder builds its causal mask from arange (and expands the padding mask)
    once a forward, before its first layer: charged to that call, as the raw JSON counts it (an
    arange, then the ops on [5], [5, 1], [5, 5] and [1, 1, 5, 5] up to the next attention), and
    no finding: one call of twelve is no cost of every call."""
    folder = "tracelens-h100-owlv2-eager-two-kinds"
    result = diagnose(traced(folder))
    (text,) = [r for r in result["attention"] if "preparation" in r]
    (prepared,) = text["preparation"]
    shapes = [[5], [5, 1], [5, 5], [1, 1, 5, 5]]
    runs, ops, us = realtrace_count.arange_runs(
        raw(folder), "nn.Module: Owlv2Attention", shapes, shapes[2:]
    )
    assert (runs, ops) == (5, 45) and prepared["what"] == "mask or bias built from arange"
    assert prepared["ops_per_call"] * text["calls"] == ops
    assert prepared["device_time_us_per_call"] * text["calls"] == pytest.approx(us)
    assert "bias_from_arange_per_call" not in kinds(result)
