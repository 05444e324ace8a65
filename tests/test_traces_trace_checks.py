"""Trace checks on made-up traces (a few ops, a few kernels), on real CPU runs and on the
CUDA-shaped fixture: which ops ran under what, in which order, what they launched, how long it took.
A false claim is a finding."""

import json
from pathlib import Path

import pytest

from attn import specs
from attn.traces.claims.claim import evaluate
from attn.traces.claims.trace_checks import (
    END,
    Evidence,
    absent,
    backward_over_forward,
    cold_call_costs_more,
    compile_costs_forwards,
    copy_kernels,
    costs_more,
    gaps,
    generated_kernel,
    in_backward,
    kernel_count,
    kernel_matching,
    launched_with,
    longest_gaps,
    memcpys,
    one_kernel_matching,
    only_under,
    op_under,
    ops_per_forward,
    present,
    runs_a_recompilation,
    second_call_cheaper,
    top_level_ops,
)
from attn.traces.read.patterns import FLASH_KERNEL, FLEX_CPU_KERNEL, TRIL_KERNEL
from attn.traces.read.range_counts import per_forward
from attn.traces.read.trace import Trace, forwards
from attn.traces.sets.analyze import summarize

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Flash_fwd_params)"
COPY = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>"


def evidence(trace) -> Evidence:
    """As a run writes it: its summary (first calls' time included) and its forwards."""
    return Evidence(*summarize(trace))


def check(name: str, device_type: str, ev: Evidence) -> dict[str, dict]:
    """The variant's trace claims about a device type, evaluated on `ev`, by key."""
    results = evaluate(specs.spec(name).trace_claims, device_type, ev)
    return {r["key"]: r for r in results}


def host(cat: str, name: str, ts: float, dur: float, **args) -> dict:
    """An event on the one host thread: a range, an op, a runtime call (args: its correlation)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def device(cat: str, name: str, ts: float, dur: float, correlation: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": correlation}}  # fmt: skip


def gpu_forward() -> Evidence:
    """One attn_fwd that launches a copy kernel, a flash kernel and a device-to-device Memcpy."""
    return evidence({"traceEvents": [
        host("user_annotation", "attn_fwd", 0, 100),
        host("cpu_op", "aten::clone", 10, 20), host("cuda_runtime", "cudaLaunchKernel", 12, 2, correlation=1),
        host("cpu_op", "aten::_flash_attention_forward", 40, 30), host("cuda_runtime", "cudaLaunchKernel", 42, 2, correlation=2),
        host("cuda_runtime", "cudaMemcpyAsync", 80, 5, correlation=3),
        device("kernel", COPY, 110, 5, 1), device("kernel", FLASH, 120, 50, 2),
        device("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 180, 5, 3),
    ]})  # fmt: skip


NESTED = [("aten::transpose", 10, 20), ("aten::as_strided", 11, 12), ("aten::matmul", 30, 60),
          ("aten::bmm", 31, 50), ("aten::masked_fill_", 70, 75)]  # fmt: skip


def test_cpu_claims_fail_on_the_wrong_trace(cpu_evidence):
    # The in-place claim must not hold for the naive trace, and the reverse: the checks can fail.
    # (Both keep two score matrices at the peak: those claims hold on either trace, by design.)
    assert check("inplace", "cpu", cpu_evidence["naive"])["no-clone"]["holds"] is False
    on_inplace = check("naive", "cpu", cpu_evidence["inplace"])
    assert on_inplace["clone-under-masked-fill"]["holds"] is False
    speed = on_inplace["clone-costs-more-than-scale"]  # no clone: nothing to time
    assert speed["holds"] is None and "aten::clone" in speed["observed"]
    copies = on_inplace["copy-row-adds-two-copies"]  # only the scalar copy is left
    assert copies["holds"] is False and copies["observed"] == "aten::copy_ of []; under aten::mul"
    order = on_inplace["ops-follow-the-code"]  # masked_fill_, not masked_fill
    assert order["holds"] is False and "aten::masked_fill_ → aten::softmax" in order["observed"]
    flash = check("sdpa_flash", "cpu", cpu_evidence["sdpa_math"])
    assert not all(r["holds"] for r in flash.values())


def test_the_recompilation_claim_reads_the_compile_number_not_the_frame(cpu_evidence):
    # The frame number counts what this process compiled before (other tests compile the same
    # forward too), so only the number after the slash is the variant's.
    naive = check("compiled_naive", "cpu", cpu_evidence["compiled_naive"])["runs-a-recompilation"]
    assert naive["holds"] is True and "Torch-Compiled Region" in naive["observed"]

    class Seen:  # just the event names a check reads
        def __init__(self, *names):
            self.names = lambda: set(names)

    assert runs_a_recompilation(Seen("Torch-Compiled Region: 3/1")) == (
        True,
        "Torch-Compiled Region: 3/1",
    )
    assert runs_a_recompilation(Seen("Torch-Compiled Region: 3/0"))[0] is False
    assert runs_a_recompilation(Seen("aten::bmm")) == (False, "no Torch-Compiled Region")


def cpu_forwards(*ranges: tuple[float, list[tuple[str, float, float]]]) -> list:
    """Forwards of a made-up CPU trace: per attn_fwd range, its duration and (op, start, end)."""
    events, start = [], 0.0
    for dur, ops in ranges:
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": start, "dur": dur}
        )
        events += [
            {"ph": "X", "cat": "cpu_op", "name": name, "ts": start + a, "dur": b - a}
            for name, a, b in ops
        ]
        start += dur + 100
    return Trace({"traceEvents": events}).forwards()


def test_the_clone_and_scale_comparison_reads_both_ways():
    def naive_like(clone_us: float, mul_us: float) -> Evidence:
        ops = [("aten::mul", 1, 1 + mul_us), ("aten::clone", 300, 300 + clone_us)]
        return Evidence({}, cpu_forwards((1000.0, ops), (1000.0, ops)))

    key = "clone-costs-more-than-scale"
    slow_clone = check("naive", "cpu", naive_like(200.0, 50.0))[key]
    assert slow_clone["holds"] is True
    assert slow_clone["observed"] == "aten::clone 200.0 µs, aten::mul 50.0 µs per forward (4.0×)"
    assert check("naive", "cpu", naive_like(20.0, 50.0))[key]["holds"] is False


def test_gap_claims_find_where_no_op_runs():
    # attn_fwd from 0 to 180 µs; gaps of 20 after masked_fill and 30 at the end, 1-2 elsewhere.
    spans = [("aten::mul", 0, 10), ("aten::matmul", 12, 50), ("aten::masked_fill", 51, 80),
             ("aten::softmax", 100, 130), ("aten::matmul", 131, 150)]  # fmt: skip
    ev = Evidence({}, cpu_forwards((180.0, spans)))
    naive = check("naive", "cpu", ev)["gaps-after-masking-and-at-end"]
    assert naive["holds"] is True
    assert naive["observed"] == (
        "54.0 µs per forward in no op (30% of attn_fwd); longest gaps: "
        "30.0 µs at the end, 20.0 µs after aten::masked_fill, 2.0 µs after aten::mul"
    )
    # In-place claims one long gap: a second one of 20 µs is not "one".
    assert check("inplace", "cpu", ev)["one-gap-at-end"]["holds"] is False
    lone = [*spans[:3], ("aten::softmax", 81, 130), spans[4]]  # no gap after masking
    ev = Evidence({}, cpu_forwards((180.0, lone)))
    assert check("inplace", "cpu", ev)["one-gap-at-end"]["holds"] is True
    assert check("naive", "cpu", ev)["gaps-after-masking-and-at-end"]["holds"] is False


def test_gpu_naive_claim_holds_on_the_fixture():
    ev = evidence(json.loads(FIXTURE.read_text()))
    result = check("naive", "cuda", ev)["gpu-five-kernels-and-a-memcpy"]
    assert result["holds"] is True
    assert "5 kernels" in result["observed"] and "1 DtoD" in result["observed"]


def test_gpu_claims_report_what_they_saw_when_they_fail():
    ev = evidence(json.loads(FIXTURE.read_text()))
    inplace = check("inplace", "cuda", ev)["gpu-five-kernels-no-memcpy"]
    assert inplace["holds"] is False and "1 DtoD" in inplace["observed"]
    (flash,) = check("sdpa_flash", "cuda", ev).values()
    assert flash["holds"] is False and "5 kernel(s)" in flash["observed"]


def renamed(trace: dict, old: str, new: str, cat: str | None = None) -> dict:
    trace = json.loads(json.dumps(trace))
    for e in trace["traceEvents"]:
        if e.get("name") == old:
            e["name"] = new
            if cat:
                e["cat"] = cat
    return trace


def test_dtod_means_dtod():
    """The naive claim names a device-to-device Memcpy: a host-to-device one does not count."""
    trace = renamed(
        json.loads(FIXTURE.read_text()),
        "Memcpy DtoD (Device -> Device)",
        "Memcpy HtoD (Pinned -> Device)",
    )
    result = check("naive", "cuda", evidence(trace))["gpu-five-kernels-and-a-memcpy"]
    assert result["holds"] is False and "HtoD" in result["observed"]


def test_memsets_do_not_count_as_kernels():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [
        {**e, "cat": "gpu_memset", "name": "Memset (Device)"} if e.get("cat") == "gpu_memcpy" else e
        for e in trace["traceEvents"]
    ]
    s = per_forward(trace)
    assert s["kernels_per_forward"] == 5 and s["memset_per_forward"] == 1
    result = check("inplace", "cuda", Evidence(s, forwards(trace)))["gpu-five-kernels-no-memcpy"]
    assert result["holds"] is True  # a cuBLAS-style memset does not break "5 kernels"


@pytest.mark.parametrize(
    ("name", "holds"),
    [
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4> >(Flash_fwd_params)",
            True,
        ),
        (
            "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64> >(Flash_fwd_params)",
            True,
        ),
        ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)", False),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", False),
        ("flash_fwd_kernel", False),  # our own CUDA kernel is not SDPA's
    ],
)
def test_flash_claim_matches_sdpa_flash_kernels_and_no_other(name, holds):
    trace = json.loads(FIXTURE.read_text())
    # One kernel per forward: keep the first kernel each forward launched, renamed.
    first = {f.of_kind("kernel")[0].correlation for f in forwards(trace)}
    trace["traceEvents"] = [
        {**e, "name": name} if e.get("cat") == "kernel" else e
        for e in trace["traceEvents"]
        if e.get("cat") not in ("kernel", "gpu_memcpy") or e["args"]["correlation"] in first
    ]
    fwds = forwards(trace)
    (result,) = check("sdpa_flash", "cuda", Evidence(per_forward(trace), fwds)).values()
    assert result["holds"] is holds, result


def test_cudnn_claim_checks_the_launch_api():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "gpu_memcpy"]
    for e in trace["traceEvents"]:
        if e.get("name") == "cudaLaunchKernel":
            e["name"], e["cat"] = "cuLaunchKernelEx", "cuda_driver"
    (result,) = check("sdpa_cudnn", "cuda", evidence(trace)).values()
    assert not result["holds"]  # five generic kernels, none cudnn_generated
    assert "cuLaunchKernelEx" in result["observed"]


def test_gpu_claims_on_kernel_names():
    copy_kernel = (
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>"
    )
    flash = "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 128>>"
    combine = "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits>"

    def gpu(kernels, memcpy=None):
        summary = {"kernels_per_forward": float(len(kernels)), "kernels": kernels,
                   "memcpy_per_forward": memcpy or {}}  # fmt: skip
        return Evidence(summary, [])

    def gpu_claim(name: str, ev: Evidence) -> tuple:
        (result,) = check(name, "cuda", ev).values()  # each decoding variant has one GPU claim
        return result["holds"], result["observed"]

    repeated = gpu([copy_kernel, copy_kernel, flash, combine])
    in_place = gpu([flash, combine])
    holds, observed = gpu_claim("decode_repeat_kv", repeated)
    assert holds and "2 copy kernel(s) of 4" in observed
    assert gpu_claim("decode_repeat_kv", in_place)[0] is False
    assert gpu_claim("decode_enable_gqa", in_place)[0] is True
    assert gpu_claim("decode_enable_gqa", repeated)[0] is False
    holds, observed = gpu_claim("decode_enable_gqa", gpu([flash], {"DtoD": 1.0}))
    assert holds is False and "DtoD" in observed
    runs_on_cpu = Evidence({"kernels_per_forward": None, "memcpy_per_forward": None}, [])
    assert gpu_claim("decode_enable_gqa", runs_on_cpu)[0] is None


# --- each check on a made-up trace ---------------------------------------------------------------


def test_op_under_and_only_under_read_the_nesting():
    ev = Evidence({}, cpu_forwards((100.0, NESTED)))
    assert op_under("aten::matmul", "aten::bmm")(ev) == (True, "aten::bmm found under aten::matmul")
    assert op_under("aten::transpose", "aten::bmm")(ev) == (
        False,
        "aten::bmm not found under aten::transpose",
    )
    assert only_under("aten::transpose", "aten::as_strided")(ev) == (
        True,
        "under aten::transpose: aten::as_strided",
    )
    assert only_under("aten::matmul")(ev) == (False, "under aten::matmul: aten::bmm")
    assert only_under("aten::masked_fill_")(ev) == (True, "under aten::masked_fill_: nothing")
    assert only_under("aten::clone")(ev) == (False, "no aten::clone")


def test_present_and_absent_name_what_they_saw():
    ev = Evidence({}, cpu_forwards((100.0, NESTED)))
    assert present("aten::bmm", "aten::matmul")(ev) == (True, "seen: aten::bmm, aten::matmul")
    assert present("aten::bmm", "aten::softmax")(ev) == (False, "missing: aten::softmax")
    assert absent("aten::clone", "aten::copy_")(ev) == (True, "none of aten::clone, aten::copy_")
    assert absent("aten::bmm", "aten::clone")(ev) == (False, "seen: aten::bmm")


def test_top_level_ops_are_the_range_s_own_in_order():
    ev = Evidence({}, cpu_forwards((100.0, NESTED)))
    chain = "aten::transpose → aten::matmul → aten::masked_fill_"
    assert top_level_ops("aten::transpose", "aten::matmul", "aten::masked_fill_")(ev) == (
        True,
        chain,
    )
    assert top_level_ops("aten::matmul", "aten::transpose", "aten::masked_fill_")(ev) == (
        False,
        chain,
    )
    assert top_level_ops("aten::mul")(Evidence({}, [])) == (None, "no forward recorded")


def test_ops_per_forward_holds_only_when_every_forward_has_that_many():
    two = [("aten::bmm", 10, 20), ("aten::bmm", 30, 40)]
    ev = Evidence({}, cpu_forwards((100.0, two), (100.0, two[:1])))
    assert ops_per_forward("aten::bmm", 2)(ev) == (False, "1 or 2 aten::bmm per forward")
    ev = Evidence({}, cpu_forwards((100.0, two), (100.0, two)))
    assert ops_per_forward("aten::bmm", 2)(ev) == (True, "2 aten::bmm per forward")
    assert ops_per_forward("aten::clone", 1)(ev) == (False, "0 aten::clone per forward")


def test_generated_kernels_and_compiled_regions_are_found_by_name():
    ev = Evidence({}, cpu_forwards((100.0, [("Torch-Compiled Region: 2/1", 1, 90),
                                            ("graph_0_kernel", 10, 80)])))  # fmt: skip
    assert generated_kernel(FLEX_CPU_KERNEL)(ev) == (True, "graph_0_kernel")
    assert runs_a_recompilation(ev) == (True, "Torch-Compiled Region: 2/1")
    plain = Evidence({}, cpu_forwards((100.0, NESTED)))
    assert generated_kernel(FLEX_CPU_KERNEL)(plain) == (
        False,
        r"no event matching ^graph_\d+_kernel$",
    )


def test_costs_more_cannot_tell_without_both_ops():
    ev = Evidence({}, cpu_forwards((100.0, [("aten::mul", 10, 20)])))
    assert costs_more("aten::clone", "aten::mul")(ev) == (None, "not in the trace: aten::clone")


def test_gaps_are_keyed_by_the_op_before_them():
    (forward,) = cpu_forwards((100.0, [("aten::mul", 10, 20), ("aten::matmul", 25, 60)]))
    assert gaps(forward) == {"after the start": 10.0, "after aten::mul": 5.0, END: 40.0}
    assert longest_gaps(END)(Evidence({}, [])) == (None, "no forward recorded")


def test_device_checks_read_the_kernels_and_memcpys_a_forward_launched():
    ev = gpu_forward()
    assert kernel_count(2)(ev) == (True, "2 kernels per forward")
    assert kernel_count(3)(ev) == (False, "2 kernels per forward")
    assert kernel_count(1, at_least=True)(ev) == (True, "2 kernels per forward")
    assert one_kernel_matching(FLASH_KERNEL)(ev) == (False, f"2 kernel(s) per forward; {FLASH}")
    assert kernel_matching(FLASH_KERNEL)(ev) == (True, FLASH)
    assert kernel_matching(TRIL_KERNEL)(ev) == (False, "no kernel matching tril")
    assert memcpys("DtoD", 1)(ev) == (True, "1 DtoD per forward")
    assert memcpys("HtoD", 0)(ev) == (False, "1 DtoD per forward")  # no other memcpy either
    assert launched_with("cudaLaunchKernel")(ev) == (True, "launch APIs: cudaLaunchKernel")
    assert launched_with("cuLaunchKernelEx")(ev) == (False, "launch APIs: cudaLaunchKernel")
    assert copy_kernels(1)(ev) == (True, f"1 copy kernel(s) of 2 per forward: {COPY}")
    assert copy_kernels(0)(ev)[0] is False


def test_device_checks_cannot_tell_on_a_cpu_run():
    cpu = Evidence({"kernels_per_forward": None, "memcpy_per_forward": None}, [])
    for c in (kernel_count(1), one_kernel_matching(FLASH_KERNEL), kernel_matching(FLASH_KERNEL),
              memcpys("DtoD", 0), launched_with("cudaLaunchKernel"), copy_kernels(0)):  # fmt: skip
        assert c(cpu) == (None, "no device activity recorded")


def test_first_call_checks_need_the_first_calls_timed():
    timed = Evidence({"cpu_time_us": 100.0, "first_calls_seconds": {"first": 0.01}}, [])
    assert compile_costs_forwards(10)(timed) == (True, "first call 0.01 s = 100 profiled forwards")
    assert compile_costs_forwards(1000)(timed)[0] is False
    untimed = Evidence({"cpu_time_us": 100.0}, [])
    assert compile_costs_forwards(10)(untimed) == (
        None,
        "the first call was not timed (a run of the example times it)",
    )
    calls = {"first": 2.0, "second": 0.1}
    assert second_call_cheaper(10)(Evidence({"first_calls_seconds": calls}, [])) == (
        True,
        "first call 2.00 s, second 0.100 s",
    )
    assert second_call_cheaper(100)(Evidence({"first_calls_seconds": calls}, []))[0] is False
    assert second_call_cheaper(10)(untimed)[0] is None


def test_the_cold_first_call_is_compared_with_the_warm_one_where_a_set_measured_it():
    warm = {"first": 2.0, "second": 0.1}
    both = Evidence({"first_calls_seconds": warm, "cold_first_calls_seconds": {"first": 9.0}}, [])
    assert cold_call_costs_more(2)(both) == (True, "first call cold 9.00 s, warm 2.00 s: 4.5×")
    assert cold_call_costs_more(5)(both)[0] is False
    older = Evidence({"first_calls_seconds": warm}, [])  # a set made before the cold run
    assert cold_call_costs_more(2)(older) == (None, "cold first call: not measured in this set")


def test_a_later_compile_is_compared_with_the_runs_cold_start():
    """Profiled after another compiled variant: its first call on the caches that one left."""
    after = {"variants": ["compiled_naive"], "cold_start_variant": "compiled_naive",
             "cold_start_seconds": 9.0}  # fmt: skip
    later = Evidence({"first_calls_seconds": {"first": 3.0}, "first_calls_after": after}, [])
    assert cold_call_costs_more(2, later=2)(later) == (
        True, "cold start (compiled_naive) 9.00 s, this first call on the caches it left 3.00 s: 3.0×"
    )  # fmt: skip
    assert cold_call_costs_more(2, later=4)(later)[0] is False
    unmeasured = {**after, "cold_start_variant": None, "cold_start_seconds": None}  # it failed
    none = Evidence({"first_calls_seconds": {"first": 3.0}, "first_calls_after": unmeasured}, [])
    assert cold_call_costs_more(2)(none)[0] is None


def test_in_backward_checks_the_backward_ranges():
    step = evidence({"traceEvents": [
        host("user_annotation", "attn_fwd", 0, 100), host("cpu_op", "aten::mul", 10, 10),
        host("user_annotation", "attn_bwd", 200, 100),
        host("cpu_op", "MaskedFillBackward0", 210, 30), host("cpu_op", "aten::clone", 215, 10),
    ]})  # fmt: skip
    assert in_backward(present("MaskedFillBackward0"))(step) == (True, "seen: MaskedFillBackward0")
    assert in_backward(op_under("MaskedFillBackward0", "aten::clone"))(step)[0] is True
    assert present("MaskedFillBackward0")(step)[0] is False  # not in the forward
    forward_only = Evidence({}, cpu_forwards((100.0, NESTED)))
    assert in_backward(present("aten::bmm"))(forward_only) == (
        None,
        "no backward recorded (no attn_bwd range)",
    )


def test_backward_over_forward_prefers_device_time():
    cpu = {"cpu_time_us": 100.0, "backward": {"cpu_time_us": 250.0, "device_time_us": None}}
    assert backward_over_forward(2)(Evidence(cpu, [])) == (
        True,
        "CPU time per step: backward 250.0 µs, forward 100.0 µs (2.5×; no spread in this set)",
    )
    assert backward_over_forward(3)(Evidence(cpu, []))[0] is False
    gpu = {**cpu, "device_time_us": 10.0, "backward": {"device_time_us": 15.0}}
    assert backward_over_forward(2)(Evidence(gpu, [])) == (
        False,
        "device time per step: backward 15.0 µs, forward 10.0 µs (1.5×; no spread in this set)",
    )


def test_backward_over_forward_reads_the_spread_of_the_profiled_steps():
    def step(forwards, backwards):
        ranges = lambda times: [{"cpu_time_us": t} for t in times]  # noqa: E731
        back = {"cpu_time_us": sum(backwards) / 3, "device_time_us": None}
        return {"cpu_time_us": sum(forwards) / 3, "ranges": ranges(forwards),
                "backward": {**back, "ranges": ranges(backwards)}}  # fmt: skip

    # Forwards of 9, 10 and 14 ms allow a backward of 300 to 330 ms anything from 21.4× to 36.7×.
    wide = Evidence(step((9000.0, 10000.0, 14000.0), (300000.0, 330000.0, 315000.0)), [])
    assert backward_over_forward(5)(wide) == (
        True,
        "CPU time per step: backward 315.00 ms (300.00 ms–330.00 ms), forward 11.00 ms "
        "(9.00 ms–14.00 ms); backward ÷ forward 28.64× (21.43–36.67×), the least and most the "
        "times of the 3 profiled steps allow",
    )
    assert backward_over_forward(30)(wide)[0] is None  # 28.6× on the means, but 36.7× allowed
    assert backward_over_forward(40)(wide)[0] is False
    assert backward_over_forward(2)(Evidence({"cpu_time_us": 100.0}, [])) == (
        None,
        "no backward recorded (no attn_bwd range)",
    )
