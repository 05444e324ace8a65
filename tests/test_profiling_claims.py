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
            found[v.name] = evidence(capture(v, TINY)[1])
    return found


def test_every_variant_has_claims():
    assert set(CLAIMS) == {v.name for v in attn.variants()}


def test_every_cpu_claim_holds_on_a_fresh_tiny_run(cpu_evidence):
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash", "custom_cpu"} <= set(cpu_evidence)
    for name, ev in cpu_evidence.items():
        for result in evaluate(name, "cpu", ev):
            assert result["holds"], (name, result)
            assert result["observed"]


def test_cpu_claims_fail_on_the_wrong_trace(cpu_evidence):
    # The in-place claim must not hold for the naive trace, and the reverse: the checks can fail.
    assert not any(r["holds"] for r in evaluate("inplace", "cpu", cpu_evidence["naive"]))
    assert not any(r["holds"] for r in evaluate("naive", "cpu", cpu_evidence["inplace"]))
    assert not all(r["holds"] for r in evaluate("sdpa_flash", "cpu", cpu_evidence["sdpa_math"]))


def test_gpu_naive_claim_holds_on_the_fixture():
    ev = evidence(json.loads(FIXTURE.read_text()))
    (result,) = evaluate("naive", "cuda", ev)
    assert result["holds"]
    assert "6 kernels" in result["observed"] and "Memcpy DtoD" in result["observed"]


def test_gpu_claims_report_what_they_saw_when_they_fail():
    ev = evidence(json.loads(FIXTURE.read_text()))
    (inplace,) = evaluate("inplace", "cuda", ev)
    assert not inplace["holds"] and "6 kernels" in inplace["observed"]
    (flash,) = evaluate("sdpa_flash", "cuda", ev)
    assert not flash["holds"] and "6 kernel(s)" in flash["observed"]


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
        assert all(c["holds"] and c["observed"] for c in claims), (name, claims)
