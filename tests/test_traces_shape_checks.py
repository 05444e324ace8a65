"""The decoding claims: they hold on fresh CPU runs (ours and the example's), fail on the wrong
trace, and the GPU ones read kernel names the way a GPU trace spells them."""

import subprocess
import sys
from pathlib import Path

import pytest

import attn
from attn import specs
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.trace import forwards, load_trace, per_forward
from attn.traces.trace_checks import Evidence

ROOT = Path(__file__).resolve().parents[1]
EQUAL_HEADS = ProfileConfig(
    batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32
)  # as the shared tests
DECODE = specs.in_sweep("decoding")
GQA_STEP = ProfileConfig(batch=2, heads=8, kv_heads=2, seq_q=1, seq_k=256, head_dim=32,
                        is_causal=False)  # fmt: skip


def evidence(trace):
    return Evidence(per_forward(trace), forwards(trace))


def check(name, device_type, ev):
    claims = specs.spec(name).trace_claims
    return [(c.text, *c.check(ev)) for c in claims if c.device_type == device_type]


@pytest.fixture(scope="module")
def runs():
    return {
        (name, config): evidence(capture(attn.get_variant(name), config)[0])
        for name in DECODE
        for config in (EQUAL_HEADS, GQA_STEP)
    }


def test_decode_variants_have_claims_about_both_devices():
    assert DECODE == ["decode_repeat_kv", "decode_enable_gqa"]
    for name in DECODE:
        assert specs.spec(name).inputs == "decode"
        assert {c.device_type for c in specs.spec(name).claims} == {"cpu", "cuda"}


@pytest.mark.parametrize("config", [EQUAL_HEADS, GQA_STEP], ids=["equal_heads", "gqa_step"])
@pytest.mark.parametrize("name", DECODE)
def test_every_cpu_claim_holds_on_its_own_run(runs, name, config):
    for text, holds, observed in check(name, "cpu", runs[(name, config)]):
        assert holds is True, (text, observed)
        assert observed


def test_the_repeat_copy_is_group_times_the_cache(runs):
    (_, holds, observed), *_ = check(
        "decode_repeat_kv", "cpu", runs[("decode_repeat_kv", GQA_STEP)]
    )
    assert holds and "[2, 2, 4, 256, 32]" in observed and "4x" in observed


def test_claims_fail_on_the_other_run(runs):
    repeat = runs[("decode_repeat_kv", GQA_STEP)]
    gqa = runs[("decode_enable_gqa", GQA_STEP)]
    no_copy, _ = check("decode_enable_gqa", "cpu", repeat)
    assert no_copy[1] is False and "aten::repeat_interleave" in no_copy[2]
    copies, peak, _ = check("decode_repeat_kv", "cpu", gqa)
    assert copies[1] is False and "0 aten::repeat_interleave" in copies[2]
    assert peak[1] is None  # nothing to size: cannot tell, not a pass


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

    repeated = gpu([copy_kernel, copy_kernel, flash, combine])
    in_place = gpu([flash, combine])
    ((_, holds, observed),) = check("decode_repeat_kv", "cuda", repeated)
    assert holds and "2 copy kernel(s) of 4" in observed
    ((_, holds, _),) = check("decode_repeat_kv", "cuda", in_place)
    assert holds is False
    ((_, holds, _),) = check("decode_enable_gqa", "cuda", in_place)
    assert holds is True
    ((_, holds, _),) = check("decode_enable_gqa", "cuda", repeated)
    assert holds is False
    ((_, holds, observed),) = check("decode_enable_gqa", "cuda", gpu([flash], {"DtoD": 1.0}))
    assert holds is False and "DtoD" in observed
    ((_, holds, _),) = check("decode_enable_gqa", "cuda", runs_on_cpu())
    assert holds is None


def runs_on_cpu():
    return Evidence({"kernels_per_forward": None, "memcpy_per_forward": None}, [])


@pytest.mark.parametrize("gqa", ["repeat", "enable_gqa"])
def test_example_writes_a_trace_the_claims_hold_on(tmp_path, gqa):
    name = {"repeat": "decode_repeat_kv", "enable_gqa": "decode_enable_gqa"}[gqa]
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "decode_attention.py"), "--gqa", gqa,
         "--device", "cpu", "--batch", "1", "--heads", "8", "--kv-heads", "2",
         "--cache-len", "128", "--head-dim", "32", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "attn_fwd" in run.stdout and "Self CPU" in run.stdout
    trace = load_trace(tmp_path / name / "trace.json.gz")
    assert (tmp_path / name / "table.txt").read_text().strip()
    for text, holds, observed in check(name, "cpu", evidence(trace)):
        assert holds is True, (text, observed)


def test_example_refuses_heads_that_do_not_group(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "decode_attention.py"), "--gqa", "repeat",
         "--device", "cpu", "--heads", "6", "--kv-heads", "4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 2 and "--kv-heads" in run.stderr
