"""attn/traces as folders by job imported one way, read from the source with ast (nothing imported):
no import circle anywhere in attn/, no arrow between the folders of attn/traces against their order,
and no torch or measuring code under attn/traces.

Every import counts, at the top of a module, inside a function or under `if TYPE_CHECKING:`: an
import moved into a function still closes a circle when it runs, and a type named from a later
folder is an arrow the wrong way all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The folders of attn/traces in the order they may import each other: a folder imports only those
# of earlier entries (and itself); the folders of one entry do not import each other.
LAYERS = ("read", "common", "figures", ("claims", "ranks", "compare"), ("diagnosis", "sets"))
RANK = {
    name: i
    for i, entry in enumerate(LAYERS)
    for name in ((entry,) if isinstance(entry, str) else entry)
}
FORBIDDEN_IN_TRACES = ("torch", "triton", "attn.profiling")  # the trace half reads, never measures


def module_name(root: Path, path: Path) -> str:
    """attn/traces/read/trace.py -> attn.traces.read.trace; a package's __init__ -> the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, is_package: bool) -> list[tuple[str, ...]]:
    """What a module's source imports, each as the names it may be, likeliest first: `import X` as
    (X,), `from X import a` as (X.a, X) (a may be a module or a name in X); relative imports
    resolved against `name`."""
    found: list[tuple[str, ...]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            found.extend((f"{base}.{alias.name}", base) for alias in node.names)
    return found


def graph(root: Path, folder: str = "attn") -> dict[str, set[str]]:
    """Module -> the modules of root/folder it imports (a name that is no module there is dropped)."""
    paths = {module_name(root, p): p for p in sorted((root / folder).rglob("*.py"))}
    edges = {}
    for name, p in paths.items():
        found = imports_of(p.read_text(), name, p.name == "__init__.py")
        modules = (next((m for m in names if m in paths), None) for names in found)
        edges[name] = {m for m in modules if m is not None and m != name}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import each other round a circle (Tarjan's strongly connected
    components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    return sorted(found)


def folder_of(module: str) -> str | None:
    """attn.traces.read.trace -> read; attn.traces itself, or a module outside it -> None."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["attn", "traces"] and len(parts) > 2 else None


def against_the_order(edges: dict[str, set[str]]) -> list[str]:
    """Each import from one folder of attn/traces to another that the order does not allow."""
    wrong = []
    for module, targets in sorted(edges.items()):
        mine = folder_of(module)
        for target in sorted(targets):
            theirs = folder_of(target)
            if mine is None or theirs is None or mine == theirs:
                continue
            if mine not in RANK or theirs not in RANK or RANK[theirs] >= RANK[mine]:
                wrong.append(f"{module} imports {target} ({mine} may not import {theirs})")
    return wrong


def measuring(root: Path, folder: str = "attn/traces") -> list[str]:
    """Each import of torch or the measuring code (attn.profiling) under root/folder."""
    wrong = []
    for path in sorted((root / folder).rglob("*.py")):
        name = module_name(root, path)
        found = imports_of(path.read_text(), name, path.name == "__init__.py")
        for m in sorted({names[-1] for names in found}):  # the module imported from
            if any(m == f or m.startswith(f + ".") for f in FORBIDDEN_IN_TRACES):
                wrong.append(f"{name} imports {m}")
    return wrong


# --- the checks, on the code as it is -----------------------------------------------------------


def test_no_import_circle_in_attn():
    assert circles(graph(ROOT)) == []


def test_the_folders_of_attn_traces_import_only_earlier_folders():
    assert against_the_order(graph(ROOT)) == []


def test_every_folder_of_attn_traces_has_its_place_in_the_order():
    folders = {p.name for p in (ROOT / "attn/traces").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(RANK)


def test_attn_traces_keeps_no_module_at_its_top_but_init_and_main():
    top = {p.name for p in (ROOT / "attn/traces").glob("*.py")}
    assert top <= {"__init__.py", "__main__.py"}


def test_attn_traces_imports_no_torch_and_no_measuring_code():
    assert measuring(ROOT) == []


# --- the checks can fail: each on a small tree that breaks it ------------------------------------


@pytest.fixture
def tree(tmp_path):
    """Writes a small tree of modules under tmp_path and returns tmp_path."""

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path

    return write


def test_a_circle_through_a_function_level_or_type_checking_import_is_found(tree):
    root = tree({
        "attn/__init__.py": "",
        "attn/a.py": "from attn import b\n",
        "attn/b.py": "def f():\n    from attn.a import x\n",
        "attn/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attn.d import D\n",
        "attn/d.py": "from attn import c\n",
    })  # fmt: skip
    assert circles(graph(root)) == [["attn.a", "attn.b"], ["attn.c", "attn.d"]]


def test_an_import_against_the_order_is_found(tree):
    root = tree({
        "attn/traces/__init__.py": "",
        "attn/traces/read/__init__.py": "",
        "attn/traces/read/trace.py": "from attn.traces.figures.svg import Panel\n",
        "attn/traces/figures/__init__.py": "",
        "attn/traces/figures/svg.py": "from attn.traces.read import trace\n",
        "attn/traces/claims/__init__.py": "",
        "attn/traces/claims/x.py": "from ..ranks import comm\n",
        "attn/traces/ranks/__init__.py": "",
        "attn/traces/ranks/comm.py": "",
    })  # fmt: skip
    assert against_the_order(graph(root)) == [
        "attn.traces.claims.x imports attn.traces.ranks.comm (claims may not import ranks)",
        "attn.traces.read.trace imports attn.traces.figures.svg (read may not import figures)",
    ]


def test_torch_or_measuring_code_under_attn_traces_is_found(tree):
    root = tree({
        "attn/traces/__init__.py": "",
        "attn/traces/read/__init__.py": "import torch.nn\n",
        "attn/traces/read/x.py": "def f():\n    from attn.profiling.run import run\n",
    })  # fmt: skip
    assert measuring(root) == [
        "attn.traces.read imports torch.nn",
        "attn.traces.read.x imports attn.profiling.run",
    ]
