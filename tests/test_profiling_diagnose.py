"""`diagnose`: the attention in a trace, its implementation, and what to fix, on our runs, on a GPU
fixture, on hand-made traces for what no run here can make, and on real traces recorded by others
(where another tool's own per-op analysis of the same trace is the oracle)."""

import csv
import functools
import json
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile, record_function

from attn import specs
from attn.profiling import cli
from attn.traces import patterns
from attn.traces.diagnose import ADVICE, chapter
from attn.traces.diagnose import diagnose as diagnose_trace
from attn.traces.trace import Trace, load_trace, read_trace
from attn.traces.units import time_text

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count  # noqa: E402

diagnose = functools.partial(diagnose_trace, teaching=specs.chapter_teaching)  # as the CLI calls it

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/fixtures/realtraces"
CPU_SET = next((ROOT / "profiles").glob("cpu*/index.json")).parent  # the committed CPU set
FIXTURE = ROOT / "tests/fixtures/cuda_naive_trace.json"


def kinds(result: dict) -> dict[str, int]:
    return {f["kind"]: f["count"] for f in result["findings"]}


def implementations(result: dict) -> list[str]:
    return [row["implementation"] for row in result["attention"]]


def real(folder: str) -> dict:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return load_trace(path)


@functools.cache
def traced(folder: str) -> Trace:
    """A real trace parsed once for all the tests that read it (diagnose changes nothing in it)."""
    return Trace(real(folder))


# --- our runs (profiles/cpu), as the issue lists them -----------------------------------------

OURS = {  # variant -> (implementation, compiled, findings)
    "naive": ("eager", False, {"out_of_place_masked_fill": 3, "eager_attention": 3}),
    "inplace": ("eager", False, {"eager_attention": 3}),
    "sdpa_math": ("sdpa_math", False, {}),
    "sdpa_flash": ("sdpa_flash", False, {}),
    "custom_cpu": ("custom", False, {}),
    "compiled_naive": ("eager", True, {"eager_attention": 3}),
    "compiled_additive": ("sdpa_flash", True, {}),
    "flex_causal": ("flex", True, {}),
    "flex_sliding_window": ("flex", True, {}),
    "decode_repeat_kv": ("sdpa_flash", False, {"repeat_kv": 6}),
    "decode_enable_gqa": ("sdpa_flash", False, {}),
}


@pytest.mark.parametrize("variant", sorted(OURS))
def test_our_runs_are_named_and_diagnosed(variant):
    path = CPU_SET / variant / "trace.json.gz"
    if not path.is_file():
        pytest.skip(f"no committed trace of {variant} on this checkout")
    result = diagnose(read_trace(path))
    implementation, compiled, found = OURS[variant]
    (row,) = result["attention"]  # three forwards, one call each, all in attn_fwd
    assert (row["implementation"], row["compiled"], row["where"], row["calls"]) == (
        implementation, compiled, "attn_fwd", 3,
    )  # fmt: skip
    assert row["kernels_per_call"] is None and row["device_time_us_per_call"] is None  # a CPU run
    assert kinds(result) == found
    assert result["not_checked"] == []


def test_each_sdpa_variant_is_named_after_its_backend():
    for spec in specs.SPECS:
        if spec.name.startswith("sdpa_"):
            assert patterns.sdpa(spec.name.removeprefix("sdpa_")) == spec.name


def test_every_finding_points_at_a_page_and_gives_one_sentence():
    for kind, advice in ADVICE.items():
        assert (ROOT / "docs" / chapter(kind, specs.chapter_teaching)).is_file(), kind
        assert advice.endswith(".") and ". " not in advice, kind


# --- the GPU fixture, and what it becomes when it is changed --------------------------------------


def fixture() -> dict:
    return json.loads(FIXTURE.read_text())


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


def test_without_cpu_ops_the_kernels_still_answer():
    """A trace of kernels alone: attention from kernel names, every finding said unchecked."""
    raw = real("tracelens-h100-bert-small-sdpa-flash")
    kept = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
    raw = {**raw, "traceEvents": [e for e in raw["traceEvents"] if e.get("cat") in kept]}
    result = diagnose(Trace(raw))
    (row,) = result["attention"]
    assert (row["implementation"], row["calls"], row["kernels_per_call"]) == ("sdpa_flash", 4, 1)
    assert result["findings"] == []
    assert {g["kind"] for g in result["not_checked"]} == set(ADVICE)
    assert all("no CPU ops" in g["why"] for g in result["not_checked"])


# --- hand-made traces: SDPA's math backend on a GPU, with and without shapes ----------------------


def sdpa_on_gpu(backend_op: str, args: dict) -> dict:
    """One attn_fwd calling SDPA, whose backend op launches one kernel."""
    cpu = {"ph": "X", "pid": 1, "tid": 1}
    return {
        "traceEvents": [
            {**cpu, "cat": "user_annotation", "name": "attn_fwd", "ts": 0, "dur": 100},
            {**cpu, "cat": "cpu_op", "name": "aten::scaled_dot_product_attention", "ts": 10,
             "dur": 50, "args": args},
            {**cpu, "cat": "cpu_op", "name": backend_op, "ts": 11, "dur": 48, "args": args},
            {**cpu, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12, "dur": 2,
             "args": {"correlation": 7}},
            {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "ampere_sgemm_128x64_nn",
             "ts": 40, "dur": 30, "args": {"correlation": 7}},
        ]
    }  # fmt: skip


FP32 = {"Input Dims": [[1, 8, 128, 64]] * 3 + [[128, 128]], "Input type": ["float"] * 4}


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


# --- real traces recorded by others ---------------------------------------------------------------

REAL_CASES = {  # folder -> [(implementation, pass, compiled, where, calls, kernels per call)]
    "tracelens-h100-bert-small-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-mi300x-bert-small-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-h100-timesformer-eager-softmax": [  # temporal calls, then spatial: two kinds
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
    ],
    "tracelens-h100-qwen1.5-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: Qwen2Attention", 24, 1),
        ("sdpa_flash", "forward", False, "kernels whose launch is not in the trace", 10, 1),
    ],
    "tracelens-mi300x-sglang-decode-graph": [
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 36, 2),
    ],
    "tracelens-mi300-vllm-decode-graph": [  # no shapes: told apart by their kernels
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 12, 1),
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 12, 2),
    ],
    "tracelens-mi300x-compiled-sdpa": [("sdpa_flash", "forward", True, "top level", 1, 1)],
    "switchtransformers-a100-eager-mqa-fp32": [
        ("eager", "forward", False, "nn.Module: MultiQueryAttention", 10, 12),
    ],
    "tracelens-mi300x-flux-sage-graph": [  # text encoders eager, the transformer a graph
        ("sdpa_flash", "forward", False, "nn.Module: CLIPAttention", 12, 2),
        ("eager", "forward", False, "nn.Module: T5Attention", 1, 28),  # computes position bias
        ("eager", "forward", False, "nn.Module: T5Attention", 23, 6),
        ("sdpa_flash", "forward", False, "nn.Module: Attention", 1, 1),
        ("quantised", "forward", False, "a graph replay (hipGraphLaunch)", 228, 2),
    ],
    "tracelens-b200-vllm-gptoss-fp8-paged": [  # one shape, two kernels: sliding window, causal
        ("paged", "forward", False, "nn.Module: Attention", 18, 2),
        ("paged", "forward", False, "nn.Module: Attention", 18, 2),
    ],
    "tracelens-h100-owlv2-eager-two-kinds": [  # one module class: image, then text
        ("eager", "forward", False, "nn.Module: Owlv2Attention", 120, 3),
        ("eager", "forward", False, "nn.Module: Owlv2Attention", 60, 5),
    ],
    "hta-a100-alexnet-fwd": [],
    "hta-a100-ddp-no-record-shapes": [],
    "kineto-tbplugin-volta-resnet50-torch18-oldformat": [],
}


def test_every_real_trace_has_a_case():
    assert set(REAL_CASES) == {p.name for p in REAL.iterdir()}


@pytest.mark.parametrize("folder", sorted(REAL_CASES))
def test_real_traces(folder):
    result = diagnose(traced(folder))
    seen = [
        (r["implementation"], r["pass"], r["compiled"], r["where"], r["calls"],
         r["kernels_per_call"])
        for r in result["attention"]
    ]  # fmt: skip
    assert seen == REAL_CASES[folder]
    if not seen:  # no attention: nothing to find, nothing left unchecked
        assert result["findings"] == result["not_checked"] == []


@functools.cache
def raw(folder: str) -> dict:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return realtrace_count.load(path)


FLASH = "aten::_scaled_dot_product_flash_attention"


def op_calls(op: str):
    return lambda t: realtrace_count.op_calls(t, op)


def eager_calls(module: str):
    return lambda t: realtrace_count.eager_calls(t, f"nn.Module: {module}")


INDEPENDENT = {  # folder -> the second count of its calls: {shapes: (calls, kernels, us per call)}
    "tracelens-h100-bert-small-sdpa-flash": op_calls(FLASH),
    "tracelens-mi300x-bert-small-sdpa-flash": op_calls(FLASH),
    "tracelens-h100-qwen1.5-sdpa-flash": op_calls(FLASH),
    "tracelens-mi300x-compiled-sdpa": op_calls(FLASH),
    "tracelens-h100-timesformer-eager-softmax": eager_calls("TimesformerSelfAttention"),
    "switchtransformers-a100-eager-mqa-fp32": eager_calls("MultiQueryAttention"),
    "tracelens-h100-owlv2-eager-two-kinds": eager_calls("Owlv2Attention"),
    "tracelens-b200-vllm-gptoss-fp8-paged": op_calls("vllm::unified_attention_with_output"),
    "tracelens-mi300x-flux-sage-graph": lambda t: (
        op_calls(FLASH)(t) | eager_calls("T5Attention")(t)
    ),
}


@pytest.mark.parametrize("folder", sorted(INDEPENDENT))
def test_each_kind_of_call_equals_an_independent_count(folder):
    """Calls, kernels and device time of each kind of call (its input shapes; kinds that ran other
    kernels summed back) equal a count written straight from the raw JSON
    (tests/realtrace_count.py), which shares no code."""
    result = diagnose(traced(folder))
    ours: dict[str, list] = {}
    for r in (r for r in result["attention"] if r["shapes"] is not None):
        calls, kernels, us = ours.setdefault(r["shapes"], [0, 0.0, 0.0])
        ours[r["shapes"]] = [
            calls + r["calls"],
            kernels + r["calls"] * r["kernels_per_call"],
            us + r["calls"] * r["device_time_us_per_call"],
        ]
    theirs = INDEPENDENT[folder](raw(folder))
    assert ours.keys() == theirs.keys()
    for shapes, (calls, kernels, us) in theirs.items():
        assert ours[shapes][0] == calls, shapes
        assert ours[shapes][1] == pytest.approx(calls * kernels), shapes
        assert ours[shapes][2] == pytest.approx(calls * us), shapes


GRAPH_KERNELS = {  # folder -> {kernels per call: the kernels of that kind, by name}
    "tracelens-mi300-vllm-decode-graph": {
        1: r"^kernel_unified_attention_2d$",
        2: r"^kernel_unified_attention_3d$|^reduce_segments$",
    },
    "tracelens-mi300x-sglang-decode-graph": {2: r"paged_attention_ll4mi_(QKV|reduce)"},
    "tracelens-mi300x-flux-sage-graph": {2: r"^sage_(quant_kernel|fwd)$"},
}


@pytest.mark.parametrize("folder", sorted(GRAPH_KERNELS))
def test_graph_replays_split_by_their_kernels_equal_a_count_by_name(folder):
    """Without shapes, a graph's calls are told apart by which kernels ran: each kind's kernels
    and their time equal those counted by name in the raw JSON."""
    result = diagnose(traced(folder))
    for r in (r for r in result["attention"] if r["where"].startswith("a graph replay")):
        count, us = realtrace_count.kernels_named(
            raw(folder), GRAPH_KERNELS[folder][r["kernels_per_call"]]
        )
        assert r["calls"] * r["kernels_per_call"] == count
        assert r["calls"] * r["device_time_us_per_call"] == pytest.approx(us)


def test_two_kinds_of_call_each_with_its_share():
    """TimeSformer's temporal and spatial calls, told apart by shapes, are as far apart in time as
    a reader sees: the spatial calls take over 10x the temporal ones, and most of the trace."""
    result = diagnose(traced("tracelens-h100-timesformer-eager-softmax"))
    temporal, spatial = result["attention"]
    assert spatial["device_time_us_per_call"] > 10 * temporal["device_time_us_per_call"]
    assert spatial["share_of_device_time"] > 0.5
    total = sum(r["share_of_device_time"] for r in result["attention"])
    assert result["attention_share_of_device_time"] == pytest.approx(total)
    device = realtrace_count.kernels_named(raw("tracelens-h100-timesformer-eager-softmax"), "")
    assert result["trace"]["device_time_us"] >= device[1]  # kernels, memcpy and memset


def test_timesformer_is_eager_and_every_finding_is_checked():
    result = diagnose(traced("tracelens-h100-timesformer-eager-softmax"))
    assert kinds(result) == {"eager_attention": 24} and result["not_checked"] == []


def test_a_graph_replay_says_what_it_cannot_check():
    result = diagnose(traced("tracelens-mi300x-sglang-decode-graph"))
    assert result["findings"] == []
    assert {g["kind"] for g in result["not_checked"]} == set(ADVICE)
    assert all("graph replay" in g["why"] for g in result["not_checked"])


def oracle(folder: str) -> list[dict]:
    """TraceLens's own per-op analysis of the trace, beside it: its attention rows."""
    (path,) = (REAL / folder).glob("tracelens_*.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    return [r for r in rows if re.search(r"attention", r["name"])]


@pytest.mark.parametrize(
    "folder",
    [
        "tracelens-h100-bert-small-sdpa-flash",
        "tracelens-mi300x-bert-small-sdpa-flash",
        "tracelens-h100-qwen1.5-sdpa-flash",
        "tracelens-mi300x-compiled-sdpa",
        "tracelens-mi300x-sglang-decode-graph",
        "tracelens-mi300-vllm-decode-graph",
    ],
)
def test_calls_and_kernel_time_match_tracelens(folder):
    """Calls and kernel time of the attention equal another tool's, computed its own way (from
    the ops it matched, and for graph replays from the graph's capture)."""
    theirs = oracle(folder)
    result = diagnose(traced(folder))
    where = result["attention"][0]["where"]  # the calls made by the ops (or the one graph)
    ours = [r for r in result["attention"] if r["where"] == where]
    calls = sum(int(r["name_count"]) for r in theirs)
    kernel_us = sum(float(r["Kernel Time (µs)_sum"]) for r in theirs)
    assert sum(r["calls"] for r in ours) == calls
    ours_us = sum(r["calls"] * r["device_time_us_per_call"] for r in ours)
    assert ours_us == pytest.approx(kernel_us, rel=1e-3)


def test_a_quantised_attention_in_a_graph_equals_tracelens_from_the_capture():
    """SageAttention's kernels, whose names say nothing of attention, replayed from a graph: calls
    and kernel time equal TraceLens's ops summary, which attributes them from the graph's capture."""
    folder = "tracelens-mi300x-flux-sage-graph"
    (path,) = (REAL / folder).glob("tracelens_*.csv")
    theirs = list(csv.DictReader(path.open(encoding="utf-8")))
    (ours,) = [
        r for r in diagnose(traced(folder))["attention"] if r["implementation"] == "quantised"
    ]
    assert {int(r["Count"]) for r in theirs} == {ours["calls"]}  # one of each kernel per call
    kernel_us = sum(float(r["total_direct_kernel_time_sum"]) for r in theirs)
    assert ours["calls"] * ours["device_time_us_per_call"] == pytest.approx(kernel_us, rel=1e-3)


def test_one_shape_two_kernels_is_two_kinds_of_call():
    """GPT-OSS alternates sliding-window and full layers: the same shapes, each kind its own
    kernel, as many of each as the raw JSON holds."""
    folder = "tracelens-b200-vllm-gptoss-fp8-paged"
    rows = diagnose(traced(folder))["attention"]
    for r in rows:
        (fmha,) = [k for k in r["kernels"] if k.startswith("fmhaSm100a")]
        count, us = realtrace_count.kernels_named(raw(folder), f"^{re.escape(fmha)}$")
        assert r["calls"] == count
    assert {"Sliding" in k for r in rows for k in r["kernels"] if k.startswith("fmha")} == {
        True,
        False,
    }


# --- the command line -----------------------------------------------------------------------------


def test_cli_writes_the_json_shape_and_prints_a_table(tmp_path, capsys):
    path = next((REAL / "tracelens-h100-bert-small-sdpa-flash").glob("*.json.gz"))
    out = tmp_path / "diagnosis.json"
    assert cli.main(["diagnose", str(path), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (row,) = result["attention"]
    assert set(row) >= {
        "implementation", "compiled", "where", "calls", "kernels_per_call",
        "device_time_us_per_call",
    }  # fmt: skip
    assert result["findings"] == [] and result["trace"]["device_name"] == "NVIDIA H100 80GB HBM3"
    printed = capsys.readouterr().out
    assert "sdpa_flash" in printed and "pytorch_flash::flash_fwd_kernel" in printed


def test_cli_names_a_finding_and_its_chapter(capsys):
    assert cli.main(["diagnose", str(CPU_SET / "naive/trace.json.gz")]) == 0
    printed = capsys.readouterr().out
    assert "out_of_place_masked_fill" in printed and "inplace.md" in printed


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"hello": 1}', "not a Chrome trace"),
        (
            '{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon"}]}',
            "an event that cannot be read",
        ),
    ],
)
def test_a_non_trace_gets_one_line(tmp_path, capsys, text, says):
    bad = tmp_path / "notes.json"
    bad.write_text(text)
    assert cli.main(["diagnose", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err


def test_what_a_graph_replay_cannot_tell_is_said_once(capsys):
    trace = REAL / "tracelens-mi300x-sglang-decode-graph/sglang_Qwen3-8B_decode.json.gz"
    assert cli.main(["diagnose", str(trace)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.count("not checked") == 1 and "sync_in_forward: not checked" in printed


def test_a_trace_with_no_attention_says_so(tmp_path, capsys):
    trace = fixture()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "softmax" not in e.get("name", "")]
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    assert cli.main(["diagnose", str(tmp_path / "trace.json")]) == 0
    first, *lint = capsys.readouterr().out.strip().splitlines()
    assert first == "No attention found in this trace."
    assert "no input shapes were recorded" in " ".join(lint)  # the fixture has none


# --- backward rows: our training runs, and a hand-made GPU backward --------------------------------

TRAINING = {  # variant -> (implementation, the autograd node its attention's backward runs)
    "train_naive": ("eager", "SoftmaxBackward0"),
    "train_inplace": ("eager", "SoftmaxBackward0"),
    "train_sdpa_math": ("sdpa_math", "SafeSoftmaxBackward0"),
    "train_sdpa_flash": ("sdpa_flash", "ScaledDotProductFlashAttentionForCpuBackward0"),
    "train_custom_cpu": (
        "custom",
        "GeneratedBackwardFor_attn_flash_attention_forward_defaultBackward",
    ),
}


@pytest.mark.parametrize("variant", sorted(TRAINING))
def test_a_training_step_has_a_backward_row_per_call(variant):
    """Three steps: three forwards in attn_fwd and their three backwards, linked by autograd's
    sequence numbers; the raw JSON holds as many of the attention's backward nodes."""
    path = CPU_SET / variant / "trace.json.gz"
    if not path.is_file():
        pytest.skip(f"no committed trace of {variant} on this checkout")
    implementation, node = TRAINING[variant]
    result = diagnose(read_trace(path))
    forward, backward = result["attention"]
    assert (forward["implementation"], forward["pass"], forward["calls"]) == (
        implementation, "forward", 3,
    )  # fmt: skip
    assert (backward["implementation"], backward["pass"], backward["calls"]) == (
        implementation, "backward", 3,
    )  # fmt: skip
    assert backward["linked_to_forward"] == 3
    assert realtrace_count.backward_nodes(realtrace_count.load(path), node) == 3
    ratio = backward["backward_forward_ratio"]
    assert ratio["of"] == "CPU time" and 0 < ratio["min"] <= ratio["median"] <= ratio["max"]


def with_backward(args: dict) -> dict:
    """sdpa_on_gpu's math call, its op numbered 5, and its backward on autograd's own thread: the
    node numbered 5 launches two kernels."""
    trace = sdpa_on_gpu("aten::_scaled_dot_product_attention_math", args | {"Sequence number": 5})
    bwd = {"ph": "X", "pid": 1, "tid": 2}
    trace["traceEvents"] += [
        {**bwd, "cat": "cpu_op", "name": "autograd::engine::evaluate_function: SafeSoftmaxBackward0",
         "ts": 200, "dur": 40, "args": {"Sequence number": 5, "Fwd thread id": 1}},
        {**bwd, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 205, "dur": 2,
         "args": {"correlation": 8}},
        {**bwd, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 210, "dur": 2,
         "args": {"correlation": 9}},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "softmax_backward_kernel",
         "ts": 220, "dur": 45, "args": {"correlation": 8}},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "ampere_sgemm_128x64_nt",
         "ts": 270, "dur": 15, "args": {"correlation": 9}},
    ]  # fmt: skip
    return trace


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


def test_without_sequence_numbers_a_backward_is_not_linked():
    trace = with_backward(FP32)
    for e in trace["traceEvents"]:
        (e.get("args") or {}).pop("Sequence number", None)
    result = diagnose(Trace(trace))
    assert [r["pass"] for r in result["attention"]] == ["forward"]  # its kernels say nothing


# --- found by structure: ops the table does not know, kernels tied to their op, layout work ---------


def structure_trace() -> dict:
    """A vendor's quantised attention as an autograd Function (its quantise and attention kernels,
    no name in the table); a kernel named as attention launched on another thread under an op
    whose name says nothing; FlashAttention-3's backward kernels launched outside any op; an Inductor pointwise
    kernel named after SDPA."""
    t1, t2 = {"ph": "X", "pid": 1, "tid": 1}, {"ph": "X", "pid": 1, "tid": 2}
    dev = {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel"}

    def launch(thread, ts, corr):
        return {**thread, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
                "args": {"correlation": corr}}  # fmt: skip

    return {
        "traceEvents": [
            {**t1, "cat": "cpu_op", "name": "QuantizedAttnFunction", "ts": 10, "dur": 20},
            launch(t1, 12, 1),
            launch(t1, 14, 2),
            {**t2, "cat": "cpu_op", "name": "te_ops::fused_fwd", "ts": 40, "dur": 20},
            launch(t2, 45, 3),
            launch(t1, 70, 4),
            launch(t1, 72, 5),
            launch(t1, 74, 6),
            launch(t1, 80, 7),
            {**dev, "name": "quantize_per_token_kernel", "ts": 100, "dur": 5,
             "args": {"correlation": 1}},
            {**dev, "name": "ck_tile::kernel<FmhaFwdFp8>", "ts": 106, "dur": 50,
             "args": {"correlation": 2}},
            {**dev, "name": "void te::fmha_fwd_kernel<bf16>(Params)", "ts": 160, "dur": 30,
             "args": {"correlation": 3}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<128>>()",
             "ts": 200, "dur": 4, "args": {"correlation": 4}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdSm90<128>>()",
             "ts": 205, "dur": 80, "args": {"correlation": 5}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ>()",
             "ts": 290, "dur": 6, "args": {"correlation": 6}},
            {**dev, "name": "triton_poi_fused__scaled_dot_product_flash_attention_cat_0",
             "ts": 300, "dur": 9, "args": {"correlation": 7}},
        ]
    }  # fmt: skip


def test_attention_is_found_by_structure_and_each_pass_apart():
    result = diagnose(Trace(structure_trace()))
    seen = [
        (r["implementation"], r["pass"], r["where"], r["calls"], r["kernels_per_call"])
        for r in result["attention"]
    ]
    assert seen == [
        ("custom", "forward", "top level", 1, 2),  # the op, with its quantise kernel
        ("unknown", "forward", "te_ops::fused_fwd", 1, 1),  # its op, found through correlation
        ("custom", "backward", "top level", 1, 3),  # FA3's backward: preprocess starts the call
    ]
    assert result["layout_kernels"] == {"kernels": 1, "device_time_us": 9.0}
    # Only FA3's backward, launched outside any op, cannot be checked: the te_ops call can.
    assert {g["why"] for g in result["not_checked"] if "CPU op" in g["why"]} == {
        "for 1 of the 3 calls, no CPU op was recorded around the attention's kernels"
    }
    share = (5 + 50 + 30 + 4 + 80 + 6) / (5 + 50 + 30 + 4 + 80 + 6 + 9)
    assert result["attention_share_of_device_time"] == pytest.approx(share)


def test_kernels_only_are_split_where_their_time_jumps():
    """No CPU ops and no shapes: four flash calls, two at about 10 µs and two at about 100 µs, are
    two kinds of call; calls within the gap stay one kind."""
    dev = {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel"}
    name = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >"
    durs = [10, 104, 11, 100]
    trace = {"traceEvents": [{**dev, "name": name, "ts": 200 * i, "dur": d} for i, d in
                             enumerate(durs)]}  # fmt: skip
    rows = diagnose(Trace(trace))["attention"]
    assert [(r["calls"], r["device_time_us_range"]) for r in rows] == [
        (2, [10.0, 11.0]),
        (2, [100.0, 104.0]),
    ]


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


# --- trace lint, and a folder given as the trace ----------------------------------------------------


def test_lint_says_what_in_the_trace_misleads():
    cpu = {"ph": "X", "pid": 1, "tid": 1, "cat": "cpu_op"}
    overlapping = {
        "traceEvents": [
            {**cpu, "name": "aten::a", "ts": 0, "dur": 10},
            {**cpu, "name": "aten::b", "ts": 5, "dur": 10},  # starts in a, ends after it
            {**cpu, "name": "aten::c", "ts": 6, "dur": 2},  # nests in a and in b
        ]
    }
    (line, *rest) = diagnose(Trace(overlapping))["lint"]
    assert line.startswith("1 complete event(s) overlap") and "Perfetto" in line
    assert any("no device activity" in r for r in rest) and any(
        "no input shapes" in r for r in rest
    )
    graph = diagnose(traced("tracelens-mi300x-sglang-decode-graph"))["lint"]
    launches = [e for e in raw("tracelens-mi300x-sglang-decode-graph")["traceEvents"]
                if e.get("name") == "hipGraphLaunch"]  # fmt: skip
    ids = {e["args"]["correlation"] for e in launches}
    replayed = [e for e in raw("tracelens-mi300x-sglang-decode-graph")["traceEvents"]
                if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in ids]  # fmt: skip
    assert f"{len(replayed)} kernel(s) were replayed from {len(launches)} CUDA/HIP graph" in (
        " ".join(graph)
    )
    clean = diagnose(traced("tracelens-mi300x-compiled-sdpa"))["lint"]
    assert clean == []


def test_a_folder_given_as_the_trace_gets_one_line(tmp_path, capsys):
    assert cli.main(["diagnose", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "directory" in err.lower()


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


# --- many tiny events: one pass over them, not one per event (20k took 12 s, 1M was killed) -------


def _op(name: str, ts: float, tid: int = 1, dur: float = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_tiny_ops_in_one_range_before_the_attention_are_read_in_one_pass():
    """A range of 20,000 tiny ops, a repeat among them, then matmul, softmax, matmul."""
    n = 20_000
    events = [{**_op("attn_fwd", 0, dur=2 * n + 100), "cat": "user_annotation"}]
    events += [_op("aten::add", 1 + 2 * i) for i in range(n)]
    events[n // 2]["name"] = "aten::repeat_interleave"
    events += [_op(name, 2 * n + 10 * j, dur=5) for j, name in enumerate(("aten::mm",
               "aten::softmax", "aten::mm"))]  # fmt: skip
    result = diagnose_trace(Trace({"traceEvents": events}))
    assert [(r["implementation"], r["where"], r["calls"]) for r in result["attention"]] == [
        ("eager", "attn_fwd", 1)
    ]
    assert kinds(result) == {"eager_attention": 1, "repeat_kv": 1}


def ops_on_their_own_threads(threads: int) -> dict:
    """An eager attention on each of `threads` threads, and as many threads with one op."""
    events = [
        _op(name, 10 * t + j, tid=t, dur=0.5)
        for t in range(threads)
        for j, name in enumerate(("aten::mm", "aten::softmax", "aten::mm"))
    ]
    events += [_op("aten::add", 5, tid=threads + t) for t in range(threads)]
    return {"traceEvents": events}


def test_ops_each_on_its_own_thread_are_grouped_in_one_pass():
    """Ten thousand threads: each thread's ops were found by a scan of every op."""
    result = diagnose_trace(Trace(ops_on_their_own_threads(10_000)))
    assert [(r["implementation"], r["calls"]) for r in result["attention"]] == [("eager", 10_000)]


def lines_run(trace: Trace) -> int:
    """Lines of attn/ that diagnose runs on a trace: its work, counted, not timed."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += event == "line"
        return local

    sys.settrace(lambda frame, event, arg: local if "/attn/" in frame.f_code.co_filename else None)
    try:
        diagnose_trace(trace)
    finally:
        sys.settrace(None)
    return count


def test_twice_the_threads_is_twice_the_work():
    """Linear in the threads: on 564811e, 1,000 threads ran 3.7 times the lines of 500."""
    small, large = (lines_run(Trace(ops_on_their_own_threads(n))) for n in (500, 1000))
    assert large < 2.5 * small


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": 3.5, "Input type": 7, "Sequence number": "x"},
        {"Input Dims": [[1, 8, 128, 64], 5, "q"], "Input type": ["float", None, 2]},
        {"Input Dims": [[1, 8, 128, None]] * 3, "Input type": "float"},
    ],
)
def test_odd_recorded_inputs_are_read_as_no_shape_not_a_crash(args):
    result = diagnose(Trace(with_backward(args)))
    assert implementations(result)[0] == "sdpa_math"


@pytest.mark.parametrize("variant", sorted(TRAINING))
def test_fwdbwd_flows_alone_link_the_same_backward(variant):
    """Without sequence numbers, the profiler's fwdbwd flows (forward op -> autograd node) tie
    each backward to its forward: the same rows as through the numbers."""
    path = CPU_SET / variant / "trace.json.gz"
    if not path.is_file():
        pytest.skip(f"no committed trace of {variant} on this checkout")
    raw = load_trace(path)
    both = diagnose(Trace(raw))["attention"]
    assert any(e.get("cat") == "fwdbwd" for e in raw["traceEvents"])
    for e in raw["traceEvents"]:
        (e.get("args") or {}).pop("Sequence number", None)
    flows = diagnose(Trace(raw))["attention"]
    assert [(r["pass"], r["calls"], r.get("linked_to_forward")) for r in flows] == [
        (r["pass"], r["calls"], r.get("linked_to_forward")) for r in both
    ]


def test_kernels_whose_launch_is_missing_equal_a_count_of_the_raw_json():
    """Qwen's trace holds ten flash kernels whose launch it did not record: one call each."""
    folder = "tracelens-h100-qwen1.5-sdpa-flash"
    (row,) = [
        r
        for r in diagnose(traced(folder))["attention"]
        if r["where"] == "kernels whose launch is not in the trace"
    ]
    count, us = realtrace_count.kernels_without_launch(raw(folder), "flash_fwd")
    assert row["calls"] == count == 10
    assert row["calls"] * row["device_time_us_per_call"] == pytest.approx(us)


def test_a_flow_spelled_oddly_is_passed_over_and_a_good_one_links():
    cpu = {"ph": "X", "cat": "cpu_op"}
    trace = {
        "traceEvents": [
            {**cpu, "name": "aten::_scaled_dot_product_flash_attention_for_cpu", "pid": 1,
             "tid": 1, "ts": 0, "dur": 10},
            {**cpu, "name": "autograd::engine::evaluate_function: X", "pid": 1, "tid": 2,
             "ts": 20, "dur": 5},
            {"ph": "s", "cat": "fwdbwd", "id": [1], "pid": [1], "tid": 1, "ts": 0},
            {"ph": "f", "cat": "fwdbwd", "id": [1], "pid": 1, "tid": {"a": 1}, "ts": "soon"},
            {"ph": "s", "cat": "fwdbwd", "id": 2, "pid": 1, "tid": 1, "ts": 0},
            {"ph": "f", "cat": "fwdbwd", "id": 2, "pid": 1, "tid": 2, "ts": 20.0},
        ]
    }  # fmt: skip
    rows = diagnose(Trace(trace))["attention"]
    assert [(r["pass"], r.get("linked_to_forward")) for r in rows] == [
        ("forward", None),
        ("backward", 1),
    ]
    assert rows[1]["backward_forward_ratio"]["median"] == pytest.approx(5 / 10)


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
