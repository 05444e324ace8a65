
"""`diagnose`: the attention in a trace, its implementation, and what to fix, on our runs, on a GPU
fixture, on hand-made traces for what no run here can make, and on real traces recorded by others
(where another tool's own per-op analysis of the same trace is the oracle)."""

import csv
import functools
import json
import re
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

diagnose = functools.partial(diagnose_trace, teaching=specs.chapter_teaching)  # as the CLI calls it

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/fixtures/realtraces"
FIXTURE = ROOT / "tests/fixtures/cuda_naive_trace.json"


def kinds(result: dict) -> dict[str, int]:
    return {f["kind"]: f["count"] for f in result["findings"]}


def implementations(result: dict) -> list[str]:
    return [row["implementation"] for row in result["attention"]]


def real(folder: str) -> dict:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return load_trace(path)


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
    path = ROOT / "profiles/cpu" / variant / "trace.json.gz"
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

REAL_CASES = {  # folder -> [(implementation, compiled, where, calls, kernels per call)]
    "tracelens-h100-bert-small-sdpa-flash": [
        ("sdpa_flash", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-mi300x-bert-small-sdpa-flash": [
        ("sdpa_flash", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-h100-timesformer-eager-softmax": [
        ("eager", False, "nn.Module: TimesformerSelfAttention", 24, 7),
    ],
    "tracelens-h100-qwen1.5-sdpa-flash": [
        ("sdpa_flash", False, "nn.Module: Qwen2Attention", 24, 1),
        ("sdpa_flash", False, "kernels whose launch is not in the trace", 10, 1),
    ],
    "tracelens-mi300x-sglang-decode-graph": [
        ("paged", False, "a graph replay (hipGraphLaunch)", 36, 2),
    ],
    "tracelens-mi300-vllm-decode-graph": [
        ("paged", False, "a graph replay (hipGraphLaunch)", 24, 1.5),
    ],
    "tracelens-mi300x-compiled-sdpa": [("sdpa_flash", True, "top level", 1, 1)],
    "hta-a100-alexnet-fwd": [],
    "hta-a100-ddp-no-record-shapes": [],
    "kineto-tbplugin-volta-resnet50-torch18-oldformat": [],
}


def test_every_real_trace_has_a_case():
    assert set(REAL_CASES) == {p.name for p in REAL.iterdir()}


@pytest.mark.parametrize("folder", sorted(REAL_CASES))
def test_real_traces(folder):
    result = diagnose(Trace(real(folder)))
    seen = [
        (r["implementation"], r["compiled"], r["where"], r["calls"], r["kernels_per_call"])
        for r in result["attention"]
    ]
    assert seen == REAL_CASES[folder]
    if not seen:  # no attention: nothing to find, nothing left unchecked
        assert result["findings"] == result["not_checked"] == []


def test_timesformer_is_eager_and_every_finding_is_checked():
    result = diagnose(Trace(real("tracelens-h100-timesformer-eager-softmax")))
    assert kinds(result) == {"eager_attention": 24} and result["not_checked"] == []


def test_a_graph_replay_says_what_it_cannot_check():
    result = diagnose(Trace(real("tracelens-mi300x-sglang-decode-graph")))
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
    result = diagnose(Trace(real(folder)))
    ours = result["attention"][0]  # the calls made by the ops (or the one graph)
    calls = sum(int(r["name_count"]) for r in theirs)
    kernel_us = sum(float(r["Kernel Time (µs)_sum"]) for r in theirs)
    assert ours["calls"] == calls
    assert ours["calls"] * ours["device_time_us_per_call"] == pytest.approx(kernel_us, rel=1e-3)


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
    assert cli.main(["diagnose", str(ROOT / "profiles/cpu/naive/trace.json.gz")]) == 0
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
    assert capsys.readouterr().out.strip() == "No attention found in this trace."


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


def test_ops_each_on_its_own_thread_are_grouped_in_one_pass():
    """Ten thousand threads: each thread's ops were found by a scan of every op."""
    threads = 10_000
    events = [
        _op(name, 10 * t + j, tid=t, dur=0.5)
        for t in range(threads)
        for j, name in enumerate(("aten::mm", "aten::softmax", "aten::mm"))
    ]
    events += [_op("aten::add", 5, tid=threads + t) for t in range(threads)]
    result = diagnose_trace(Trace({"traceEvents": events}))
    assert [(r["implementation"], r["calls"]) for r in result["attention"]] == [("eager", threads)]


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
