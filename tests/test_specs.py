"""attn/specs/: a module per chapter, each variant's entry written under the name a reader types,
so that `grep -rn '"ring_zigzag"' attn/specs/` finds it."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from attn import specs

SPECS_DIR = Path(__file__).resolve().parents[1] / "attn/specs"


def entry_names(source: str) -> list[str | None]:
    """The names a module's SPECS entries are written under: each entry's first argument where it
    is a literal string, None where it is not (a name a factory builds from parts)."""
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "SPECS":
            entries = [e for e in node.value.elts if not isinstance(e, ast.Starred)]
            return [
                e.args[0].value
                if isinstance(e, ast.Call)
                and e.args
                and isinstance(e.args[0], ast.Constant)
                and isinstance(e.args[0].value, str)
                else None
                for e in entries
            ]
    return []


def modules_with_entry(name: str, sources: dict[str, str]) -> list[str]:
    """The modules that hold an entry written under `name`."""
    return [module for module, text in sources.items() if name in entry_names(text)]


SOURCES = {p.stem: p.read_text() for p in sorted(SPECS_DIR.glob("*.py"))}


@pytest.mark.parametrize("name", specs.names())
def test_each_variant_is_written_out_in_exactly_one_module(name):
    # diff_with and the benchmark's comparisons name other variants, so a name's literal may occur
    # in a second chapter; the entry written under it is in one module only.
    (module,) = modules_with_entry(name, SOURCES)
    assert f'"{name}"' in SOURCES[module]  # what grep finds
    made = importlib.import_module(f"attn.specs.{module}").SPECS
    assert specs.spec(name) in made  # that entry is the spec the lookups return


def test_every_entry_is_written_under_a_literal_name():
    written = [n for text in SOURCES.values() for n in entry_names(text)]
    assert sorted(written, key=str) == sorted(specs.names())


def test_no_module_hides_a_lookup_of_the_same_name():
    # A public.py beside the lookup public() would leave attn.specs.public naming whichever of
    # the two was bound last.
    for path in SPECS_DIR.glob("*.py"):
        if path.stem != "__init__":
            assert inspect.ismodule(getattr(specs, path.stem, None)), path.name


def test_the_check_fails_on_a_built_name_and_on_a_name_in_two_chapters():
    built = 'SPECS: tuple[Spec, ...] = (ring("zigzag", "t", "l"), Spec(f"ring_{s}", "t"))'
    assert entry_names(built) == ["zigzag", None]
    assert modules_with_entry("ring_zigzag", {"context_parallel": built}) == []
    twice = 'SPECS: tuple[Spec, ...] = (Spec("naive", "t"),)'
    assert modules_with_entry("naive", {"naive": twice, "sdpa": twice}) == ["naive", "sdpa"]
