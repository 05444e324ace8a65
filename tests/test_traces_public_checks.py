"""Checks on someone else's GPU trace and on what diagnose found in it, on a made-up trace of one
attention call (SDPA's op chain, its flash kernel) beside a GEMM and a generated Triton kernel."""

from types import SimpleNamespace

from attn.traces.claims.public_checks import (
    PublicEvidence,
    attention_share,
    diagnosed,
    each_op_launches,
    kernels_launched_under,
    kinds_apart,
    longest_kernel,
    op_chain,
    reported_on_every_call,
)
from attn.traces.read.patterns import (
    FLASH_KERNEL,
    INDUCTOR_TRITON,
    MEMCPY_DTOD,
    SDPA_BACKEND_OP,
    exactly,
)
from attn.traces.read.trace import Trace

FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Flash_fwd_params)"
SDPA = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
        "aten::_flash_attention_forward")  # fmt: skip


def host(name: str, ts: float, dur: float, cat: str = "cpu_op", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def launch(ts: float, correlation: int) -> dict:
    return host("cudaLaunchKernel", ts, 1, "cuda_runtime", correlation=correlation)


def kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": correlation}}  # fmt: skip


def made_up(diagnosis: dict | None = None) -> PublicEvidence:
    """SDPA's chain launching a 60 µs flash kernel, an aten::mm its 20 µs GEMM, and Inductor's
    (its name on the CPU side too) a 20 µs Triton kernel; the attention call is the flash kernel."""
    trace = Trace({"traceEvents": [
        host(SDPA[0], 0, 50), host(SDPA[1], 1, 45), host(SDPA[2], 2, 40), launch(3, 1),
        host("aten::mm", 60, 20, **{"Input Dims": [[4, 8], [8, 4]]}), launch(61, 2),
        host("triton_poi_fused_0", 90, 5), launch(91, 3),
        kernel(FLASH, 100, 60, 1), kernel("sm90_gemm_bf16", 170, 20, 2),
        kernel("triton_poi_fused_0", 200, 20, 3),
    ]})  # fmt: skip
    call = SimpleNamespace(device_rows=[trace.name.index(FLASH)])
    return PublicEvidence(diagnosis or {}, [call], trace)


def row(where: str, **more) -> dict:
    """One row of diagnose's attention table."""
    return {"implementation": "sdpa_flash", "compiled": False, "where": where, "calls": 2,
            "kernels_per_call": 1, **more}  # fmt: skip


def test_diagnosed_holds_when_every_row_is_that_implementation_there():
    ev = made_up({"attention": [row("BertSdpaSelfAttention")]})
    assert diagnosed("sdpa_flash", where="Bert")(ev) == (
        True,
        "sdpa_flash in BertSdpaSelfAttention: 2 call(s), 1 kernel(s) per call",
    )
    assert diagnosed("sdpa_flash", where="Bert", kernels_per_call=1)(ev)[0] is True
    assert diagnosed("sdpa_flash", where="Bert", kernels_per_call=2)(ev)[0] is False
    assert diagnosed("sdpa_flash", where="Bert", compiled=True)(ev)[0] is False
    assert diagnosed("eager", where="Bert")(ev)[0] is False
    assert diagnosed("sdpa_flash", where="Llama")(ev)[0] is False
    mixed = made_up({"attention": [row("Bert"), row("Bert", implementation="eager")]})
    assert diagnosed("sdpa_flash", where="Bert")(mixed)[0] is False  # every row, not one
    assert diagnosed("sdpa_flash", where="Bert")(made_up({"attention": []})) == (
        False,
        "no attention found",
    )


def test_op_chain_follows_the_parents_innermost_last():
    ev = made_up()
    assert op_chain(*SDPA)(ev) == (True, " → ".join(SDPA))
    assert op_chain(SDPA[0], SDPA[2])(ev) == (  # a parent skipped: not directly under
        False,
        f"no {SDPA[2]} directly under {SDPA[0]}",
    )
    assert op_chain("aten::mm", SDPA[2])(ev)[0] is False


def test_the_longest_kernel_of_the_busiest_call_is_named():
    ev = made_up()
    assert longest_kernel(FLASH_KERNEL)(ev) == (
        True,
        f"{FLASH[:70]}: 60.0 µs of the call's 60.0 µs",
    )
    assert longest_kernel(r"(?i)softmax")(ev)[0] is False
    idle = PublicEvidence({}, [SimpleNamespace(device_rows=[])], ev.trace)
    assert longest_kernel(FLASH_KERNEL)(idle) == (None, "no device work recorded for the attention")


def test_attention_share_is_its_kernels_over_all_kernels():
    ev = made_up()
    assert attention_share(0.5, 1.0)(ev) == (True, "60.0 µs of 100.0 µs of kernel time (60%)")
    assert attention_share(0.0, 0.5)(ev)[0] is False


def test_every_kernel_must_be_launched_under_an_op_that_matches():
    ev = made_up()
    assert kernels_launched_under(SDPA_BACKEND_OP, exactly("aten::mm"))(ev) == (
        False,
        "1 of 3 kernels elsewhere, e.g. triton_poi_fused_0",
    )
    everything = kernels_launched_under(SDPA_BACKEND_OP, exactly("aten::mm"), INDUCTOR_TRITON)
    assert everything(ev) == (True, "all 3 kernels")


def test_each_op_must_launch_the_device_work_named():
    ev = made_up()
    assert each_op_launches("aten::mm", r"gemm")(ev) == (
        True,
        "1 of 1 aten::mm (first input [4, 8]) launched sm90_gemm_bf16: 20.0 µs–20.0 µs each",
    )
    assert each_op_launches("aten::mm", MEMCPY_DTOD)(ev) == (
        False,
        "0 of 1 aten::mm (first input [4, 8]) launched ^Memcpy DtoD: none each",
    )
    assert each_op_launches("aten::masked_fill", MEMCPY_DTOD)(ev) == (False, "no aten::masked_fill")


def test_kinds_apart_needs_two_kinds_and_one_that_dominates():
    def kind(shapes: str, share: float | None) -> dict:
        return row("Timesformer", shapes=shapes, device_time_us_per_call=50.0,
                   share_of_device_time=share)  # fmt: skip

    ev = made_up({"attention": [kind("[8, 1568, 64]", 0.6), kind("[1568, 8, 64]", 0.1)]})
    assert kinds_apart("Timesformer", 0.5)(ev) == (
        True,
        "[8, 1568, 64]: 2 call(s), 50.0 µs each, 60%; [1568, 8, 64]: 2 call(s), 50.0 µs each, 10%",
    )
    assert kinds_apart("Timesformer", 0.7)(ev)[0] is False
    one = made_up({"attention": [kind("[8, 1568, 64]", 0.6)]})
    assert kinds_apart("Timesformer", 0.5)(one)[0] is False
    untimed = made_up({"attention": [kind("[8, 1568, 64]", None)]})
    assert kinds_apart("Timesformer", 0.5)(untimed) == (
        False,
        "no device time for the calls in Timesformer",
    )


def test_a_finding_reported_on_every_forward_call():
    calls = [row("A", calls=3, **{"pass": "forward"}), row("A", calls=3, **{"pass": "backward"})]

    def found(count: int) -> PublicEvidence:
        return made_up({"attention": calls, "findings": [{"kind": "copy", "count": count}]})

    check = reported_on_every_call("copy")
    assert check(found(3)) == (True, "copy: 3 for 3 forward call(s)")
    assert check(found(6))[0] is False  # the backward's calls do not count
    assert reported_on_every_call("other")(found(3)) == (False, "other: 0 for 3 forward call(s)")
    nothing = made_up({"attention": [], "findings": []})
    assert check(nothing) == (False, "copy: 0 for 0 forward call(s)")
