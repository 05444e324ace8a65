"""The examples and attention modules as readers copy them: out of the checkout, torch only.

Each example is copied with the one attention file it imports (kept at attn/<file>.py, as the page
says) into an empty folder and run there in a fresh interpreter whose imports cannot reach this
checkout's `attn` package, matplotlib or rich. The custom-kernel example needs the installed
package (the kernels are compiled from it), but never attn.profiling, matplotlib or rich.
"""

import ast
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import attn
from attn import specs
from attn.custom_ops import build_problem

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--head-dim", "16"]

# Run SCRIPT with ARGS as __main__, with imports fenced in. argv: HERE MODE SCRIPT ARGS...
BOOTSTRAP = r"""
import importlib.machinery, os, runpy, sys

here, mode, script, *args = sys.argv[1:]
blocked = ("matplotlib", "rich", "attn.profiling")


class Fence:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ModuleNotFoundError(f"{name} is not importable in this test")
        if mode == "alone" and name.split(".")[0] == "attn":
            spec = importlib.machinery.PathFinder.find_spec(name, path or [here])
            where = [spec.origin or ""] + list(spec.submodule_search_locations or []) if spec else []
            if not spec or not all(str(w).startswith(here) for w in where if w):
                raise ModuleNotFoundError(f"{name} was not copied into {here}")
            return spec
        return None


sys.meta_path.insert(0, Fence())
sys.path = [here] + [p for p in sys.path[1:] if p and os.path.abspath(p) != os.getcwd()]
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
"""


def imported_files(*paths: Path) -> list[str]:
    """The attn/*.py files these files import at their top, and theirs in turn: what a reader copies
    with them. (An import inside a function is made only when called: the training example imports
    the module its --impl names, which its spec lists among its sources.)"""
    found: list[str] = []
    todo = list(paths)
    while todo:
        tree = ast.parse(todo.pop().read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attn."):
                name = node.module.replace(".", "/") + ".py"
                if name not in found and (ROOT / name).is_file():
                    found.append(name)
                    todo.append(ROOT / name)
    return found


def needs_the_package(files: list[str]) -> bool:
    """Our kernels are built from the installed package's csrc/: those examples run installed."""
    return "attn/custom_ops.py" in files


def run_copied(tmp_path: Path, script: str, files: list[str], args: list[str], mode="alone"):
    """Copy the example and its files into tmp_path (keeping attn/ paths) and run it there."""
    shutil.copy(ROOT / "examples" / script, tmp_path / script)
    for name in files if mode == "alone" else []:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", BOOTSTRAP, str(tmp_path), mode, script, *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def assert_recorded(run, folder: Path):
    """The run printed its table and wrote its trace and table: in folder, or in each of its
    rank<r>/ folders for an example run on several ranks."""
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Self CPU" in run.stdout and "attn_fwd" in run.stdout  # the printed table
    ranks = sorted(p for p in folder.iterdir() if re.fullmatch(r"rank\d+", p.name))
    for each in ranks or [folder]:
        trace = json.loads(gzip.decompress((each / "trace.json.gz").read_bytes()))
        ranges = [
            e for e in trace["traceEvents"] if e.get("name") == "attn_fwd" and e.get("ph") == "X"
        ]
        assert len(ranges) == 3  # schedule(wait=1, warmup=1, active=3)
        assert (each / "table.txt").read_text().startswith("-")
        assert not [p.name for p in each.iterdir() if p.name.startswith(".")]  # no scratch left
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


def run_files(script: str, spec) -> list[str]:
    """What a reader copies to run a spec's example: the script's imports, and the attention
    module its flags choose (the spec's sources directly under attn/) with theirs."""
    modules = [f for f in (spec.sources if spec else ()) if re.fullmatch(r"attn/\w+\.py", f)]
    found = imported_files(ROOT / "examples" / script, *(ROOT / m for m in modules))
    return list(dict.fromkeys([*modules, *found]))


def runs_on_cpu(spec) -> bool:
    """Its variant runs on this CPU; for one run on several ranks, its example can start them."""
    variant = attn.get_variant(spec.name)
    if spec.ranks > 1:
        return variant.ranks_problem("cpu", spec.ranks) is None
    return variant.why_unavailable("cpu") is None


def cpu_examples():
    """(written folder, script, its flags) of every spec whose variant runs on the CPU, and the
    Flex example's document mask, which no spec profiles."""
    found = [
        pytest.param(s.name, Path(s.example[0]).name, list(s.example[1:]), id=s.name)
        for s in specs.SPECS
        if runs_on_cpu(s)
    ]
    return [*found, pytest.param("flex_document", "flex_attention.py", ["--mask", "document"])]


@pytest.mark.parametrize(("written", "script", "flags"), cpu_examples())
def test_an_example_runs_copied_out_with_the_files_it_imports(tmp_path, written, script, flags):
    files = run_files(script, specs.spec(written))
    mode = "installed" if needs_the_package(files) else "alone"
    if mode == "installed" and build_problem() is not None:
        pytest.skip(f"custom ops cannot be built: {build_problem()}")
    shape = ["--kv-heads", "1", "--cache-len", "48"] if "--gqa" in flags else ["--seq", "48"]
    run = run_copied(tmp_path, script, files, [*TINY, *shape, *flags], mode)
    assert_recorded(run, tmp_path / "runs" / written)
    if "--mask" in flags:  # compiled: the first calls are timed, and the compiled graph shows
        assert "first call:" in run.stdout and "second call:" in run.stdout
        assert "CompiledFxGraph" in run.stdout
    if specs.spec(written) and specs.spec(written).trains:  # three backwards, and what they kept
        folder = tmp_path / "runs" / written
        trace = json.loads(gzip.decompress((folder / "trace.json.gz").read_bytes()))
        ranges = [
            e for e in trace["traceEvents"] if e.get("name") == "attn_bwd" and e.get("ph") == "X"
        ]
        assert len(ranges) == 3
        saved = json.loads((folder / "saved.json").read_text())
        assert saved and all(row["bytes"] > 0 and row["shape"] for row in saved)
        assert "saved for backward:" in run.stdout


def test_an_example_refuses_a_backend_that_cannot_run_in_one_line(tmp_path):
    run = run_copied(
        tmp_path, "sdpa_attention.py", ["attn/sdpa.py"], [*TINY, "--backend", "efficient"]
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "--backend efficient cannot run" in run.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_the_training_example_refuses_an_attention_without_a_backward_in_one_line(tmp_path):
    run = run_copied(
        tmp_path,
        "training_attention.py",
        ["attn/flex.py", "attn/inductor.py"],
        [*TINY, "--impl", "flex"],
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert "--impl flex cannot train here" in last and "inference only" in last
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_the_training_example_runs_bare_training_naive_as_its_help_says(tmp_path):
    run = run_copied(tmp_path, "training_attention.py", ["attn/naive.py"], ["--help"])
    assert run.returncode == 0 and "(default: naive)" in " ".join(run.stdout.split())
    run = run_copied(tmp_path, "training_attention.py", ["attn/naive.py"], [*TINY, "--seq", "48"])
    assert_recorded(run, tmp_path / "runs" / "train_naive")


def recipe_zips() -> dict[str, bytes]:
    """Each example's zip as the site publishes it (docs/hooks/sources.py), by its name."""
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    import sources

    return {
        Path(uri).name: sources.recipe_zip(ROOT, files)
        for uri, files in sources.recipe_zips(ROOT).items()
    }


def test_every_example_a_reader_can_copy_has_a_zip_of_the_copy_recipe():
    zips = recipe_zips()
    assert "custom_kernel_attention.zip" not in zips  # it needs the package: pip install .
    for name, data in zips.items():
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        script = name.replace(".zip", ".py")
        assert names[0] == script and all(re.fullmatch(r"attn/\w+\.py", n) for n in names[1:])
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            assert z.read(script) == (ROOT / "examples" / script).read_bytes()
            for module in names[1:]:
                assert z.read(module) == (ROOT / module).read_bytes(), f"{name}: {module}"
    assert zipfile.ZipFile(io.BytesIO(zips["naive_attention.zip"])).namelist() == [
        "naive_attention.py",
        "attn/naive.py",
    ]


# The compiled and Flex examples compile for a minute; their files run copied out above.
@pytest.mark.parametrize(
    "name",
    ["naive_attention.zip", "inplace_attention.zip", "sdpa_attention.zip", "decode_attention.zip",
     "training_attention.zip"],
)  # fmt: skip
def test_an_examples_zip_unzipped_runs_with_torch_alone(tmp_path, name):
    zipfile.ZipFile(io.BytesIO(recipe_zips()[name])).extractall(tmp_path)
    script = name.replace(".zip", ".py")
    flags = ["--kv-heads", "1", "--cache-len", "48"] if "decode" in name else ["--seq", "48"]
    flags += {"sdpa": ["--backend", "flash"], "deco": ["--gqa", "repeat"]}.get(name[:4], [])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "alone", script, *TINY, *flags]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    written = {"deco": "decode_repeat_kv", "sdpa": "sdpa_flash", "trai": "train_naive"}
    assert_recorded(run, tmp_path / "runs" / written.get(name[:4], name.split("_")[0]))


def test_a_bad_flag_is_named(tmp_path):
    run = run_copied(tmp_path, "naive_attention.py", ["attn/naive.py"], ["--seq", "0"])
    assert run.returncode == 2 and "--seq" in run.stderr and ">= 1" in run.stderr


MODULES = {  # the file a reader copies -> (class, constructor args, registered variant)
    "naive.py": ("NaiveAttention", (), "naive"),
    "inplace.py": ("InPlaceAttention", (), "inplace"),
    "sdpa.py": ("SdpaAttention", ("math",), "sdpa_math"),
}
SHAPES = [(1, 2, 5, 5, 8, True), (2, 1, 7, 11, 16, False), (1, 3, 9, 4, 32, True)]


@pytest.mark.parametrize("module", MODULES)
def test_an_attention_module_copied_alone_matches_the_registered_variant(tmp_path, module):
    cls, ctor, variant_name = MODULES[module]
    shutil.copy(ROOT / "attn" / module, tmp_path / module)
    gen = torch.Generator().manual_seed(0)
    inputs = [
        [torch.randn(b, h, s, d, generator=gen) for s in (sq, sk, sk)] + [causal]
        for b, h, sq, sk, d, causal in SHAPES
    ]
    torch.save(inputs, tmp_path / "inputs.pt")
    code = (
        f"import torch; from {module[:-3]} import {cls}; m = {cls}(*{ctor!r})\n"
        "ins = torch.load('inputs.pt')\n"
        "with torch.no_grad(): outs = [m(q, k, v, is_causal=c) for q, k, v, c in ins]\n"
        "torch.save(outs, 'outputs.pt')"
    )
    (tmp_path / "main.py").write_text(code)
    run = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "alone", "main.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    variant = attn.get_variant(variant_name)
    for (q, k, v, causal), out in zip(inputs, torch.load(tmp_path / "outputs.pt"), strict=True):
        with torch.no_grad():
            expected = variant.forward(q, k, v, is_causal=causal)
        torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_the_fence_really_keeps_the_checkout_out(tmp_path):
    """Without its attention file the copied example cannot import it: the fence holds."""
    run = run_copied(tmp_path, "naive_attention.py", [], TINY)
    assert run.returncode != 0 and "attn was not copied" in run.stderr
    (tmp_path / "attn").mkdir()
    (tmp_path / "script.py").write_text("import rich\n")
    run = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(tmp_path), "alone", "script.py"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode != 0 and "rich is not importable" in run.stderr


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_an_out_that_is_a_file_is_named_before_profiling(tmp_path, script):
    """--out at a file profiled for minutes, then raised FileExistsError."""
    (tmp_path / "a-file").write_text("mine\n")
    specs_flags = (list(s.example[1:]) for s in specs.SPECS if Path(s.example[0]).name == script)
    flags = next(specs_flags, [])  # an example no spec runs yet takes its defaults
    run = run_copied(tmp_path, script, [], [*flags, "--out", "a-file"], mode="checkout")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--out a-file: a-file is not a folder that can be written" in run.stderr
    assert (tmp_path / "a-file").read_text() == "mine\n"
