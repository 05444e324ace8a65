"""The trace half (attn.traces) needs no torch: its imports, and the trace commands run with torch
made impossible to import."""

import ast
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from committed import PROFILES
from rank_traces import write_ring

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/fixtures/realtraces/tracelens-h100-bert-small-sdpa-flash"
CPU = "cpu-amd-epyc"  # the committed CPU set, read as HEAD holds it (committed.py)
# What reading a trace may use beyond the standard library (pyproject's dependencies).
ALLOWED = {"numpy", "orjson", "rich", "matplotlib"}

# Runs the CLI in a fresh interpreter where importing torch raises, then says what was loaded.
NO_TORCH = """
import json, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton"):
            raise ImportError("this interpreter has no " + name)
sys.meta_path.insert(0, NoTorch())
from attn.profiling.cli import main
code = main(json.loads(sys.argv[1]))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "attn"))
print(json.dumps({"code": code, "loaded": loaded}))
"""


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "attn/traces").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT / "attn/traces")),
)
def test_the_trace_half_imports_only_itself_and_its_libraries(path):
    stdlib = set(sys.stdlib_module_names)
    outside = {
        m
        for m in imports_of(path)
        if not m.startswith("attn.traces")
        and m.split(".")[0] not in stdlib | ALLOWED | {"__future__"}
    }
    assert not outside, f"{path} imports {sorted(outside)}"


def test_the_specs_import_no_variant_module():
    """The specs are data the trace commands read: their variants are made on first use."""
    top = {
        node.module
        for path in (ROOT / "attn/specs").glob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ImportFrom)
    }
    assert "attn.traces.claims.trace_checks" in top  # guard: the chapters' imports are read
    assert not {
        m
        for m in top
        if m.split(".")[0] == "attn" and not m.startswith(("attn.traces", "attn.specs"))
    }


def run_without_torch(*argv, cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH, json.dumps([str(a) for a in argv])],
        capture_output=True, text=True, cwd=cwd, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": sysconfig.get_path("scripts"), "HOME": str(cwd)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A copy of the committed CPU set and a real GPU trace to read."""
    root = tmp_path_factory.mktemp("no-torch")
    shutil.copytree(PROFILES / CPU, root / "profiles" / CPU)
    shutil.copy(next(REAL.glob("*.json.gz")), root / "bert.json.gz")
    write_ring(root / "job")  # a folder of ranks, read in worker processes
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ("analyze", "bert.json.gz", "--out", "analysed"),
        ("analyze", f"profiles/{CPU}/naive/trace.json.gz", "--variant", "naive", "--out", "mine"),
        ("diagnose", "bert.json.gz", "--json", "diagnosis.json"),
        ("diagnose", "job", "--json", "ranks.json"),
        ("analyze", "job", "--out", "ranked"),
        ("diff", f"profiles/{CPU}/naive", f"profiles/{CPU}/inplace"),
        ("diff", f"profiles/{CPU}", f"profiles/{CPU}", "--fail-on", "counts,time"),
        ("recheck", "profiles", "--check"),
    ],
    ids=lambda argv: (
        argv[0]
        + ("-variant" if "--variant" in argv else "")
        + ("-gate" if "--fail-on" in argv else "")
        + ("-ranks" if "job" in argv else "")
    ),
)
def test_trace_commands_run_where_torch_cannot_be_imported(work, argv):
    result = run_without_torch(*argv, cwd=work)
    assert result["code"] == 0
    assert not [m for m in result["loaded"] if m.split(".")[0] == "torch"]
    variants = {"attn.naive", "attn.inplace", "attn.sdpa", "attn.registry", "attn.variant"}
    assert not variants & set(result["loaded"]), result["loaded"]
