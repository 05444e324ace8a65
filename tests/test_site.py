"""The built site: no dead internal link or anchor, and no published artifact that names this machine."""

from __future__ import annotations

import getpass
import gzip
import importlib.util
import json
import os
import re
import socket
import tempfile
import zipfile
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
import tinycss2

from attn import specs
from attn.traces.diagnosis.report import CHAPTERS

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs/hooks"
PROFILES = ROOT / "profiles"  # the work tree's: what a run made here and would be committed
ARTIFACTS = {".svg", ".txt", ".json", ".md"}  # besides the gzip traces
LINKING = {"href", "src"}  # attributes that point at a file or an anchor


class Page(HTMLParser):
    """The ids (anchors) a page defines and the href/src values it uses."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value or "")
            elif name in LINKING and value is not None:
                self.links.append((tag, value))


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def target(site: Path, page: Path, url: str) -> tuple[Path | None, str]:
    """The file an internal URL on `page` points at (None: outside the site) and its fragment."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if not path:
        return page, unquote(parts.fragment)
    base = (
        PurePosixPath("/")
        if path.startswith("/")
        else PurePosixPath("/", *page.parent.relative_to(site).parts)
    )
    resolved: list[str] = []
    for part in (base / path).parts[1:]:
        if part == "..":
            if not resolved:
                return None, ""
            resolved.pop()
        elif part not in (".", ""):
            resolved.append(part)
    file = site.joinpath(*resolved)
    if file.is_dir():
        file = file / "index.html"
    return file, unquote(parts.fragment)


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc)  # http(s):, mailto:, data:, //host/...


THIRD_PARTY = ("trace-viewer",)  # published as fetched (the Catapult viewer's own templates)


def dead_links(site: Path) -> list[str]:
    """Every internal href/src that names a missing file, or a #fragment missing from its page."""
    pages = {
        path: parse(path)
        for path in sorted(site.rglob("*.html"))
        if path.relative_to(site).parts[0] not in THIRD_PARTY
    }
    problems = []
    for path, page in pages.items():
        where = path.relative_to(site).as_posix()
        for tag, url in page.links:
            if is_external(url):
                continue
            file, fragment = target(site, path, url)
            if file is None or not file.is_file():
                problems.append(f"{where}: <{tag}> {url!r} names no file in the site")
            elif fragment and file.suffix == ".html":
                ids = pages[file].ids if file in pages else parse(file).ids
                if fragment not in ids:
                    problems.append(f"{where}: <{tag}> {url!r}: no id {fragment!r} in {file.name}")
    return problems


def test_link_checker_finds_dead_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "img.svg").write_text("<svg/>")
    (tmp_path / "index.html").write_text(
        '<h2 id="here">x</h2><a href="#here">ok</a><a href="a/">ok</a><img src="img.svg">'
        '<a href="https://example.org/missing">external</a><a href="#gone">bad anchor</a>'
        '<a href="a/#top">ok</a><a href="nowhere.html">bad</a><a href="/../../etc/passwd">bad</a>'
    )
    (tmp_path / "a/index.html").write_text(
        '<p id="top"><a href="../index.html#here">ok</a><a href="/img.svg">ok</a>'
        '<a href="../index.html#nope">bad</a>'
    )
    found = dead_links(tmp_path)
    assert len(found) == 4, found
    assert all(bad in "\n".join(found) for bad in ("#gone", "nowhere.html", "passwd", "#nope"))


def test_no_dead_internal_links_or_anchors(built_site):
    problems = dead_links(built_site)
    assert not problems, f"{len(problems)} dead internal links:\n" + "\n".join(problems[:40])


def test_the_files_a_chapter_tells_readers_to_copy_are_published_whole(built_site):
    # Every spec's example script and the sources its chapter excerpts (what sources.py publishes).
    names = {p for s in specs.SPECS for p in (s.example[0], *s.sources)}
    assert {
        "examples/naive_attention.py",
        "attn/naive.py",
        "attn/inplace.py",
        "attn/sdpa.py",
    } <= names
    for name in sorted(names):
        published = built_site / name
        assert published.is_file(), name
        assert published.read_bytes() == (ROOT / name).read_bytes(), f"{name} is not the repo's"


def test_each_chapter_links_a_zip_of_its_example_the_way_the_readme_copies_it(built_site):
    zips = sorted(built_site.glob("examples/*.zip"))
    assert len(zips) >= 7, zips  # every example but the custom kernels' (it needs the package)
    for z in zips:
        names = zipfile.ZipFile(z).namelist()
        assert names[0] == z.stem + ".py" and all(n.startswith("attn/") for n in names[1:]), names
    linked = {
        m for page in built_site.glob("*/index.html")
        for m in re.findall(r'href="\.\./examples/(\w+\.zip)"', page.read_text(encoding="utf-8"))
    }  # fmt: skip
    assert linked == {z.name for z in zips}


def test_the_site_publishes_the_package_as_a_wheel_the_notebook_installs(built_site):
    """A reader without a checkout gets attn from the site: the notebook links the wheel, and the
    wheel holds the package, its kernel sources and the viewer's page."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    wheel = built_site / "dist" / f"attention_profiled-{version}-py3-none-any.whl"
    assert wheel.is_file()
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "attn/specs/__init__.py",
        "attn/specs/training.py",
        "attn/_csrc/ops.cpp",
        "attn/profiling/trace_viewer/index.html",
    } <= names
    page = (built_site / "notebooks/profile-your-own-attention/index.html").read_text()
    assert f"../../dist/{wheel.name}" in page  # the link, relative to the notebook's page


def test_the_site_has_the_pages_the_links_point_at(built_site):
    # Guard the link check against checking nothing: the chapters and the notebook are there.
    for page in ("naive", "sdpa", "notebooks/profile-your-own-attention"):
        assert (built_site / page / "index.html").is_file(), page
    assert (
        built_site / "notebooks/profile-your-own-attention/profile-your-own-attention.ipynb"
    ).is_file()


# --- the notebook page -----------------------------------------------------------------------------

NOTEBOOK = "notebooks/profile-your-own-attention/index.html"
# The page once held 732 KB, 595 KB of it JupyterLab's CSS inlined; without it, 129 KB (its
# timeline and code are most of that). Room for more cells, not for the styles to come back.
NOTEBOOK_PAGE_BYTES = 256 * 1024
NOTEBOOK_CSS_BYTES = 128 * 1024  # the notebook styles the pages can use: 51 KB of JupyterLab's 590
INLINE_STYLE_BYTES = 4 * 1024  # Material's own inline styles take under 1 KB


class Tables(HTMLParser):
    """Each table of a page as rows of cell texts, the header row first."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None
        self.hrefs: dict[str, str] = {}  # a cell's text: the link it is, where it is one
        self.href: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a" and self.cell is not None:
            self.href = dict(attrs).get("href")
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            text = "".join(self.cell).strip()
            self.tables[-1][-1].append(text)
            if self.href is not None:
                self.hrefs[text] = self.href
            self.cell = self.href = None


def test_the_notebook_shows_each_finding_with_the_chapter_that_teaches_its_fix(built_site):
    """The diagnosis the notebook shows (diagnose as a reader calls it, in a notebook) names the
    chapter of every finding by its title, linked to that chapter's page of the site."""
    tables = Tables()
    tables.feed((built_site / NOTEBOOK).read_text(encoding="utf-8"))
    findings = [t for t in tables.tables if t and t[0][:3] == ["finding", "count", "chapter"]]
    rows = [row for table in findings for row in table[1:]]
    assert rows, "the notebook page shows no findings table"
    for kind, _, title, *_ in rows:
        page = next(p for p, t in CHAPTERS.items() if t == title)  # a title of the nav's
        assert (ROOT / "docs" / page).is_file(), (kind, page)
        file, _ = target(built_site, built_site / NOTEBOOK, tables.hrefs[title])
        assert file == built_site / page.removesuffix(".md") / "index.html", (kind, file)


def test_the_notebook_page_links_its_styles_instead_of_inlining_them(built_site):
    """mkdocs-jupyter inlines JupyterLab's CSS in each notebook page; the notebook_styles hook
    publishes the rules the pages use once and links them. No page inlines big styles again."""
    page = (built_site / NOTEBOOK).read_text(encoding="utf-8")
    assert '<link rel="stylesheet" href="../../stylesheets/notebooks.css">' in page
    css = built_site / "stylesheets/notebooks.css"
    assert ".jp-OutputArea-output" in css.read_text(encoding="utf-8")  # the rules the page uses
    assert css.stat().st_size < NOTEBOOK_CSS_BYTES, css.stat().st_size
    assert (built_site / NOTEBOOK).stat().st_size < NOTEBOOK_PAGE_BYTES
    pages = [  # the published trace viewer is a tool the pages open, with styles of its own
        p
        for p in built_site.rglob("*.html")
        if p.relative_to(built_site).parts[0] != "trace-viewer"
    ]
    assert len(pages) > 10
    inline = {
        f"{p.relative_to(built_site)}: {len(m.encode())} bytes"
        for p in pages
        for m in re.findall(r"<style[^>]*>(.*?)</style>", p.read_text(encoding="utf-8"), re.S)
        if len(m.encode()) > INLINE_STYLE_BYTES
    }
    assert not inline, sorted(inline)


def test_the_notebook_styles_keep_the_rules_a_page_can_match():
    spec = importlib.util.spec_from_file_location("notebook_styles", HOOKS / "notebook_styles.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook._classes.update({"jupyter-wrapper", "jp-Cell"})
    css = """.jupyter-wrapper .jp-Cell{a:1}
.jupyter-wrapper .jp-Toolbar{a:2}
.jupyter-wrapper .jp-Toolbar,.jupyter-wrapper .jp-Cell:not(.jp-mod-active){a:3}
.jupyter-wrapper .md-typeset__scrollwrap{a:4}
.jupyter-wrapper :root{a:5}
@media (max-width:10px){.jupyter-wrapper .jp-Toolbar{a:6}.jp-Cell::before{a:7}}
@media print{.jp-Toolbar{a:8}}
@keyframes spin{to{a:9}}"""
    kept = "".join(hook.kept(tinycss2.parse_stylesheet(css, True, True)))
    assert re.findall(r"a:(\d)", kept) == ["1", "3", "4", "7", "9"], kept


# --- privacy ----------------------------------------------------------------------------------


def private_strings() -> tuple[list[str], list[str]]:
    """(local paths that must not appear anywhere, names that must not appear as whole words)."""
    paths = {str(Path.home()), tempfile.gettempdir(), str(ROOT), str(Path.cwd())}
    names = {socket.gethostname(), os.environ.get("USER", "")}
    try:
        names.add(getpass.getuser())
    except (KeyError, OSError):
        pass
    return sorted(p for p in paths if len(p) > 1), sorted(n for n in names if n)


def leaks(text: str, paths: list[str], names: list[str]) -> list[str]:
    found = [f"path {p!r}" for p in paths if p in text]
    for name in names:  # as scrub.py redacts them: whole words only ("dev" may stand in "device")
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text):
            found.append(f"name {name!r}")
    return found


def has_key(data, key: str) -> bool:
    if isinstance(data, dict):
        return key in data or any(has_key(v, key) for v in data.values())
    if isinstance(data, list):
        return any(has_key(v, key) for v in data)
    return False


def published(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and (p.name.endswith(".json.gz") or p.suffix in ARTIFACTS)
    )


def artifact_problems(path: Path, paths: list[str], names: list[str]) -> list[str]:
    if path.name.endswith(".json.gz"):
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        trace = json.loads(text)
        problems = ["a host_name key"] if has_key(trace, "host_name") else []
        if "traceEvents" not in trace:
            problems.append("no traceEvents: not a Chrome trace")
    else:
        text, problems = path.read_text(encoding="utf-8"), []
    return problems + leaks(text, paths, names)


def test_privacy_check_catches_leaks(tmp_path):
    (tmp_path / "trace.json.gz").write_bytes(
        gzip.compress(
            json.dumps({"traceEvents": [], "deviceProperties": [{"host_name": "x"}]}).encode()
        )
    )
    (tmp_path / "table.txt").write_text("run by myhost in /home/me/src")
    (tmp_path / "ok.md").write_text("myhosts, not-myhost-here and devices on a host")
    found = {p.name: artifact_problems(p, ["/home/me"], ["myhost"]) for p in published(tmp_path)}
    assert found == {
        "ok.md": [],
        "table.txt": ["path '/home/me'", "name 'myhost'"],
        "trace.json.gz": ["a host_name key"],
    }


@pytest.mark.parametrize("where", ["profiles", "site"])
def test_published_artifacts_name_no_host_user_or_local_path(where, built_site):
    # In the site: the artifacts the hook published, and any trace wherever it is.
    folder = PROFILES if where == "profiles" else built_site
    files = published(PROFILES) if where == "profiles" else published(built_site / "profiles")
    files += [p for p in built_site.rglob("*.json.gz") if where == "site" and p not in files]
    assert any(p.name == "trace.json.gz" for p in files), f"no trace under {folder}"
    paths, names = private_strings()
    problems = [
        f"{p.relative_to(folder)}: {problem}"
        for p in files
        for problem in artifact_problems(p, paths, names)
    ]
    assert not problems, "\n".join(problems[:40])


def test_built_pages_name_no_local_path(built_site):
    # The notebook page is executed during the build: its outputs must not show where it ran.
    # Prose may say "root" or "/tmp/p" in an example command, so only exact local folders count.
    paths = [str(Path.home()) + "/", str(ROOT), str(built_site.parent), "/attn-notebook-"]
    found = [
        f"{p.relative_to(built_site)}: {problem}"
        for p in sorted(built_site.rglob("*"))
        if p.suffix in {".html", ".json", ".xml"}
        for problem in leaks(p.read_text(encoding="utf-8"), paths, [])
    ]
    assert not found, "\n".join(found)


# A word a reader searches for, and the page that teaches it.
TAUGHT_AT = {
    "masked_fill_": "inplace/",
    "ring attention": "context-parallel/",
    "online softmax": "custom-kernels/",
    "group_by_input_shape": "reading-a-profile/",
}


@pytest.mark.parametrize("word", list(TAUGHT_AT))
def test_the_search_index_tags_only_the_teaching_page_with_its_word(built_site, word):
    """Material's search weighs a tag far above a title or the text (its `fields` boosts): the
    word is a tag of the teaching page's entries, of no other page's, and the page's text uses it.
    (The ranking itself, in Material's own search, is checked in test_browser.py.)"""
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    boost = {name: field["boost"] for name, field in index["config"]["fields"].items()}
    assert boost["tags"] > boost["title"] > boost["text"], boost
    tagged = {d["location"].split("#")[0] for d in index["docs"] if word in d.get("tags", [])}
    assert tagged == {TAUGHT_AT[word]}, tagged
    text = " ".join(d["text"] for d in index["docs"] if d["location"].startswith(TAUGHT_AT[word]))
    assert word.lower() in text.lower(), f"{TAUGHT_AT[word]} does not use {word!r}"
