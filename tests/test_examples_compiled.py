"""examples/compiled_attention.py and examples/flex_attention.py run as a reader runs them: copied with
the attention files they import into an empty folder, with torch alone (no checkout, matplotlib, rich)."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "32", "--head-dim", "16"]

# Runs the script with an import system that finds `attn` only in the copy and refuses matplotlib
# and rich, then checks that every attn module it loaded came from the copy.
BOOTSTRAP = """
import importlib.machinery, os, runpy, sys
here, script, *args = sys.argv[1:]

class Blocker:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ("matplotlib", "rich"):
            raise ModuleNotFoundError(f"blocked: an example imports torch only, not {name}")
        if top == "attn":  # the copied attn/ only, never the checkout's package
            spec = importlib.machinery.PathFinder.find_spec(name, [here] if path is None else path)
            if spec is None:
                raise ModuleNotFoundError(f"{name} is not among the copied files")
            return spec
        return None

sys.meta_path.insert(0, Blocker())
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
loaded = [m.__file__ for n, m in sys.modules.items() if n.startswith("attn.")]
assert loaded and all(f.startswith(here + os.sep) for f in loaded), loaded
"""

EXAMPLES = [
    (
        "compiled_attention.py",
        ["attn/compiled.py", "attn/naive.py"],
        "masked_fill",
        "compiled_naive",
    ),
    (
        "compiled_attention.py",
        ["attn/compiled.py", "attn/naive.py"],
        "additive",
        "compiled_additive",
    ),
    ("flex_attention.py", ["attn/flex.py"], "causal", "flex_causal"),
    ("flex_attention.py", ["attn/flex.py"], "sliding_window", "flex_sliding_window"),
    ("flex_attention.py", ["attn/flex.py"], "document", "flex_document"),
]


@pytest.mark.parametrize("script,files,mask,folder", EXAMPLES, ids=[e[3] for e in EXAMPLES])
def test_example_runs_alone_and_writes_a_trace(tmp_path, script, files, mask, folder):
    work = tmp_path / "reader"
    for name in [f"examples/{script}", *files]:
        target = work / (Path(name).name if name.startswith("examples/") else name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, target)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(work), script, "--mask", mask, *TINY],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "first call:" in run.stdout and "second call:" in run.stdout
    assert "Self CPU" in run.stdout and "attn_fwd" in run.stdout  # the key_averages table
    assert "CompiledFxGraph" in run.stdout
    trace = work / "runs" / folder / "trace.json.gz"
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "attn_fwd" for e in events) == 3
    assert (work / "runs" / folder / "table.txt").read_text().strip()
    assert not list((work / "runs" / folder).glob(".trace-*"))  # the scratch file was renamed


@pytest.mark.parametrize(
    "source,words",
    [("import rich", "blocked"), ("import attn.registry", "not among the copied files")],
)
def test_the_bootstrap_really_isolates_the_copy(tmp_path, source, words):
    (tmp_path / "attn").mkdir()
    (tmp_path / "script.py").write_text(source + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "script.py"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},  # even with the checkout on the path
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and words in run.stderr
