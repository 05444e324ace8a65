"""The specs (attn/specs/) and the registry built from them: one place per variant's facts."""

import ast
import inspect
import re
import runpy
import sys
from pathlib import Path

import pytest
import torch

import attn
from attn import specs
from attn.traces.common import artifacts

ROOT = Path(__file__).resolve().parents[1]
NAV_PAGES = set(
    re.findall(r":\s*([\w/.-]+\.(?:md|ipynb))\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
)


def test_variants_come_in_the_specs_order():
    assert [v.name for v in attn.variants()] == specs.names()
    assert specs.names()[:2] == [specs.REFERENCE, "inplace"]  # the chapters' order


def test_get_variant_returns_the_named_variant_with_its_specs_facts():
    for spec in specs.SPECS:
        variant = attn.get_variant(spec.name)
        assert variant is attn.get_variant(spec.name)
        assert (variant.name, variant.title, variant.lesson) == (spec.name, spec.title, spec.lesson)


def test_unknown_variant_lists_valid_names():
    with pytest.raises(KeyError) as err:
        attn.get_variant("flash2")
    message = str(err.value)
    assert "flash2" in message and all(name in message for name in specs.names())


def test_every_variant_answers_for_cpu():
    for v in attn.variants():
        reason = v.why_unavailable("cpu")
        assert reason is None or (isinstance(reason, str) and len(reason) > 10)


@pytest.mark.parametrize("spec", specs.SPECS, ids=lambda s: s.name)
def test_a_spec_points_at_what_exists(spec):
    assert spec.title and spec.lesson and spec.claims
    assert spec.chapter in NAV_PAGES, f"{spec.chapter} is not in mkdocs.yml's nav"
    page = (ROOT / "docs" / spec.chapter).read_text()
    assert f"<!-- profile: {spec.name} -->" in page, f"{spec.chapter} shows no profile of it"
    for path in (spec.example[0], *spec.sources):
        assert (ROOT / path).is_file(), path
    for pattern in (spec.focus, spec.gpu_focus):
        assert pattern is None or re.compile(pattern)
    assert set(spec.diff_with) <= set(specs.names())
    assert set(spec.sweeps) <= {"scaling", "benchmark", "decoding", "training"}
    assert spec.inputs in ("square", "decode")
    # The example that writes its first calls' times is the one run cold before it is profiled.
    assert spec.times_first_calls == ("compile.json" in (ROOT / spec.example[0]).read_text())


def test_benchmark_baseline_and_reference_are_variants():
    assert specs.BENCHMARK_BASELINE in specs.in_sweep("benchmark")
    assert specs.spec(specs.REFERENCE) is not None
    assert all(s.name in specs.in_sweep("benchmark") for s in specs.SPECS if s.ratio)


def _strings(path: Path) -> list[str]:
    """The string constants of a Python file, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and ast.get_docstring(node, clean=False) is not None
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and "%(prog)s" not in node.value  # a --help example names variants as a reader types them
    ]


@pytest.mark.parametrize("name", specs.names())
def test_a_variant_is_named_in_its_module_and_its_spec_only(name):
    """No other code keeps a list of variants: each reads the specs. (A page's file name is not a
    variant's: a diagnose finding names inplace.md, the page that teaches its fix.)"""
    code = [
        *(ROOT / "attn").rglob("*.py"),
        *(ROOT / "docs/hooks").glob("*.py"),
        ROOT / "noxfile.py",
    ]
    word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-]|\.md\b)")
    found = {p for p in code if any(word.search(s) for s in _strings(p))}
    allowed = {
        *(ROOT / "attn/specs").glob("*.py"),
        Path(inspect.getsourcefile(type(attn.get_variant(name)))),
    }
    assert found <= allowed, sorted(str(p.relative_to(ROOT)) for p in found - allowed)


def _nox_modules() -> list[str]:
    """Every module a nox session runs with `python -m`."""
    return sorted(
        {s for s in _strings(ROOT / "noxfile.py") if re.fullmatch(r"attn(\.\w+)+|attn", s)}
    )


# Run here as nox runs it in a fresh process; other tests imported it already, which runpy warns of.
@pytest.mark.filterwarnings("ignore:'attn.*' found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("module", _nox_modules())
def test_every_module_a_nox_session_runs_answers_help(module, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out


def test_profile_examples_runs_the_examples_and_every_figure_s_sweep():
    """One session makes a whole set: its examples, then (in attn.profiling.every_sweep) every
    figure a set can show, the benchmark of the custom kernels among them, so a GPU owner gets
    them against SDPA there."""
    from attn.profiling import every_sweep

    tree = ast.parse((ROOT / "noxfile.py").read_text())
    (session,) = [n for n in ast.walk(tree) if getattr(n, "name", None) == "profile_examples"]
    runs = {n.value for n in ast.walk(session) if isinstance(n, ast.Constant)}
    assert {"attn.profiling", "attn.profiling.every_sweep"} <= runs
    assert set(artifacts.FIGURES) <= set(every_sweep.STEPS)


def test_a_backend_refused_in_every_dtype_says_so():
    """The reason said "no CPU kernel for float32" where bfloat16 was refused as well: it names
    every dtype probed, and says where one of them runs."""
    from attn.registry import _refused, _sdpa_probe

    refused_all = [b for b in ("efficient", "cudnn") if _sdpa_probe(b, "cpu", torch.float32)]
    for backend in refused_all:
        assert all(_refused(backend, "cpu", t) is not None for t in (torch.bfloat16, torch.float16))
        reason = _sdpa_probe(backend, "cpu", torch.float32)
        assert "for float32, bfloat16 or float16 (all 3 refused)" in reason
    assert refused_all, (
        "this torch has no CPU kernel for efficient or cudnn: nothing refused to say"
    )
