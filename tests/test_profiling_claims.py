"""Claims are checked against real CPU traces and the CUDA-shaped fixture; a false claim is a finding."""

import json
from pathlib import Path

import pytest

import attn
from attn.profiling import ProfileConfig
from attn.profiling.capture import capture
from attn.profiling.claims import CLAIMS, Evidence, claims_for, evaluate
from attn.profiling.trace import forwards, per_forward

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)


def evidence(trace):
    return Evidence(per_forward(trace), forwards(trace))


@pytest.fixture(scope="module")
def cpu_evidence():
    found = {}
    for v in attn.variants():
        if v.why_unavailable("cpu") is None and claims_for(v.name, "cpu"):
            found[v.name] = evidence(capture(v, TINY)[0])
    return found


def test_every_variant_has_claims():
    assert set(CLAIMS) == {v.name for v in attn.variants()}


def test_every_cpu_claim_holds_on_a_fresh_tiny_run(cpu_evidence):
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(cpu_evidence)
    for name, ev in cpu_evidence.items():
        for result in evaluate(name, "cpu", ev):
            assert result["holds"] is True, (name, result)
            assert result["observed"]


def test_cpu_claims_fail_on_the_wrong_trace(cpu_evidence):
    # The in-place claim must not hold for the naive trace, and the reverse: the checks can fail.
    assert not any(r["holds"] for r in evaluate("inplace", "cpu", cpu_evidence["naive"]))
    assert not any(r["holds"] for r in evaluate("naive", "cpu", cpu_evidence["inplace"]))
    assert not all(r["holds"] for r in evaluate("sdpa_flash", "cpu", cpu_evidence["sdpa_math"]))


def test_gpu_naive_claim_holds_on_the_fixture():
    ev = evidence(json.loads(FIXTURE.read_text()))
    (result,) = evaluate("naive", "cuda", ev)
    assert result["holds"] is True
    assert "5 kernels" in result["observed"] and "1 DtoD" in result["observed"]


def test_gpu_claims_report_what_they_saw_when_they_fail():
    ev = evidence(json.loads(FIXTURE.read_text()))
    (inplace,) = evaluate("inplace", "cuda", ev)
    assert inplace["holds"] is False and "1 DtoD" in inplace["observed"]
    (flash,) = evaluate("sdpa_flash", "cuda", ev)
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
    (result,) = evaluate("naive", "cuda", evidence(trace))
    assert result["holds"] is False and "HtoD" in result["observed"]


def test_memsets_do_not_count_as_kernels():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [
        {**e, "cat": "gpu_memset", "name": "Memset (Device)"} if e.get("cat") == "gpu_memcpy" else e
        for e in trace["traceEvents"]
    ]
    s = per_forward(trace)
    assert s["kernels_per_forward"] == 5 and s["memset_per_forward"] == 1
    (result,) = evaluate("inplace", "cuda", Evidence(s, forwards(trace)))
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
    (result,) = evaluate("sdpa_flash", "cuda", Evidence(per_forward(trace), fwds))
    assert result["holds"] is holds, result


def test_a_claim_that_needs_shapes_says_they_were_not_recorded(cpu_evidence):
    """Recorded without record_shapes, the in-place claim cannot tell a scalar copy from a big one."""
    for f in cpu_evidence["inplace"].forwards:
        for e in f.cpu_events:
            e.args.pop("Input Dims", None)
    (result,) = evaluate("inplace", "cpu", cpu_evidence["inplace"])
    assert result["holds"] is None and "not recorded" in result["observed"]


def test_cudnn_claim_checks_the_launch_api():
    trace = json.loads(FIXTURE.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "gpu_memcpy"]
    for e in trace["traceEvents"]:
        if e.get("name") == "cudaLaunchKernel":
            e["name"], e["cat"] = "cuLaunchKernelEx", "cuda_driver"
    (result,) = evaluate("sdpa_cudnn", "cuda", evidence(trace))
    assert not result["holds"]  # five generic kernels, none cudnn_generated
    assert "cuLaunchKernelEx" in result["observed"]


def test_claims_are_only_about_their_device_type():
    assert all(c.device_type == "cpu" for c in claims_for("naive", "cpu"))
    assert evaluate("sdpa_efficient", "cpu", Evidence({}, [])) == []


def test_committed_cpu_profiles_carry_claims_that_hold():
    folder = Path(__file__).resolve().parents[1] / "profiles" / "cpu"
    if not folder.is_dir():
        pytest.skip("no profiles/cpu/ in this checkout")
    checked = {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if summary["available"]:
            checked[summary["variant"]] = summary["claims"]
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(checked)
    for name, claims in checked.items():
        assert [c["text"] for c in claims] == [c.text for c in claims_for(name, "cpu")], name
        assert all(c["holds"] is True and c["observed"] for c in claims), (name, claims)


def test_committed_summaries_carry_the_claims_their_traces_give():
    """What `python -m attn.profiling recheck --check` checks: a new or changed claim must be
    re-evaluated on every committed set (and committed) before it lands."""
    from attn.profiling.analyze import recheck

    root = Path(__file__).resolve().parents[1] / "profiles"
    if not root.is_dir():
        pytest.skip("no profiles/ in this checkout")
    stale = recheck(root, write=False)
    assert stale == [], f"run: python -m attn.profiling recheck profiles ({stale[0]['path']})"
