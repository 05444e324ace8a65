"""A call's device work and what no call explains (attn.traces.diagnosis.device_work): attention kernels beside the
rest, by what launched it; the kernels outside every row, on every real trace recomputed from the
raw JSON by tests/realtrace_count.py; the dtype a kernel's name says."""

import sys
from pathlib import Path

import pytest

from attn.traces.diagnosis import device_work
from attn.traces.read.trace import Trace

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count as count  # noqa: E402
from diagnose_cases import SINGLE, diagnose, made, op, raw, sdpa_call, traced  # noqa: E402


def test_a_call_s_device_work_is_its_attention_kernel_and_what_pads_its_mask():
    """SDPA pads a mask of 77 keys inside its front op: 3 kernels per call, the attention kernel
    40 µs of 52."""
    (row,) = diagnose(Trace(made(*sdpa_call(0, [1, 1, 128, 77], pad=True))))["attention"]
    assert (row["kernels_per_call"], row["device_time_us_per_call"]) == (3, 52.0)
    assert row["attention_kernel_time_us_per_call"] == 40.0
    assert row["other_work"] == [
        {"what": "padding", "kernels_per_call": 2.0, "device_time_us_per_call": 12.0}
    ]


SDPA = "aten::scaled_dot_product_attention"
FLASH = "aten::_scaled_dot_product_flash_attention"


def _device(groups: dict) -> list:
    return [d for calls in groups.values() for device, _ in calls for d in device]


def _sdpa_and_compiled(t: dict) -> list:
    """The device work of SDPA's front ops, and of the flash backend ops Inductor called without
    one (those inside a front op are already its)."""
    front = _device(count.op_call_events(t, SDPA))
    seen = {id(d) for d in front}
    return front + [d for d in _device(count.op_call_events(t, FLASH)) if id(d) not in seen]


EXPLAINED = {  # folder -> the device events of its attention calls, counted from the raw JSON
    "hta-a100-alexnet-fwd": lambda t: [],
    "hta-a100-ddp-no-record-shapes": lambda t: [],
    "kineto-tbplugin-volta-resnet50-torch18-oldformat": lambda t: [],
    "tracelens-h100-bert-small-sdpa-flash": lambda t: _device(count.op_call_events(t, SDPA)),
    "tracelens-mi300x-bert-small-sdpa-flash": lambda t: _device(count.op_call_events(t, SDPA)),
    "tracelens-h100-qwen1.5-sdpa-flash": lambda t: (
        _device(count.op_call_events(t, SDPA)) + count.kernel_events(t, "flash_fwd")
    ),
    "tracelens-mi300x-compiled-sdpa": lambda t: _device(count.op_call_events(t, FLASH)),
    "tracelens-h100-timesformer-eager-softmax": lambda t: _device(
        count.eager_call_events(t, "nn.Module: TimesformerSelfAttention")
    ),
    "switchtransformers-a100-eager-mqa-fp32": lambda t: _device(
        count.eager_call_events(t, "nn.Module: MultiQueryAttention")
    ),
    "tracelens-h100-owlv2-eager-two-kinds": lambda t: _device(
        count.eager_call_events(t, "nn.Module: Owlv2Attention")
    ),
    "tracelens-b200-vllm-gptoss-fp8-paged": lambda t: _device(
        count.op_call_events(t, "vllm::unified_attention_with_output")
    ),
    "tracelens-mi300x-flux-sage-graph": lambda t: (
        _device(count.op_call_events(t, SDPA))
        + _device(count.eager_call_events(t, "nn.Module: T5Attention"))
        + count.kernel_events(t, "^sage_")
    ),
    "tracelens-mi300x-sglang-decode-graph": lambda t: count.kernel_events(t, "paged_attention"),
    "tracelens-h100-vit-nsfw-fwd": lambda t: _device(count.op_call_events(t, SDPA)),
    "tracelens-mi300x-qwen1.5-0.5b-fwd": lambda t: (
        _device(count.op_call_events(t, SDPA)) + count.kernel_events(t, "^attn_fwd$")
    ),
    "tracelens-mi300x-sglang-qwen3-prefilldecode": lambda t: count.kernel_events(
        t, "FmhaBatchPrefillWithPagedKVCache"
    ),
    "nanovllm-rtx4080laptop-attn-decode": lambda t: count.kernel_events(t, "^void flash::"),
    "tracelens-mi300x-vllm-piecewise-prefilldecode": lambda t: count.kernel_events(
        t, "^kernel_unified_attention"
    ),
    "tracelens-mi300-vllm-decode-graph": lambda t: count.kernel_events(
        t, "^kernel_unified_attention|^reduce_segments$"
    ),
    "tracelens-mi300x-vit-nsfw-fwd": lambda t: _device(count.op_call_events(t, SDPA)),
    "tracelens-mi300x-timesformer-eager": lambda t: _device(
        count.eager_call_events(t, "nn.Module: TimesformerSelfAttention")
    ),
    "tracelens-mi300x-sd3.5-xdit": lambda t: (
        _sdpa_and_compiled(t) + _device(count.eager_call_events(t, "nn.Module: T5Attention"))
    ),
}


def test_every_real_trace_has_its_attention_counted():
    assert set(EXPLAINED) == set(SINGLE)  # a folder of ranks: test_traces_folder


@pytest.mark.parametrize("folder", sorted(EXPLAINED))
def test_the_unattributed_kernels_equal_a_count_of_the_raw_json(folder):
    """Each kernel over 1% of the device time that no attention row holds, summed by name: the
    same names, calls, time and share as a count straight from the raw JSON."""
    ours = diagnose(traced(folder))["unattributed"]
    theirs = count.unattributed(raw(folder), EXPLAINED[folder](raw(folder)))
    assert [(u["name"], u["calls"]) for u in ours] == [(n, c) for n, c, _, _ in theirs]
    for u, (_, _, us, share) in zip(ours, theirs, strict=True):
        assert (u["device_time_us"], u["share"]) == (pytest.approx(us), pytest.approx(share))


def test_a_tutorial_kernel_in_a_graph_is_attention_and_what_is_left_is_listed():
    """Triton's tutorial kernel (its name says no attention) replayed from a graph is a call; a
    GEMM outside any row is listed with its share and who launched it, a kernel under 1% is not."""
    events = made(op("aten::mm", 0, 10, kernels=[("gemm_kernel", 500)]))["traceEvents"]
    events += [
        {"ph": "X", "pid": 1, "tid": 1, "cat": "cuda_runtime", "name": "cudaGraphLaunch",
         "ts": 20, "dur": 5, "args": {"correlation": 99}},
        *({"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": name, "ts": 20_000 + 100 * i,
           "dur": dur, "args": {"correlation": 99}}
          for i, (name, dur) in enumerate([("_fwd_kernel", 480), ("tiny", 5), ("_fwd_kernel", 480)])),
    ]  # fmt: skip
    result = diagnose(Trace({"traceEvents": events}))
    (row,) = result["attention"]
    assert (row["implementation"], row["where"], row["calls"]) == (
        "custom", "a graph replay (cudaGraphLaunch)", 2,
    )  # fmt: skip
    assert result["unattributed"] == [
        {"name": "gemm_kernel", "calls": 1, "device_time_us": 500.0,
         "share": 500 / 1465, "launched_by": "aten::mm"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "dtype"),
    [
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "float32"),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "bfloat16"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_kernel_traits<64, cutlass::bfloat16_t>>", "bfloat16"),
        ("void softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10>", "bfloat16"),
        ("void softmax_warp_forward<float, float, float, 10>", "float32"),
        ("ampere_sgemm_128x64_tn", "float32"),
        ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", "float8"),
        ("void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16>", "bfloat16"),
        ("attn_fwd", None),
    ],
)  # fmt: skip
def test_the_dtype_a_kernel_s_name_says_first(kernel, dtype):
    assert device_work.kernel_dtype(kernel) == dtype
