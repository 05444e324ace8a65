"""The docs: no silently skipped code, includes that resolve, known markers, a strict build."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").rglob("*.md")) + [p for p in [ROOT / "README.md"] if p.exists()]
PAGES = {"naive": "def forward(self, q, k, v, is_causal=True):",
         "inplace": "scores.mul_(scale)  # 2. scale, in place",
         "sdpa": "def _attention(self, q, k, v, *, is_causal):"}  # fmt: skip

# pytest-codeblocks runs fences whose info string is exactly `python`, `sh` or `bash`, and silently
# ignores everything else. These look like Python (or run a shell) and need an explicit decision.
PYTHONISH = {"py", "py3", "python", "python3", "pycon", "ipython", "pyi"}
SHELLS = {"sh", "bash", "zsh"}
SKIP_MARKER = re.compile(
    r"""<!--\s*pytest\.mark\.skip(?:if)?\(.*reason\s*=\s*(["'])\s*\S.*?\1.*\)\s*-->"""
)
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
SNIPPET = re.compile(r"""^\s*-{1,}8<-{1,}\s+["'](?P<target>[^"']+)["']\s*$""", re.M)


def fences(text: str):
    """(line number, info string, previous non-blank line, body) of every fenced block."""
    lines, i, previous = text.splitlines(), 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            previous = lines[i] if lines[i].strip() else previous
            i += 1
            continue
        start, info, closer = i, m["info"].strip(), m["fence"]
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(closer):
            i += 1
        yield start + 1, info, previous.strip(), "\n".join(lines[start + 1 : i])
        previous, i = "", i + 1


def fence_problems(text: str) -> list[str]:
    """Fences pytest-codeblocks would skip silently (or run as shell) without a reasoned skip marker."""
    problems = []
    for lineno, info, previous, body in fences(text):
        lang = re.split(r"[\s{]", info, maxsplit=1)[0].lstrip(".").lower()
        marked = bool(SKIP_MARKER.fullmatch(previous))
        if lang in PYTHONISH and info != "python" and not marked:
            problems.append(f"line {lineno}: ```{info} is never run by pytest-codeblocks; fence it as "
                            "```python or put <!--pytest.mark.skip(reason=\"...\")--> before it")  # fmt: skip
        elif info == "python" and "--8<--" in body and not marked:
            problems.append(
                f"line {lineno}: a snippet include cannot run; mark it skipped with a reason"
            )
        elif lang in SHELLS and not marked:
            problems.append(f"line {lineno}: ```{info} blocks are run by pytest-codeblocks; use ```shell "
                            "for commands to read, or add a skip marker with a reason")  # fmt: skip
    return problems


@pytest.mark.parametrize(
    ("block", "ok"),
    [
        ("```python\nprint(1)\n```", True),
        ("```py\nprint(1)\n```", False),
        ("```pycon\n>>> 1\n```", False),
        ('```python title="x.py"\nprint(1)\n```', False),
        ('<!--pytest.mark.skip(reason="needs a GPU")-->\n```python title="x.py"\nx\n```', True),
        ("<!--pytest.mark.skip-->\n```py\nx\n```", False),
        ('```python\n--8<-- "attn/naive.py:forward"\n```', False),
        ("```bash\nnox\n```", False),
        ("```shell\nnox\n```", True),
        ("    ```python3\n    x\n    ```", False),
    ],
)
def test_fence_checker(block, ok):
    assert (fence_problems(block) == []) == ok


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_python_block_is_skipped_silently(path):
    assert fence_problems(path.read_text(encoding="utf-8")) == []


def snippets_config() -> dict:
    config = yaml.safe_load(
        (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    )  # plain YAML, no tags
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            return ext["pymdownx.snippets"]
    raise AssertionError("pymdownx.snippets is not configured")


def test_snippets_fail_the_build_on_missing_paths():
    assert snippets_config()["check_paths"] is True


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_snippet_include_resolves(path):
    bases = [ROOT / b for b in snippets_config()["base_path"]]
    for m in SNIPPET.finditer(path.read_text(encoding="utf-8")):
        file, _, section = m["target"].partition(":")
        found = [b / file for b in bases if (b / file).is_file()]
        assert found, f"{m['target']}: no {file} under {[str(b.relative_to(ROOT)) for b in bases]}"
        source = found[0].read_text(encoding="utf-8")
        if section and not re.fullmatch(r"[\d:,-]+", section):  # a named section, not line numbers
            for edge in ("start", "end"):
                assert f"--8<-- [{edge}:{section}]" in source, (
                    f"{found[0]} has no [{edge}:{section}]"
                )


def load_hook():
    spec = importlib.util.spec_from_file_location("profiles_hook", ROOT / "docs/hooks/profiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marker_names_a_known_variant():
    hook = load_hook()
    known = hook.variant_names(ROOT)
    used = set()
    for path in DOCS:
        for m in hook.MARKER.finditer(path.read_text(encoding="utf-8")):
            names = (m["args"] or "").split()
            if m["kind"] == "-figure":
                assert names and set(names) <= set(hook.FIGURES), f"{path}: {m[0]}"
                continue
            assert m["kind"] in ("-env", "-glance") or names, f"{path}: {m[0]} names no variant"
            unknown = [n for n in names if n not in known]
            assert not unknown, f"{path.name}: {m[0]} names unknown variants {unknown}"
            used.update(names)
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash"} <= used


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `nox -s docs` builds it: strict, from the committed profiles/."""
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "ATTN_PROFILES_DIR"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    run = subprocess.run(cmd, cwd=ROOT, env={**env, "NO_MKDOCS_2_WARNING": "1"},
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr}"
    return out


def page_text(site: Path, page: str) -> tuple[str, str]:
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    return raw, html.unescape(re.sub(r"<[^>]+>", "", raw))


@pytest.mark.parametrize("page", PAGES)
def test_built_pages_include_the_real_code(site, page):
    raw, text = page_text(site, page)
    assert PAGES[page] in text, f"{page}: the included code is missing"
    assert "--8<--" not in text and "<!-- profile" not in raw, (
        f"{page}: unexpanded include or marker"
    )


@pytest.mark.parametrize("page", PAGES)
def test_generated_tabs_never_merge_with_prose_tabs(site, page):
    raw, _ = page_text(site, page)
    for labels in re.findall(r'<div class="tabbed-labels">(.*?)</div>', raw):
        names = [html.unescape(n) for n in re.findall(r"<label[^>]*>(.*?)</label>", labels)]
        prose = [n.startswith("On ") for n in names]  # "On CPU (our runs)", "On an A100 (...)"
        assert all(prose) or not any(prose), f"{page}: one tab set mixes {names}"


@pytest.mark.parametrize("page", PAGES)
def test_built_pages_show_the_cpu_profile(site, page):
    if not (ROOT / "profiles/cpu/environment.json").exists():
        pytest.skip("no profiles/cpu/ in this checkout yet")
    raw, _ = page_text(site, page)
    assert re.search(r"<td><code>aten::", raw), f"{page}: no profiler table"
    assert re.search(r'<img [^>]*src="\.\./profiles/cpu/[^"]+/timeline\.svg"', raw), (
        f"{page}: no timeline"
    )
    assert (site / "profiles/cpu/naive/trace.json.gz").exists()


def test_at_a_glance_lists_every_variant_available_on_cpu(site):
    if not (ROOT / "profiles/cpu/environment.json").exists():
        pytest.skip("no profiles/cpu/ in this checkout yet")
    raw, _ = page_text(site, "at-a-glance")
    available = [
        p.parent.name
        for p in sorted((ROOT / "profiles/cpu").glob("*/summary.json"))
        if json.loads(p.read_text())["available"]
    ]
    assert {"naive", "inplace", "sdpa_flash", "custom_cpu"} <= set(available)
    for name in available:
        row = re.search(rf"<tr>\s*<td><code>{name}</code></td>(.*?)</tr>", raw, re.S)
        assert row and re.search(r"\d+\.\d+ ms", row[1]), f"no row with a time for {name}"
    assert re.search(r'<img [^>]*src="\.\./profiles/cpu/overview\.svg"', raw)
    assert re.search(r'<img [^>]*src="\.\./profiles/cpu/scaling\.svg"', raw)
