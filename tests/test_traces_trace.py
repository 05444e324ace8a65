"""Trace parsing: on a real CPU trace, and on a fixture shaped like a CUDA trace of torch.profiler."""

import json
from pathlib import Path

import pytest

import attn
from attn import specs
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.read.range_counts import depths, per_forward, top_level
from attn.traces.read.trace import Trace, TraceFormatError, forwards

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)


@pytest.fixture(scope="module")
def cuda_trace():
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def cpu_traces():
    return {name: capture(attn.get_variant(name), TINY)[0] for name in ("naive", "inplace")}


def names_under(trace, name):
    """Names of the ops nested (at any depth) under ops called `name` inside attn_fwd."""
    found = set()
    for fwd in forwards(trace):
        for parent in (e for e in fwd.cpu_events if e.name == name):
            found |= {e.name for e in fwd.cpu_events if e is not parent and parent.contains(e)}
    return found


def test_cpu_trace_has_three_recorded_forwards(cpu_traces):
    for trace in cpu_traces.values():
        assert len(forwards(trace)) == 3


def test_naive_masking_clones_the_scores(cpu_traces):
    assert {"aten::clone", "aten::copy_"} <= names_under(cpu_traces["naive"], "aten::masked_fill")


def test_inplace_has_no_clone_and_copies_no_scores(cpu_traces):
    fwd = forwards(cpu_traces["inplace"])[0]
    names = [e.name for e in fwd.cpu_events]
    assert "aten::clone" not in names and "aten::masked_fill" not in names
    # The only copy left is the Python scale factor turned into a 0-dim tensor inside mul.
    copies = [e for e in fwd.cpu_events if e.name == "aten::copy_"]
    assert copies and all(e.args["Input Dims"][0] == [] for e in copies)
    assert "aten::copy_" in names_under(cpu_traces["inplace"], "aten::mul")


def test_cpu_summary_has_no_device_numbers(cpu_traces):
    s = per_forward(cpu_traces["naive"])
    assert s["device_time_us"] is None and s["kernels_per_forward"] is None
    assert s["cpu_time_us"] > 0
    assert s["ops"] == [
        "aten::mul",
        "aten::transpose",
        "aten::matmul",
        "aten::masked_fill",
        "aten::softmax",
        "aten::matmul",
    ]
    assert per_forward(cpu_traces["inplace"])["ops_per_forward"] < s["ops_per_forward"]


def test_fixture_counts_device_work_per_forward(cuda_trace):
    s = per_forward(cuda_trace)
    assert s["forwards"] == 2
    # Kernels, memcpys and memsets are counted apart: 5 kernels and the clone's DtoD Memcpy.
    assert s["kernels_per_forward"] == 5
    assert s["memcpy_per_forward"] == {"DtoD": 1}
    assert s["memset_per_forward"] == 0
    assert s["launches_per_forward"] == 5
    assert "Memcpy DtoD (Device -> Device)" not in s["kernels"]
    assert s["kernels"][0].startswith("ampere_bf16_s16816gemm")
    # Device time is the sum of the six durations of one forward (60+30+25+28+45+55).
    assert s["device_time_us"] == pytest.approx(243.0)
    assert s["ops"] == [
        "aten::matmul",
        "aten::mul",
        "aten::masked_fill",
        "aten::softmax",
        "aten::matmul",
    ]


def test_fixture_ignores_work_outside_the_forward(cuda_trace):
    # cudaDeviceSynchronize sits after attn_fwd; the GPU-side attn_fwd annotation is not a CPU range.
    fwd = forwards(cuda_trace)[0]
    assert all(e.name != "cudaDeviceSynchronize" for e in fwd.cpu_events)
    assert all(e.cat != "gpu_user_annotation" for e in fwd.device_events)


def test_driver_api_launches_count_too(cuda_trace):
    # cuDNN launches through cuLaunchKernelEx (category cuda_driver), not cudaLaunchKernel.
    trace = json.loads(json.dumps(cuda_trace))
    for e in trace["traceEvents"]:
        if e.get("name") == "cudaLaunchKernel":
            e["name"], e["cat"] = "cuLaunchKernelEx", "cuda_driver"
    assert per_forward(trace)["kernels_per_forward"] == 5


def test_a_launch_without_its_kernel_is_not_counted(cuda_trace):
    trace = json.loads(json.dumps(cuda_trace))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "gpu_memcpy"]
    s = per_forward(trace)
    assert s["kernels_per_forward"] == 5 and s["memcpy_per_forward"] == {}


def test_depths_follow_nesting(cuda_trace):
    fwd = forwards(cuda_trace)[0]
    evts = [fwd.range, *fwd.cpu_events]
    by_name = {}
    for e, d in zip(evts, depths(evts), strict=True):
        by_name.setdefault(e.name, d)
    assert by_name["attn_fwd"] == 0
    assert by_name["aten::masked_fill"] == 1
    assert by_name["aten::clone"] == 2
    assert by_name["aten::copy_"] == 3
    assert by_name["cudaMemcpyAsync"] == 4
    assert [e.name for e in top_level(fwd)][:2] == ["aten::matmul", "aten::mul"]


def test_parents_and_launchers_follow_nesting_and_correlation(cuda_trace):
    table = Trace(cuda_trace)
    copy = table.name.index("aten::copy_")
    assert [table.name[r] for r in table.ancestors(copy)] == [
        "aten::clone", "aten::masked_fill", "attn_fwd", "ProfilerStep#2",
    ]  # fmt: skip
    memcpy = table.name.index("Memcpy DtoD (Device -> Device)")
    assert table.parent[memcpy] == -1  # device work sits on no CPU thread
    assert table.name[table.launcher(memcpy)] == "cudaMemcpyAsync"
    assert copy in table.thread_rows(copy)


def test_trace_without_forward_is_an_error():
    with pytest.raises(ValueError, match="attn_fwd"):
        per_forward({"traceEvents": []})


def test_events_skip_metadata(cuda_trace):
    table = Trace(cuda_trace)
    assert all(cat != "" or name for cat, name in zip(table.cat, table.name, strict=True))
    assert "process_name" not in table.name


def edited(cuda_trace, edit, where=lambda e: e.get("name") == "aten::softmax"):
    """A copy of the fixture with `edit(event)` applied to each event `where` picks."""
    trace = json.loads(json.dumps(cuda_trace))
    for e in trace["traceEvents"]:
        if where(e):
            edit(e)
    return trace


def kernels(e):
    return e.get("cat") == "kernel"


def launches(e):
    return e.get("cat") == "cuda_runtime"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda e: e.update(ts=None), "ts None"),
        (lambda e: e.update(ts="soon"), "ts 'soon'"),
        (lambda e: e.update(ts=float("nan")), "ts nan"),
        (lambda e: e.update(ts=1e300), "ts 1e+300"),
        (lambda e: e.update(dur=None), "dur None"),
        (lambda e: e.update(dur=float("inf")), "dur inf"),
        (lambda e: e.update(dur=-5), "negative dur"),
        (lambda e: e.update(args="text"), "args 'text'"),
        (lambda e: e.update(args={"correlation": "x"}), "correlation 'x'"),
        (lambda e: e.update(args={"correlation": 1.5}), "correlation 1.5"),
    ],
    ids=[
        "null ts",
        "text ts",
        "NaN ts",
        "huge ts",
        "null dur",
        "infinite dur",
        "negative dur",
        "args text",
        "text correlation",
        "fractional correlation",
    ],  # fmt: skip
)
def test_impossible_event_data_is_refused_naming_the_event(cuda_trace, edit, says):
    with pytest.raises(TraceFormatError) as error:
        Trace(edited(cuda_trace, edit))
    assert "aten::softmax" in str(error.value) and says in str(error.value)


@pytest.mark.parametrize(
    ("edit", "where", "says"),
    [
        (lambda e: e.pop("dur"), kernels, "have no dur"),
        (lambda e: e.pop("ts"), kernels, "have no ts"),
        (lambda e: e["args"].update(correlation=7), launches, "reuse another's correlation id"),
        (lambda e: e["args"].update(correlation=10**6 + e["args"]["correlation"]), launches,
         "has its launch"),
    ],
    ids=["no dur", "no ts", "shared correlation ids", "kernels without launch"],
)  # fmt: skip
def test_untrustworthy_device_data_is_flagged_and_not_counted(cuda_trace, edit, where, says):
    """Dropped silently, these counted 60 kernels where there are 5, or 0 where there are 5."""
    s = per_forward(edited(cuda_trace, edit, where))
    assert any(says in p for p in s["problems"])
    if "correlation" in says or "launch" in says:
        assert s["kernels_per_forward"] is None  # cannot tell, not a made-up number


def test_claims_on_flagged_data_cannot_tell(cuda_trace):
    from attn.traces.sets.analyze import summarize

    summary, _ = summarize(
        edited(cuda_trace, lambda e: e.pop("dur"), kernels), spec=specs.spec("naive")
    )
    assert summary["claims"] and all(c["holds"] is None for c in summary["claims"])
    assert all("cannot tell" in c["observed"] for c in summary["claims"])


def test_json_nested_past_any_trace_is_one_error(tmp_path):
    """100,000 levels raised RecursionError from the standard library's decoder."""
    from attn.traces.read.trace import load_trace

    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceFormatError, match="deep.json: JSON nested too deep"):
        load_trace(path)


@pytest.mark.parametrize("value", ["abc", "inf", "nan", "-1", "0"])
def test_a_trace_size_limit_that_is_not_a_size_is_named(tmp_path, monkeypatch, value):
    from attn.traces.read.trace import load_trace

    path = tmp_path / "t.json"
    path.write_text(FIXTURE.read_text())
    monkeypatch.setenv("ATTN_MAX_TRACE_GIB", value)
    with pytest.raises(TraceFormatError, match=f"ATTN_MAX_TRACE_GIB is '{value}'"):
        load_trace(path)


def test_kernels_whose_launch_is_missing_among_a_ranges_make_its_counts_unknown():
    """Two launches gone from the fixture: 2.5 kernels per forward were reported (not 5), and a
    claim on them 'does not hold' where it cannot be told."""
    from attn.traces.sets.analyze import summarize

    raw = json.loads(FIXTURE.read_text())
    raw["traceEvents"] = [
        e
        for e in raw["traceEvents"]
        if not (
            e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in (101, 108)
        )
    ]
    trace = Trace(raw)
    assert any("without their launch" in p for p in trace.problems)
    summary, _ = summarize(trace, spec=specs.spec("naive"))
    assert summary["kernels_per_forward"] is None and summary["device_time_us"] is None
    assert summary["claims"] and all(c["holds"] is None for c in summary["claims"])


@pytest.mark.parametrize("size", [None, "12x", [1, 2], 1.5])
def test_a_memory_event_whose_size_is_not_bytes_is_named(size):
    from attn.traces.read.range_counts import memory_events

    raw = {"traceEvents": [{"name": "[memory]", "ph": "i", "ts": 5,
                            "args": {"Device Type": 0, "Bytes": size}}]}  # fmt: skip
    with pytest.raises(TraceFormatError, match=r"\[memory\] event at ts 5 has Bytes"):
        memory_events(raw, 0)


def test_steps_averaged_together_are_named_by_their_prefix():
    """The summary said ProfilerStep#5 while its numbers were the mean of six steps."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": 100 * n,
         "dur": 50, "pid": 1, "tid": 1}
        for n in range(5, 11)
    ]  # fmt: skip
    measured = per_forward(Trace({"traceEvents": events}))
    assert (measured["range"], measured["forwards"]) == ("ProfilerStep#*", 6)
    assert per_forward(Trace({"traceEvents": events}), "ProfilerStep#*")["forwards"] == 6
