"""attn/inductor.py: the checks the compiled and Flex variants share, and say the same way."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn.compiled import CompiledAttention
from attn.flex import FlexAttention, flex_problem
from attn.inductor import inductor_problem
from attn.naive import NaiveAttention

ROOT = Path(__file__).resolve().parents[1]


def test_no_cpu_compiler_is_named_by_both_variants(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler++")
    reason = inductor_problem("cpu")
    assert reason is not None and "'no-such-compiler++' is not on PATH" in reason
    assert CompiledAttention(NaiveAttention()).why_unavailable("cpu") == reason
    if flex_problem("cpu") is not None and "AVX2" in flex_problem("cpu"):
        pytest.skip("this CPU refuses compiled Flex before the compiler is asked for")
    assert FlexAttention().why_unavailable("cpu") == reason


def test_a_present_compiler_is_no_problem(monkeypatch):
    monkeypatch.setenv("CXX", "python3")  # any program on PATH passes the check
    assert inductor_problem("cpu") is None


def test_other_devices_are_refused_by_name():
    assert (
        inductor_problem("meta") == "the compiled variants are written for CPU and CUDA, not meta"
    )
    assert (
        flex_problem("meta") == "the FlexAttention variants are written for CPU and CUDA, not meta"
    )


COMPILE_TINY = """
import torch, attn
q = torch.randn(1, 2, 16, 8)
print(attn.get_variant("compiled_naive").forward(q, q, q, is_causal=True).shape)
"""


def test_a_home_folder_with_a_space_compiles(tmp_path):
    """/home/Jane Doe-Smith broke every compiled and Flex variant under nox: the compiler command
    Inductor builds from its cache path (set under the user's cache, as nox sets it) was split
    at the space."""
    home = tmp_path / "Jane Doe-Smith"
    env = {
        **os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(home / ".cache/attention-profiled/inductor"),
        "PYTHONPATH": str(ROOT),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", COMPILE_TINY], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "torch.Size([1, 2, 16, 8])"


def test_recompile_budget_on_a_torch_without_its_arguments(monkeypatch):
    """Torch 2.11's torch.compile has no isolate_recompiles: the budget becomes the process-wide
    limit instead of an argument it would refuse (as it did on a GPU machine's torch 2.11)."""
    import torch

    from attn import inductor

    assert inductor.recompile_budget() == {
        "isolate_recompiles": True,
        "recompile_limit": inductor.RECOMPILE_LIMIT,
    }

    def older_compile(model=None, *, fullgraph=False, dynamic=None, options=None):
        return model

    monkeypatch.setattr(torch, "compile", older_compile)
    # torch's own patch, not monkeypatch: its config module restores only what it patched.
    with torch._dynamo.config.patch(recompile_limit=8):
        assert inductor.recompile_budget() == {}
        assert torch._dynamo.config.recompile_limit == inductor.RECOMPILE_LIMIT
