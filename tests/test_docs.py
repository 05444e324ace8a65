"""The docs: no silently skipped code, includes that resolve, known markers, guesses that ask and
checks that answer, a strict build, a repository link only when one is configured."""

from __future__ import annotations

import html
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from committed import CPU_SET  # the committed set the site is built from
from test_docs_hook import hook  # the hook, loaded once as MkDocs loads it

from attn import specs
from attn.traces.claims.figure_tables import OVERHEAD_KINDS
from attn.traces.common import artifacts

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").rglob("*.md")) + [p for p in [ROOT / "README.md"] if p.exists()]
PAGES = {"naive": "scores = scores.masked_fill(mask, float(\"-inf\"))",
         "inplace": "scores.masked_fill_(mask, float(\"-inf\"))",
         "sdpa": "with sdpa_kernel(BACKENDS[self.backend]):",
         "custom-kernels": "return attention(q, k, v, is_causal, scale, backward=self.backward)"}  # fmt: skip

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
                f"line {lineno}: a snippet include cannot run; write it as an excerpt marker, "
                "<!-- profile-excerpt: PATH:SECTION -->"
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


def mkdocs_yml() -> dict:
    """mkdocs.yml as MkDocs reads it (its only tags are !ENV, resolved from the environment)."""
    from mkdocs.utils.yaml import yaml_load

    return yaml_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def snippets_config() -> dict:
    config = mkdocs_yml()
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            return ext["pymdownx.snippets"]
    raise AssertionError("pymdownx.snippets is not configured")


def test_snippets_fail_the_build_on_missing_paths():
    assert snippets_config()["check_paths"] is True


def includes(text: str) -> list[str]:
    """The PATH:SECTION of every snippet include and every excerpt marker (which the hook turns into
    an include) of a page."""
    excerpts = [
        shlex.split(m["args"])[0]
        for m in hook.MARKER.finditer(text)
        if m["kind"] == "profile-excerpt"
    ]
    return [m["target"] for m in SNIPPET.finditer(text)] + excerpts


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_snippet_include_resolves(path):
    bases = [ROOT / b for b in snippets_config()["base_path"]]
    for target in includes(path.read_text(encoding="utf-8")):
        file, _, section = target.partition(":")
        found = [b / file for b in bases if (b / file).is_file()]
        assert found, f"{target}: no {file} under {[str(b.relative_to(ROOT)) for b in bases]}"
        source = found[0].read_text(encoding="utf-8")
        if section and not re.fullmatch(r"[\d:,-]+", section):  # a named section, not line numbers
            for edge in ("start", "end"):
                assert f"--8<-- [{edge}:{section}]" in source, (
                    f"{found[0]} has no [{edge}:{section}]"
                )


def test_every_marker_names_a_known_variant_claim_or_figure():
    known = specs.names()
    used = set()
    for path in DOCS:
        for m in hook.MARKER.finditer(path.read_text(encoding="utf-8")):
            kind, names = m["kind"], (m["args"] or "").split()
            assert kind in hook.RENDERERS, f"{path.name}: {m[0]} is no marker the hook knows"
            if kind == "profile-figure":
                assert names and set(names) <= set(artifacts.FIGURES), f"{path}: {m[0]}"
                continue
            if kind in ("profile-env", "profile-glance", "profile-chapters", "profile-install"):
                assert not names, f"{path.name}: {m[0]} takes no arguments"
                continue
            if kind == "profile-excerpt":  # PATH:SECTION of a file sources.py publishes whole
                file = names[0].partition(":")[0]
                assert file in sys.modules["sources"].published_paths(ROOT, ROOT / "docs"), (
                    f"{path.name}: {m[0]}"
                )
                continue
            if kind == "profile-overhead":  # a kind of overhead.json's rows
                assert names and set(names) <= set(OVERHEAD_KINDS), f"{path.name}: {m[0]}"
                continue
            if kind == "profile-public":  # a trace recorded by others, shown by its own chapter
                (folder,) = names
                assert specs.public(folder).chapter == path.name, f"{path.name}: {m[0]}"
                continue
            assert names, f"{path}: {m[0]} names no variant"
            if kind == "profile-claim":  # VARIANT KEY, the key of one of the spec's claims
                assert len(names) == 2 and specs.claim(*names), (
                    f"{path.name}: {m[0]}: no such claim"
                )
                names = names[:1]
            if kind == "profile-guess":  # KIND VARIANT..., a question of docs/hooks/guesses.py
                assert names[0] in sys.modules["guesses"].QUESTIONS, f"{path.name}: {m[0]}"
                names = names[1:]
            unknown = [n for n in names if n not in known]
            assert not unknown, f"{path.name}: {m[0]} names unknown variants {unknown}"
            used.update(names)
    assert {"naive", "inplace", "sdpa_math", "sdpa_flash"} <= used


@pytest.fixture(scope="module")
def site(built_site) -> Path:
    """The strict build of the committed profiles/ (plus a fake GPU set) that the site and browser
    tests share: one build for all of them keeps the suite quick on two cores."""
    return built_site


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
    if not (CPU_SET / "environment.json").exists():
        pytest.skip("no profiles/cpu-amd-epyc/ in this checkout yet")
    raw, _ = page_text(site, page)
    assert re.search(r"<td><code>(aten|attn)::", raw), f"{page}: no profiler table"
    assert re.search(r'<img [^>]*src="\.\./profiles/cpu-amd-epyc/[^"]+/timeline\.svg"', raw), (
        f"{page}: no timeline"
    )
    assert (site / "profiles/cpu-amd-epyc/naive/trace.json.gz").exists()


def test_at_a_glance_lists_every_variant_available_on_cpu(site):
    if not (CPU_SET / "environment.json").exists():
        pytest.skip("no profiles/cpu-amd-epyc/ in this checkout yet")
    raw, _ = page_text(site, "at-a-glance")
    available = [
        p.parent.name
        for p in sorted(CPU_SET.glob("*/summary.json"))
        if json.loads(p.read_text())["available"]
    ]
    assert {"naive", "inplace", "sdpa_flash", "custom_cpu"} <= set(available)
    # The timing pass times one process's calls: a folder of ranks (ring_*) has no time there.
    timing = json.loads((CPU_SET / "timing.json").read_text())
    timed = {row["variant"] for row in timing["rows"]}
    assert {"naive", "inplace", "sdpa_flash", "custom_cpu"} <= timed
    for name in sorted(set(available) & timed):  # in the CPU tab (fake GPU sets: no device time)
        rows = re.findall(
            rf"<tr>\s*<td><code>{name}</code><br ?/?><small>[^<]*</small></td>(.*?)</tr>", raw, re.S
        )
        assert any(re.search(r"\d+\.\d+ ms", row) for row in rows), f"no row with a time: {name}"
    assert re.search(r'<img [^>]*src="\.\./profiles/cpu-amd-epyc/overview\.svg"', raw)
    figures = json.loads((CPU_SET / "index.json").read_text())["figures"]
    scaling = re.search(r'<img [^>]*src="\.\./profiles/cpu-amd-epyc/scaling\.svg"', raw)
    assert bool(scaling) == ("scaling" in figures), "the scaling figure is shown when it exists"


# --- guess first, then look -----------------------------------------------------------------------

QUESTION_BOX = re.compile(r'^!!! question "(?P<title>[^"]*)"\n(?P<body>(?:\n|    .*\n)+)', re.M)


def guess_boxes(text: str) -> list[re.Match]:
    return list(QUESTION_BOX.finditer(text))


def box_items(body: str) -> list[str]:
    """The list items of an admonition's body, each with its continuation lines joined."""
    items: list[str] = []
    for line in body.splitlines():
        if line.strip().startswith("- "):
            items.append(line.strip()[2:])
        elif line.strip():
            items[-1:] = [(items[-1] + " " if items else "") + line.strip()]
    return items


def test_guess_boxes_ask_and_do_not_answer():
    problems = []
    for path in DOCS:
        for box in guess_boxes(path.read_text(encoding="utf-8")):
            items = box_items(box["body"])
            if not items:
                problems.append(f"{path.name}: the guess box {box['title']!r} asks nothing")
            problems += [
                f"{path.name}: {item!r} is not a question"
                for item in items
                if not item.endswith("?")
            ]
            if "<!-- profile" in box["body"]:
                problems.append(f"{path.name}: a guess box shows profile output: {box['title']}")
    assert not problems, "\n".join(problems)


def test_every_guess_is_asked_on_the_page_then_closed_evidence_and_a_check_answer_it():
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for box in guess_boxes(text):
            rest = text[box.end() :]
            asked = re.match(r"\s*<!-- profile-guess: [\w-]+ (\w+)[\w ]*-->\n", rest)
            assert asked, f"{path.name}: no question to answer after {box['title']!r}"
            rest = rest[asked.end() :]
            # The evidence: a closed block (`??? ... evidence`) holding a variant's profile, or the
            # figure a figure's question is answered from (then the check answers its variant).
            closed = re.search(r'^\?\?\? [\w ]*\bevidence "[^"]+"\n', rest, re.M)
            assert closed, f"{path.name}: no closed evidence block after {box['title']!r}"
            evidence = re.match(
                r"\n    <!-- profile(-figure)?: (\w+) -->$", rest[closed.end() :], re.M
            )
            assert evidence, f"{path.name}: the evidence block does not start with a profile"
            after = rest[closed.end() + evidence.end() :]
            check = re.search(r"^#+ Check your guess$", after, re.M)
            assert check, f"{path.name}: no 'Check your guess' after the evidence"
            name = asked[1] if evidence[1] else evidence[2]
            answers = [
                m for m in hook.MARKER.finditer(after[check.end() :])
                if m["kind"] in ("profile-check", "profile-claim") and (m["args"] or "").split()[0] == name
            ]  # fmt: skip
            assert answers, f"{path.name}: Check your guess has no checked claim about {name}"


def test_no_page_uses_the_retired_claims_marker():
    for path in DOCS:
        assert "profile-claims:" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize(
    "page",
    [
        "naive",
        "inplace",
        "sdpa",
        "custom-kernels",
        "reading-a-profile",
        "compiled-and-flex",
        "decoding",
    ],
)
def test_every_claim_marker_renders_with_what_was_observed(site, page):
    text = (ROOT / "docs" / f"{page}.md").read_text(encoding="utf-8")
    markers = re.findall(r"^\s*<!-- profile-claim: (\w+) ([\w.-]+) -->$", text, re.M)
    assert markers, f"{page}: no claim marker"
    # A variant no committed set has profiled yet can only say so ("Not checked yet"); every claim
    # of a profiled variant renders a verdict, or waits for its figure ("Not measured yet").
    profiled = {p.parent.name for p in (site.parent / "profiles").glob("*/*/summary.json")}
    markers = [(name, key) for name, key in markers if name in profiled]
    raw, _ = page_text(site, page)
    titles = re.findall(r'<p class="admonition-title">(.*?)</p>\s*<p>(.*?)</p>', raw, re.S)
    observed = [body for _, body in titles if "(observed:" in body or "Not measured yet" in body]
    assert len(observed) >= len(markers), (
        f"{page}: {len(markers)} markers, {len(observed)} rendered"
    )
    assert not re.search(r"<!-- profile", raw), f"{page}: a marker was left unexpanded"


def test_the_home_page_links_every_page_of_the_nav_with_its_description(site):
    raw, _ = page_text(site, "")
    chapters = raw[raw.index('id="the-chapters"') : raw.index('id="quick-start"')]
    pages = [item for entry in mkdocs_yml()["nav"] for item in entry.items()]
    assert len(pages) > 8 and pages[0][1] == "index.md"
    for title, path in pages[1:]:
        url = re.sub(r"\.(md|ipynb)$", "/", path)
        link = re.search(
            rf'<a href="{re.escape(url)}">{re.escape(html.escape(title))}</a>: (\S[^<]*)', chapters
        )
        assert link, f"the home page's chapter list does not link {title!r} ({url})"
        assert link[1].rstrip().endswith("."), f"{title!r}: no description after the link"


def test_the_changed_line_of_in_place_is_highlighted(site):
    raw, _ = page_text(site, "inplace")
    marked = re.findall(r'<span class="hll">(.*?)</span>\n', raw)
    lines = [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in marked]
    assert lines and all("masked_fill_(" in line for line in lines), lines


def test_the_recipe_is_what_the_tested_example_runs(site):
    raw, text = page_text(site, "naive")
    assert 'with record_function("attn_fwd"):' in text and "prof.step()" in text
    source = (ROOT / "examples/naive_attention.py").read_text(encoding="utf-8")
    assert 'with record_function("attn_fwd"):' in source


# --- the repository link ----------------------------------------------------------------------------


def load_config(monkeypatch, **env):
    from mkdocs.config import load_config as load

    for name in ("REPO_URL", "EDIT_URI", "SITE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load(str(ROOT / "mkdocs.yml"))


def test_no_repository_link_or_edit_button_without_a_repo_url(monkeypatch):
    config = load_config(monkeypatch)
    assert config["repo_url"] is None and not config["edit_uri"] and config["site_url"] is None


def test_a_repo_url_brings_the_link_and_the_edit_button(monkeypatch):
    config = load_config(
        monkeypatch,
        REPO_URL="https://github.com/someone/attention-profiled",
        EDIT_URI="edit/main/docs/",
    )
    assert config["repo_url"] == "https://github.com/someone/attention-profiled"
    assert config["edit_uri"] == "edit/main/docs/"
    assert "content.action.edit" in config["theme"]["features"]


def test_copy_instructions_name_what_a_copied_example_needs_to_run_quietly():
    """torch warns at start without NumPy: every 'copy the files' paragraph says to install both
    (or the package, for the examples that need it)."""
    for path in DOCS:
        for paragraph in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            if re.search(r"(?i)to run it yourself, copy|Copy both", paragraph):
                assert "pip install torch numpy" in paragraph or "pip install -e ." in paragraph, (
                    f"{path.name}: {paragraph[:80]!r}"
                )
