"""attn/inductor.py: the checks the compiled and Flex variants share, and say the same way."""

import pytest

from attn.compiled import CompiledAttention
from attn.flex import FlexAttention, flex_problem
from attn.inductor import inductor_problem
from attn.naive import NaiveAttention


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
