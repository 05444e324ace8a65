"""Each page as a reader meets it, and the workflow that publishes the pages.

- The Python blocks of a page, in page order and run together as one script, pass in an empty
  folder with torch and the installed package (a reader who types them in order gets no error).
- A block left out of that run is complete code that needs a GPU. Code included from a file is an
  excerpt marker (`<!-- profile-excerpt: PATH:SECTION -->`, so pytest-codeblocks sees no block) of
  a file the tests run, and renders labelled an excerpt that links the whole file.
- A command a page tells the reader to run, with the output it promises after it, prints that
  output when run as the page says (copied files where the page says to copy them).
- .github/workflows/pages.yml builds with a nox session that exists, from a checkout that keeps
  no token, and deploys with the Pages actions.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from test_docs_hook import hook  # the hook, loaded once as MkDocs loads it
from test_examples import BOOTSTRAP  # runs a copied script with its imports fenced in

from attn import specs

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>.*)$")
MARK = re.compile(r"^\s*<!--\s*(?P<mark>pytest\.mark\.(?P<kind>skipif|skip)\(.*\))\s*-->\s*$")
REASON = re.compile(r"""reason\s*=\s*(["'])(?P<reason>.*?)\1""")
INCLUDE = re.compile(
    r"""^\s*-{1,}8<-{1,}\s+["'](?P<path>[^"':]+)(?::(?P<section>[^"']+))?["']\s*$"""
)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
TITLE = re.compile(r'title="(?P<title>[^"]*)"')


@dataclass
class Block:
    """A fenced block of a page: where it starts, its info string, its body, what precedes it."""

    line: int
    info: str
    body: str
    mark: str = ""  # the pytest mark comment just before it, if any
    before: str = ""  # the paragraph just before it
    after: str = ""  # the paragraph just after it
    indent: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def lang(self) -> str:
        return re.split(r"[\s{]", self.info.strip(), maxsplit=1)[0]

    @property
    def title(self) -> str:
        m = TITLE.search(self.info)
        return m["title"] if m else ""

    @property
    def include(self) -> re.Match | None:
        lines = [line for line in self.body.splitlines() if line.strip()]
        return INCLUDE.match(lines[0]) if len(lines) == 1 else None


@dataclass
class Excerpt:
    """An excerpt marker of a page: its line, the file and section it shows, the words after it."""

    line: int
    path: str
    section: str
    words: tuple[str, ...] = ()

    def rendered(self) -> str:
        """What the hook writes for it (links as from a page at the top of the docs)."""
        target = f"{self.path}:{self.section}"
        return sys.modules["excerpts"].excerpt(target, self.words, lambda path: path)


def excerpts(text: str) -> list[Excerpt]:
    found = []
    for m in hook.MARKER.finditer(text):
        if m["kind"] == "profile-excerpt":
            target, *words = shlex.split(m["args"])
            path, _, section = target.partition(":")
            found.append(Excerpt(text.count("\n", 0, m.start()) + 1, path, section, tuple(words)))
    return found


def paragraph(lines: list[str], start: int, step: int) -> str:
    """The non-blank lines next to lines[start] going `step` (+1 down, -1 up), up to a blank line."""
    found, i = [], start
    while 0 <= i < len(lines) and not lines[i].strip():
        i += step
    while 0 <= i < len(lines) and lines[i].strip() and not FENCE.match(lines[i]):
        found.append(lines[i].strip())
        i += step
    return " ".join(found if step > 0 else reversed(found))


def blocks(text: str) -> list[Block]:
    lines, found, i = text.splitlines(), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, closer = i, m["fence"]
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(closer):
            i += 1
        body = "\n".join(line[len(m["indent"]) :] for line in lines[start + 1 : i])
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = MARK.match(lines[j]) if j >= 0 else None
        before_from = j - 1 if mark else start - 1
        found.append(
            Block(
                line=start + 1,
                info=m["info"].strip(),
                body=body,
                mark=mark["mark"] if mark else "",
                before=paragraph(lines, before_from, -1),
                after=paragraph(lines, i + 1, +1),
                indent=m["indent"],
            )
        )
        i += 1
    return found


def skipped(block: Block) -> tuple[bool, str]:
    """Whether pytest-codeblocks would skip the block here, and the reason its mark gives."""
    if not block.mark:
        return False, ""
    m = MARK.match(f"<!--{block.mark}-->")
    reason = (REASON.search(block.mark) or {"reason": ""})["reason"]
    if m["kind"] == "skip":
        return True, reason
    condition = block.mark[len("pytest.mark.skipif(") : block.mark.rindex(", reason")]
    return bool(eval(condition, {"sys": sys, "pytest": pytest})), reason


def runnable(block: Block) -> bool:
    return block.info == "python" and not skipped(block)[0]


def test_the_page_parser_reads_marks_includes_and_neighbours():
    page = (
        "Text before.\n\n"
        '<!--pytest.mark.skip(reason="included from x.py, which tests/test_x.py runs")-->\n'
        '```python title="x.py (excerpt)"\n--8<-- "x.py:part"\n```\n\n'
        "An excerpt: [the whole file](x.py).\n\n"
        "```python\nprint(1)\n```\n\n"
        '    <!-- profile-excerpt: attn/naive.py:forward "the forward" hl_lines="7" -->\n'
    )
    include, code = blocks(page)
    assert skipped(include) == (True, "included from x.py, which tests/test_x.py runs")
    assert include.include["path"] == "x.py" and include.include["section"] == "part"
    assert include.title == "x.py (excerpt)" and include.before == "Text before."
    assert LINK.search(include.after)["target"] == "x.py"
    assert runnable(code) and not runnable(include)
    (excerpt,) = excerpts(page)
    assert excerpt == Excerpt(14, "attn/naive.py", "forward", ("the forward", "hl_lines=7"))


# --- the Python blocks of each page, run together -------------------------------------------------

RUNNABLE = [p for p in PAGES if any(runnable(b) for b in blocks(p.read_text(encoding="utf-8")))]


def test_the_chapters_that_teach_with_code_have_runnable_blocks():
    names = {p.stem for p in RUNNABLE}
    assert {"reading-a-profile", "naive", "inplace", "sdpa", "custom-kernels"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_a_pages_python_blocks_run_in_order_in_an_empty_folder(page, tmp_path):
    from attn.custom_ops import build_problem

    if page.stem == "custom-kernels" and build_problem() is not None:
        pytest.skip(f"the page calls our C++ op, which cannot be built here: {build_problem()}")
    code = [
        f"# {page.name}, line {b.line}\n{b.body}\n"
        for b in blocks(page.read_text(encoding="utf-8"))
        if runnable(b)
    ]
    script = tmp_path / "page.py"
    script.write_text("\n".join(code), encoding="utf-8")
    # The installed package (`pip install -e .`): on PYTHONPATH when this checkout is not installed.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, f"{page.name}: the page's code fails\n{run.stderr[-3000:]}"
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "page.py")
    assert not left or left == ["runs"], f"{page.name}: the page's code left {left} behind"


# --- what is left out of that run -----------------------------------------------------------------


def covered_by_tests(path: str) -> bool:
    """A file some test module runs: a spec's example script (tests/test_examples.py runs each one
    the CPU can), or a file named (by path, file name or module) in a tests/ file."""
    if path in {s.example[0] for s in specs.SPECS}:
        return True
    name = Path(path).name
    module = Path(path).with_suffix("").as_posix().replace("/", ".")
    texts = [p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py")]
    return any(path in t or f'"{name}"' in t or module in t for t in texts)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_left_out_is_an_include_of_a_tested_file_or_needs_a_gpu(page):
    problems = []
    for b in blocks(page.read_text(encoding="utf-8")):
        if b.lang != "python" or runnable(b):
            continue
        skip, reason = skipped(b)
        if b.include:
            path = b.include["path"]
            if not covered_by_tests(path):
                problems.append(f"line {b.line}: includes {path}, which no test names")
        elif b.mark.startswith("pytest.mark.skipif") and reason.startswith("needs a CUDA GPU"):
            compile(b.body, f"{page.name}:{b.line}", "exec")  # complete code, not an excerpt
            if "..." in b.body:
                problems.append(f"line {b.line}: a GPU block must be complete, not elided")
        elif b.info == "python" and not skip:
            continue
        else:
            problems.append(
                f"line {b.line}: ```{b.info} is neither run, nor an include, nor GPU-only "
                f"({reason or 'no reason given'})"
            )
    for e in excerpts(page.read_text(encoding="utf-8")):
        if not covered_by_tests(e.path):
            problems.append(f"line {e.line}: excerpts {e.path}, which no test names")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_include_is_labelled_an_excerpt_and_links_the_whole_file(page):
    text = page.read_text(encoding="utf-8")
    problems = [
        f"line {b.line}: include {b.include['path']} by hand: write <!-- profile-excerpt: "
        f'{b.include["path"]}:{b.include["section"]} "words" --> instead'
        for b in blocks(text)
        if b.include
    ]
    for e in excerpts(text):
        (b,) = blocks(e.rendered())
        if not b.title.startswith(e.path) or "excerpt" not in b.title:
            problems.append(
                f'line {e.line}: title "{b.title}" should name {e.path} and say excerpt'
            )
        links = [m["target"] for m in LINK.finditer(b.after)]
        if "excerpt" not in b.after.lower() or e.path not in links:
            problems.append(f"line {e.line}: no 'An excerpt ... [..]({e.path})' right after it")
    assert not problems, "\n".join(problems)


def test_each_chapter_shows_its_scripts_recipe_exactly_once():
    recipes = {}
    for page in PAGES:
        for e in excerpts(page.read_text(encoding="utf-8")):
            if e.section == "recipe":
                recipes.setdefault(e.path, []).append(page.name)
    scripts = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.py"))
    assert sorted(recipes) == scripts, "every example's recipe is shown somewhere"
    assert all(len(pages) == 1 for pages in recipes.values()), recipes
    chapters = {pages[0] for pages in recipes.values()}
    assert chapters == {
        "naive.md", "inplace.md", "sdpa.md", "custom-kernels.md", "compiled-and-flex.md", "decoding.md",
        "training.md", "context-parallel.md",
    }  # fmt: skip


CLAIM = re.compile(
    r"^\s*<!-- profile-(?P<kind>check|claim): (?P<variant>\w+)(?: (?P<key>[\w.-]+))? -->$", re.M
)


def test_a_chapter_shows_each_claim_in_one_place():
    """A claim renders once on a page: in the explanation where its marker stands, not again in a
    list of all the variant's claims (`profile-check`) before or after it."""
    problems = []
    for page in PAGES:
        marks = list(CLAIM.finditer(page.read_text(encoding="utf-8")))
        listed = {m["variant"] for m in marks if m["kind"] == "check"}
        claims = [(m["variant"], m["key"]) for m in marks if m["kind"] == "claim"]
        problems += [
            f"{page.name}: {v} {k} twice" for v, k in set(claims) if claims.count((v, k)) > 1
        ]
        problems += [f"{page.name}: {v} {k} also in its list" for v, k in claims if v in listed]
    assert not problems, "\n".join(problems)


# --- the commands a page promises output for ------------------------------------------------------


def commands_with_output(page: Path):
    """(copied files, command, expected lines) for each shell block followed by an Output block."""
    found = blocks(page.read_text(encoding="utf-8"))
    for b, nxt in zip(found, found[1:], strict=False):
        if b.lang != "shell" or nxt.lang != "text" or not nxt.title.startswith("Output"):
            continue
        links = [m["target"] for m in LINK.finditer(b.before)] if "copy" in b.before else []
        copy = [t for t in links if not t.endswith(".zip")]  # the same files, zipped
        (command,) = [line for line in b.body.splitlines() if line and not line.startswith("#")]
        yield copy, command, [line for line in nxt.body.splitlines() if line.strip()]


PROMISES = [
    (page, *promise)
    for page in PAGES
    for promise in commands_with_output(page)  # (page, copy, command, expected)
]


def test_the_chapters_promise_output_for_each_script():
    scripts = {command.split()[1].split("/")[-1] for _, _, command, _ in PROMISES}
    assert scripts == {p.name for p in (ROOT / "examples").glob("*.py")}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "copy", "command", "expected"),
    PROMISES,
    ids=[f"{p.name}:{c.split()[1]}" for p, _, c, _ in PROMISES],
)
def test_a_command_prints_what_its_page_promises(page, copy, command, expected, tmp_path):
    argv = command.split()
    assert argv[0] == "python", command
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    mode = "alone"  # test_examples' fence: the copied files, never this checkout's attn
    if copy:
        # "copy both files: examples/x.py and attn/x.py (keep it at attn/x.py beside the script)"
        script, *modules = copy
        assert script.startswith("examples/") and argv[1] == Path(script).name, (copy, command)
        shutil.copy(ROOT / script, tmp_path / argv[1])
        for module in modules:
            (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / module, tmp_path / module)
    else:
        # Run from a checkout with the package installed: the script at its path, attn importable.
        from attn.custom_ops import build_problem

        if "custom_kernel" in argv[1] and build_problem() is not None:
            pytest.skip(f"custom ops cannot be built here: {build_problem()}")
        (tmp_path / argv[1]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / argv[1], tmp_path / argv[1])
        env["PYTHONPATH"] = str(ROOT)
        mode = "installed"
    run = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, str(tmp_path), mode, *argv[1:]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, f"{command}\n{run.stderr[-3000:]}"
    out = run.stdout.splitlines()
    at = 0
    for line in expected:  # each promised line, in order
        hits = [i for i in range(at, len(out)) if out[i].strip() == line.strip()]
        assert hits, (
            f"{page.name}: `{command}` did not print {line!r}; it printed\n{run.stdout[-2000:]}"
        )
        at = hits[0] + 1


# --- the Pages workflow ---------------------------------------------------------------------------


def nox_sessions() -> set[str]:
    """Names of the functions noxfile.py decorates with @nox.session."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(target) == "nox.session":
                    names.add(node.name)
    return names


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on:` key as True
    return data


def steps(data: dict) -> list[dict]:
    return [s for job in data["jobs"].values() for s in job.get("steps", [])]


def test_the_pages_workflow_builds_with_a_nox_session_that_exists():
    data = workflow()
    runs = [s["run"] for s in steps(data) if "run" in s]
    called = {m[1] for r in runs for m in re.finditer(r"nox\b.*?-s\s+(\w+)", r)}
    assert called == {"docs"}, f"the workflow should build with `nox -s docs`, calls {called}"
    assert called <= nox_sessions(), f"noxfile.py has no session {called - nox_sessions()}"
    assert "main" in data["on"]["push"]["branches"]


def test_the_pages_workflow_deploys_what_the_session_builds():
    data = workflow()
    uses = [s["uses"] for s in steps(data) if "uses" in s]
    for action in ("actions/upload-pages-artifact", "actions/deploy-pages"):
        pinned = [u for u in uses if u.split("@")[0] == action]
        assert pinned and all(re.fullmatch(r"[\w/-]+@v\d+", u) for u in pinned), (action, uses)
    assert all(re.fullmatch(r"[\w/-]+@v\d+", u) for u in uses), uses  # every action: a major tag
    upload = next(s for s in steps(data) if s.get("uses", "").startswith("actions/upload-pages"))
    assert upload["with"]["path"] == "site"
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert '"--site-dir", "site"' in noxfile, "the docs session builds into site/"
    assert data["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    deploy = next(
        j
        for j in data["jobs"].values()
        if any("deploy-pages" in s.get("uses", "") for s in j["steps"])
    )
    assert deploy["environment"]["name"] == "github-pages"


def test_the_pages_checkout_keeps_no_token():
    """The build reads profile sets that arrive as pull requests; the checkout's token, kept in
    .git/config by default, would be one snippet include away from a page."""
    checkouts = [s for s in steps(workflow()) if s.get("uses", "").startswith("actions/checkout")]
    assert checkouts and all(s["with"]["persist-credentials"] is False for s in checkouts)


def test_the_pages_build_sets_the_repository_link():
    build = next(s for s in steps(workflow()) if re.search(r"nox .*-s docs", s.get("run", "")))
    assert {"REPO_URL", "EDIT_URI"} <= set(build["env"]), "the site links its repository"
