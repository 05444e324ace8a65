"""Guess first, in a real browser: before the reader answers or skips a chapter's question, its
measured answer is nowhere on screen (not in the evidence, the checks, a table, a claim, nor in a
sentence above the question), the evidence of its section is hidden, and nothing outside its own
section is (the rest of the chapter reads as it is); after answering, and after skipping, the
values show.

The values are worked out here from the committed sets' summary.json, as a reader would, in the
forms the pages print them: a ratio to two decimals, bytes in MiB to one, "63 ATen ops", the
reason a variant did not run, and what each claim of the question's variants observed (and, for
the ranks, as the example prints them).
Screenshots land in test-artifacts/browser/ (gitignored): guess-first-PAGE-WIDTH-STATE.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import test_browser
from committed import PROFILES  # the committed sets, as HEAD holds them
from test_browser import DESKTOP, PHONE, new_context, shot

browser, site_url = test_browser.browser, test_browser.site_url  # its fixtures, for these tests

ROOT = Path(__file__).resolve().parents[1]
SETS = ("cpu-intel-xeon-family-6-model-167", "cpu-amd-epyc")  # the committed sets
GUESS = re.compile(r"^<!-- profile-guess: (\S+) ([^>]+?) -->", re.M)
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def answer_values(kind: str, summaries: list[dict]) -> list[str]:
    """What the page prints of the measured answer to a question of that kind."""
    s = summaries[0]
    if not all(x.get("available") for x in summaries):
        return [s["reason"].strip().rstrip(".")] if kind == "runs-here" else []
    if kind == "score-matrices":
        shape = s["shape"]
        one = DTYPE_BYTES[s["dtype"]] * shape["batch"] * shape["heads"]
        one *= shape["seq_q"] * shape["seq_k"]
        return [f"{s['peak_memory_bytes'] / one:.2f}", mib(s["peak_memory_bytes"])]
    if kind == "top-ops":
        return [", ".join(s["ops"])]
    if kind in ("aten-ops", "fewer-ops", "runs-here"):
        return [f"{x['ops_per_forward']:g} ATen ops" for x in summaries]
    if kind == "peak-mib":
        return [mib(s["peak_memory_bytes"])]
    if kind == "saved-mib":
        return [mib(s["backward"]["saved_for_backward_bytes"])]
    if kind == "step-peak-mib":
        return [mib(s["backward"]["peak_memory_step_bytes"])]
    if kind in ("busiest-rank", "rank0-blocks"):
        return [", ".join(f"rank {r['rank']} {r['blocks']:g} blocks" for r in s["ranks"])]
    if kind in ("sends-per-rank", "send-mib"):
        return [f"{n:,} bytes" for n in {b for r in s["ranks"] for b in r["bytes_per_send"]}]
    raise AssertionError(f"a guess of a kind this test does not know: {kind!r}")


UNPINNED = {"unpinned-mask": "bool mask", "unpinned-dropout": "dropout"}


def dispatch_values(kind: str, slug: str) -> list[str]:
    """A question answered from the dispatch figure: which backend ran each case of its inputs,
    as the answer prints it ("flash in every case (8)")."""
    from attn.traces.claims.dispatch_tables import cases_text, short

    path = PROFILES / slug / "dispatch.json"
    if kind not in UNPINNED or not path.is_file():
        return []
    rows = [r for r in json.loads(path.read_text()) if r.get("inputs") == UNPINNED[kind]]
    backends = {short(r.get("backend")) for r in rows}
    return [f"{b} in {cases_text(rows, [r for r in rows if short(r.get('backend')) == b])}"
            for b in sorted(backends)]  # fmt: skip


def printed_values(summaries: list[dict]) -> list[str]:
    """What an example prints of the same counts (a page may quote its output)."""
    ranks = summaries[0].get("ranks") or []
    sizes = {b for r in ranks for b in r.get("bytes_per_send") or []}
    blocks = [f"rank {r['rank']}: blocks {r['blocks']:g}" for r in ranks if "blocks" in r]
    return blocks + [f"{n} bytes" for n in sizes]


class Question:
    """One question of a page: per committed set, the values its answer prints, and what the
    claims of its variants observed."""

    def __init__(self, kind: str, names: list[str]) -> None:
        self.kind, self.names = kind, names
        self.values: dict[str, list[str]] = {}
        self.observed: set[str] = set()
        self.printed: set[str] = set()
        for slug in SETS:
            if kind in UNPINNED:  # answered from the set's figure, not its variants' summaries
                if values := dispatch_values(kind, slug):  # a set made before the figure has none
                    self.values[slug] = values
                continue
            paths = [PROFILES / slug / n / "summary.json" for n in names]
            if not all(p.is_file() for p in paths):
                continue
            summaries = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
            if kind != "runs-here" and not all(x.get("available") for x in summaries):
                continue  # a set that did not run it has no answer to show (runs-here says why)
            self.values[slug] = answer_values(kind, summaries)
            self.printed |= set(printed_values(summaries) if summaries[0].get("available") else [])
            self.observed |= {
                c["observed"]
                for s in summaries
                for c in s.get("claims") or []
                if len(c.get("observed") or "") >= 10
            }

    def __repr__(self) -> str:
        return f"{self.kind} {' '.join(self.names)}"

    def answers(self) -> set[str]:
        """The measured answer, as the page and the examples print it."""
        return {v for values in self.values.values() for v in values} | self.printed

    def needles(self) -> set[str]:
        return self.answers() | self.observed


def questions(page: str) -> list[Question]:
    text = (ROOT / "docs" / f"{page}.md").read_text(encoding="utf-8")
    return [Question(m[1], m[2].split()) for m in GUESS.finditer(text)]


PAGES = sorted(
    p.stem
    for p in (ROOT / "docs").glob("*.md")
    if GUESS.search(p.read_text(encoding="utf-8")) and any(q.values for q in questions(p.stem))
)


def found(text: str, needle: str) -> bool:
    """The needle in the text, a number not read as part of a longer one (2.06 is not 12.06)."""
    pattern = re.escape(needle)
    pattern = (r"(?<![\d.])" if needle[0].isdigit() else "") + pattern
    pattern += r"(?![\d])" if needle[-1].isdigit() else ""
    return re.search(pattern, text, re.I) is not None


# The text of the page a reader can see (closed blocks, tabs not shown, hidden parts left out), and
# the pictures of a set that are drawn.
SHOWN_TEXT = "() => document.body.innerText"
ALL_TEXT = "() => document.querySelector('article').textContent"
SHOWN_PICTURES = """() => [...document.querySelectorAll('article img[src*="profiles/"]')]
  .filter((i) => i.getClientRects().length).map((i) => i.getAttribute("src"))"""
# Each question group (a guess box, or the tab set that holds one box per set).
GROUPS = """() => [...new Set([...document.querySelectorAll(".attn-guess")]
  .map((b) => b.closest(".tabbed-set") || b))].length"""
# What a page hides before its questions are answered, against each question's own section: the
# parts of the article after the question up to the next heading of its section's level or above
# (worked out here from the headings, not from guess.js). Returns the hidden parts outside every
# question's section, and the evidence blocks inside one that are not hidden.
SECTIONS = """() => {
  const article = document.querySelector("article");
  const parts = [...article.children];
  const level = (el) => /^H([1-6])$/.exec(el.tagName) && Number(el.tagName[1]);
  const inside = new Set();
  for (const box of document.querySelectorAll(".attn-guess")) {
    let top = box.closest(".tabbed-set") || box;
    while (top.parentElement !== article) top = top.parentElement;
    const at = parts.indexOf(top);
    const above = parts.slice(0, at).reverse().find(level);
    const own = above ? level(above) : 1;
    for (const part of parts.slice(at + 1)) {
      if (level(part) && level(part) <= own) break;
      inside.add(part);
    }
  }
  const name = (el) => (el.id || el.textContent.trim()).slice(0, 50);
  return {
    outside: parts.filter((p) => p.matches(".attn-unanswered") && !inside.has(p)).map(name),
    shown: [...inside].filter((p) => !p.matches(".attn-unanswered") && !p.matches(".attn-guess-waiting"))
      .filter((p) => p.matches("details.evidence") || p.querySelector("details.evidence")).map(name),
  };
}"""


def open_page(context, url: str):
    page = context.new_page()
    context.problems.watch(page)
    page.goto(url, wait_until="load")
    page.wait_for_function("document.querySelector('.attn-guess form:not([hidden])')")
    return page


def answer_all(page, how: str) -> None:
    """Answer (with a guess that may be wrong) or skip every question, in page order."""
    for n in range(page.locator(".attn-guess:visible").count()):
        box = page.locator(".attn-guess:visible").nth(n)
        box.scroll_into_view_if_needed()
        if how == "skip":
            box.get_by_role("button", name="Skip, show me").click()
            continue
        if box.locator("input[type=number]").count():
            box.locator("input[type=number]").fill("1")
        else:
            box.locator("input[type=radio]").first.check()
        box.get_by_role("button", name="Check").click()


def test_every_chapter_with_a_question_is_checked():
    assert {"naive", "sdpa", "reading-a-profile", "context-parallel"} <= set(PAGES), PAGES
    for page in PAGES:
        for q in questions(page):
            assert q.values and all(q.values.values()), f"{page}: {q}: no value to look for"


def test_the_search_tells_a_number_from_part_of_another():
    assert found("peak 132.0 MiB = 2.06 × one", "2.06")
    assert found("The Efficient backend has no CPU kernel", "the efficient backend has no CPU")
    assert not found("12.06 ms", "2.06") and not found("2.061", "2.06")
    assert not found("10 ATen ops", "0 ATen ops")


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
@pytest.mark.parametrize("path", PAGES)
def test_no_measured_value_shows_before_the_reader_answers(site_url, browser, path, width):
    asked = questions(path)
    context = new_context(browser, width)
    try:
        page = open_page(context, f"{site_url}{path}/")
        assert page.evaluate(GROUPS) >= 1, f"/{path}/: no guess box"
        written = page.evaluate(ALL_TEXT)
        for q in asked:  # the check looks for what the page holds
            assert any(found(written, v) for v in q.needles()), f"/{path}/: {q}: nothing to find"
        shown = page.evaluate(SHOWN_TEXT)
        seen = sorted({f"{q}: {v!r}" for q in asked for v in q.answers() if found(shown, v)})
        assert not seen, f"/{path}/ at {width} px shows measured values before a guess: {seen}"
        opened = page.locator(".attn-guess-answer:visible").count()
        assert not opened, f"/{path}/: {opened} measured answers can be opened before a guess"
        sections = page.evaluate(SECTIONS)
        assert not sections["outside"], (
            f"/{path}/: hidden outside every question's section: {sections['outside']}"
        )
        assert not sections["shown"], (
            f"/{path}/: evidence shown before a guess: {sections['shown']}"
        )
        shot(page, f"guess-first-{path}-{width}-before", full_page=True)
        for how in ("answer", "skip"):
            page.close()
            page = open_page(context, f"{site_url}{path}/")
            answer_all(page, how)
            shown = page.evaluate(SHOWN_TEXT)
            for q in asked:  # the answer of one set at least, and what its claims observed
                assert any(all(found(shown, v) for v in values) for values in q.values.values()), (
                    f"/{path}/ after {how}: {q}: the measured answer does not show"
                )
                observed = [v for v in q.observed if found(written, v)]
                assert not observed or any(found(shown, v) for v in observed), (
                    f"/{path}/ after {how}: {q}: no checked claim shows"
                )
            if page.locator('article img[src*="profiles/"]').count():
                assert page.evaluate(SHOWN_PICTURES), f"/{path}/ after {how}: no picture shows"
            shot(page, f"guess-first-{path}-{width}-{how}", full_page=True)
        page.close()
        scripts = [e for e in context.problems.errors if e.startswith("page error")]
        assert not scripts, "\n".join(scripts)
    finally:
        context.close()


def test_answering_one_question_shows_only_what_follows_it(site_url, browser):
    """On a page of several questions, answering the first shows its evidence and checks; what
    the later questions measured stays hidden until they are answered."""
    first, *later_questions = questions("sdpa")
    context = new_context(browser)
    try:
        page = open_page(context, f"{site_url}sdpa/")
        page.locator(".attn-guess:visible").first.get_by_role(
            "button", name="Skip, show me"
        ).click()
        shown = page.evaluate(SHOWN_TEXT)
        assert any(found(shown, v) for v in first.observed), (
            "the first question's checks are hidden"
        )
        later = [v for q in later_questions for v in q.needles() if found(shown, v)]
        assert not later, f"answering the first question shows what later ones measured: {later}"
        assert page.get_by_role("heading", name=re.compile("^cuDNN")).is_visible()
    finally:
        context.close()


def test_a_link_to_a_hidden_heading_shows_it(site_url, browser):
    """The table of contents and search results link to headings in what a question hides."""
    context = new_context(browser)
    try:
        page = open_page(context, f"{site_url}naive/#the-evidence")
        heading = page.locator("#the-evidence")
        heading.wait_for(state="visible")
        page.goto(f"{site_url}naive/")
        page.wait_for_function("document.querySelector('.attn-guess form:not([hidden])')")
        assert not page.locator("#check-your-guess").is_visible()
        page.locator(".md-sidebar--secondary a[href='#check-your-guess']").first.click()
        page.locator("#check-your-guess").wait_for(state="visible")
    finally:
        context.close()
