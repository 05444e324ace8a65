"""The traces recorded by others that the chapters show: their committed artifacts are current,
their claims hold, and what a reader sees of them (source, license, GPU) comes from SOURCE.txt."""

import json
from pathlib import Path

import pytest

from attn import specs
from attn.profiling import public
from attn.traces.common import artifacts

ROOT = Path(__file__).resolve().parents[1]

PUBLISHED = ROOT / "profiles" / artifacts.PUBLIC_DIR


@pytest.mark.parametrize("trace", specs.PUBLIC, ids=lambda p: p.folder)
def test_committed_artifacts_are_what_the_trace_gives_now(trace):
    """Regenerate with `python -m attn.profiling.public` when this fails."""
    folder = PUBLISHED / trace.folder
    committed = json.loads((folder / artifacts.DIAGNOSIS).read_text())
    assert committed.pop("viewer")["mark"]  # where the screenshot boxed the selected kernel
    assert committed == json.loads(json.dumps(public.diagnosis(trace)))
    assert (folder / artifacts.VIEWER).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("trace", specs.PUBLIC, ids=lambda p: p.folder)
def test_every_claim_on_a_public_trace_holds(trace):
    claims = public.diagnosis(trace)["claims"]
    assert [c["key"] for c in claims] == [c.key for c in trace.claims]
    assert all(c["holds"] is True for c in claims), claims


def test_the_source_a_reader_sees_is_read_from_source_txt():
    facts = public.source("tracelens-mi300x-sglang-decode-graph")
    assert facts == {
        "repository": "https://github.com/AMD-AGI/TraceLens",
        "path": "tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
        "license": "MIT",
        "GPU": "AMD Instinct MI300X",
        "torch": "not recorded in the trace",
        "commit": "171dd74721ca1ec45709e5805b68ae1f65e27811",
    }


def test_the_screenshot_aims_at_one_call_and_a_kernel_of_it():
    shot = public.diagnosis(specs.public("tracelens-h100-timesformer-eager-softmax"))["screenshot"]
    assert "SoftMax" in shot["select"] and shot["where"] == "nn.Module: TimesformerSelfAttention"
    assert 0 < shot["to_us"] - shot["from_us"] < 20_000  # one call's kernels, not the step
