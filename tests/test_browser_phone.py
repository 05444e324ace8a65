"""The built site on a phone, 390 px wide, in a real browser: no code token is split across lines
(there, and in a page column), the page never scrolls sideways, no copy button covers code; no
text is drawn under 11 px (inline code, figure labels scaled as drawn, a screenshot's labels);
every picture has its width and height, so the page keeps their room; a trace-viewer screenshot
opens scrolled to the event it boxes in red, and a figure keeps its legend and y axis in view.

Reuses test_browser.py's browser, served site and page helpers (Debian's chromium).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (browser and site_url are fixtures)
    DESKTOP,
    OPEN_EVIDENCE,
    PHONE,
    SMALL_SVG_TEXT,
    browser,
    new_context,
    pages_of,
    shot,
    site_url,
    tab_titles,
)

# The trace viewer draws a slice's label at 10 px (Catapult's fontSize for slice titles); the
# screenshots are taken at device scale 2, so their labels are 10 px where a picture is shown at half
# its pixels.
VIEWER_LABEL_PX, SHOT_SCALE = 10, 2

# Every closed block of the page opened, but those that hold text too wide for a phone (the page
# folds those away on purpose); then a moment for the page's scripts to measure what became visible.
OPEN_ALL_BUT_WIDE = """() => new Promise((done) => {
  document.querySelectorAll("article details:not(.attn-wide)").forEach((d) => { d.open = true; });
  requestAnimationFrame(() => requestAnimationFrame(done));
})"""
# Each code token (a run of non-spaces of a code line, across the highlighter's spans) drawn on two
# lines: `record_function("attn_fwd"):` broken into `record_function(` and `"attn_fwd"):`, an
# identifier cut in the middle. Code blocks and notebook cells, shown and outside a closed block.
SPLIT_TOKENS = """() => {
  const split = [];
  const blocks = [...document.querySelectorAll("article pre > code, article .jp-InputArea pre")]
    .filter((c) => c.getClientRects().length && !c.closest("details:not([open])"));
  for (const code of blocks) {
    const lines = [...code.querySelectorAll(':scope > span[id^="__span"]')];
    for (const line of lines.length ? lines : [code]) {
      const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT), nodes = [];
      let text = "";
      while (walker.nextNode()) { nodes.push([walker.currentNode, text.length]); text += walker.currentNode.nodeValue; }
      const at = (i) => nodes.findLast(([, start]) => start <= i);
      for (const m of text.matchAll(/\\S+/g)) {
        const [first, from] = at(m.index), [last, to] = at(m.index + m[0].length - 1);
        const range = document.createRange();
        range.setStart(first, m.index - from);
        range.setEnd(last, m.index + m[0].length - to);
        const rects = [...range.getClientRects()].filter((r) => r.width > 0);
        if (!rects.length) continue;
        const tops = rects.map((r) => r.top), height = Math.min(...rects.map((r) => r.height));
        if (Math.max(...tops) - Math.min(...tops) > height / 2) split.push(m[0].slice(0, 60));
      }
    }
  }
  return split;
}"""
# How far the page itself scrolls sideways (a code block scrolls inside itself on a phone).
PAGE_SIDEWAYS = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
# Each copy button, and the characters of its code block it is drawn over: more than 2 px of a
# character's box both ways (a glyph's box reaches above its ink, into the line above).
COVERED_TEXT = """() => {
  const covered = [];
  for (const nav of document.querySelectorAll("article .md-code__nav, article .jupyter-wrapper button")) {
    const b = nav.getBoundingClientRect();
    if (!b.width || nav.closest("details:not([open])")) continue;
    const block = nav.closest("pre, .jp-Cell") || nav.parentElement;
    const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (nav.contains(node)) continue;
      for (const m of node.nodeValue.matchAll(/\\S/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + 1);
        const over = [...range.getClientRects()].some((r) =>
          Math.min(r.right, b.right) - Math.max(r.left, b.left) > 2 &&
          Math.min(r.bottom, b.bottom) - Math.max(r.top, b.top) > 2);
        if (over) { covered.push(node.nodeValue.trim().slice(0, 40)); break; }
      }
    }
  }
  return covered;
}"""
# Visible elements holding text of their own drawn under 11 px.
SMALL_TEXT = """() => [...document.querySelectorAll("article *")]
  .filter((e) => e.getClientRects().length && getComputedStyle(e).visibility !== "hidden")
  .filter((e) => [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))
  .filter((e) => parseFloat(getComputedStyle(e).fontSize) < 11)
  .map((e) => `${getComputedStyle(e).fontSize} <${e.tagName.toLowerCase()}>: ${e.textContent.trim().slice(0, 40)}`)"""
# Each shown screenshot: its source, its shown and natural widths.
SHOTS_SHOWN = """() => [...document.querySelectorAll('article img[src$="/viewer.png"]')]
  .filter((i) => i.getClientRects().length)
  .map((i) => [i.getAttribute("src"), i.getBoundingClientRect().width, i.naturalWidth])"""
# Each shown screenshot: its source, and the part of it its frame shows, as fractions of its width.
SHOT_WINDOWS = """() => [...document.querySelectorAll('article img[src$="/viewer.png"]')]
  .filter((i) => i.getClientRects().length).map((i) => {
    const frame = i.closest("p").getBoundingClientRect(), box = i.getBoundingClientRect();
    return [i.getAttribute("src"), (frame.left - box.left) / box.width,
            (frame.right - box.left) / box.width, box.width];
  })"""
IMG = re.compile(r"<img\b[^>]*>", re.I)


@pytest.fixture(scope="module")
def phone(browser):  # noqa: F811
    context = new_context(browser, PHONE)
    yield context
    context.close()


def open_page(context, url: str):
    page = context.new_page()
    page.goto(url, wait_until="load")
    page.evaluate(
        "document.querySelectorAll('img[loading=lazy]').forEach((i) => { i.loading = 'eager'; })"
    )
    page.evaluate(OPEN_EVIDENCE)  # guess first: what a question measured shows once skipped
    page.wait_for_load_state("networkidle")
    page.evaluate(OPEN_ALL_BUT_WIDE)
    return page


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_no_code_token_is_split_across_lines(built_site, site_url, browser, width):  # noqa: F811
    """Code wraps between tokens in a page column and scrolls inside its block on a phone: a
    token is drawn on one line, and the page itself never scrolls sideways."""
    context = new_context(browser, width)
    split, sideways = {}, {}
    try:
        for path in pages_of(built_site):
            page = open_page(context, site_url + path)
            if found := page.evaluate(SPLIT_TOKENS):
                split[path] = found[:5]
            if (extra := page.evaluate(PAGE_SIDEWAYS)) > 0:
                sideways[path] = extra
            page.close()
    finally:
        context.close()
    assert not split, f"code tokens split across lines at {width} px: {split}"
    assert not sideways, (
        f"pages that scroll sideways at {width} px (px past the screen): {sideways}"
    )


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_no_copy_button_covers_code(built_site, site_url, browser, width):  # noqa: F811
    context = new_context(browser, width)
    covered = {}
    try:
        for path in pages_of(built_site):
            page = open_page(context, site_url + path)
            if found := page.evaluate(COVERED_TEXT):
                covered[path] = found[:5]
            page.close()
    finally:
        context.close()
    assert not covered, f"copy buttons drawn over code at {width} px: {covered}"


def test_no_text_is_drawn_under_11_px(built_site, site_url, phone):  # noqa: F811
    small = {}
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        found = page.evaluate(SMALL_TEXT) + page.evaluate(SMALL_SVG_TEXT)
        for src, shown, natural in page.evaluate(SHOTS_SHOWN):
            label = VIEWER_LABEL_PX * shown / (natural / SHOT_SCALE)
            if natural and label < 11:
                found.append(f"{src}: its labels at {label:.1f} px")
        if found:
            small[path] = found[:5]
        page.close()
    assert not small, f"text under 11 px at {PHONE} px: {small}"


def test_every_picture_has_its_width_and_height(built_site):
    unsized = {}
    for path in pages_of(built_site):
        tags = IMG.findall((built_site / path / "index.html").read_text(encoding="utf-8"))
        bare = [t[:90] for t in tags if not ("width=" in t and "height=" in t)]
        if bare:
            unsized[path] = bare
    assert unsized == {}, "pictures with no width and height: the page jumps as they load"


def boxed_event(built_site: Path, src: str) -> tuple[float, float] | None:
    """The boxed event's left and right edges (fractions of the screenshot's width), as the run
    that took the screenshot recorded them: a variant's summary.json, a public trace's diagnosis."""
    folder = built_site.parent / "profiles" / src.split("profiles/", 1)[1].rsplit("/", 1)[0]
    record = folder / ("diagnosis.json" if "/public/" in f"/{src}" else "summary.json")
    mark = (json.loads(record.read_text(encoding="utf-8")).get("viewer") or {}).get("mark")
    return (mark["left"], mark["right"]) if mark else None


def test_a_screenshot_opens_at_the_event_it_boxes(built_site, site_url, phone):  # noqa: F811
    checked, hidden = 0, {}
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        for src, seen_from, seen_to, width in page.evaluate(SHOT_WINDOWS):
            box = boxed_event(built_site, src)
            if box is None:
                continue
            left, right = box
            seen = max(0.0, min(right, seen_to) - max(left, seen_from)) * width
            whole = min(right - left, seen_to - seen_from) * width
            checked += 1
            if seen < whole - 2:
                hidden.setdefault(path, []).append(
                    f"{src}: {seen:.0f} of {whole:.0f} px of the boxed event in view"
                )
        if path == "naive/":
            shot(page, "phone-naive-390")
        page.close()
    assert checked >= 5, f"only {checked} screenshots with a boxed event were shown"
    assert not hidden, f"boxed events off-screen at {PHONE} px: {hidden}"


# Each shown figure against sequence length (scaling, training): the part its frame shows and where
# its two largest sizes' tick labels are, as fractions of its width (matplotlib's SVG: xtick groups).
LARGEST_SIZES = """async () => {
  const found = [];
  for (const img of document.querySelectorAll('article img[src$="/scaling.svg"], article img[src$="/training.svg"]')) {
    if (!img.getClientRects().length) continue;
    const svg = new DOMParser().parseFromString(
      await (await fetch(img.currentSrc || img.src)).text(), "image/svg+xml").documentElement;
    const width = Number(svg.getAttribute("viewBox").split(/[ ,]+/)[2]);
    const ticks = [...new Set([...svg.querySelectorAll('g[id^="xtick"] text')]
      .filter((t) => t.textContent.trim()).map((t) => Number(t.getAttribute("x")) / width))]
      .sort((a, b) => a - b);
    const frame = img.closest("p").getBoundingClientRect(), box = img.getBoundingClientRect();
    found.push([img.getAttribute("src"), (frame.left - box.left) / box.width,
                (frame.right - box.left) / box.width, ticks.slice(-2)]);
  }
  return found;
}"""


def test_a_figure_against_sequence_length_opens_at_its_largest_sizes(built_site, site_url, phone):  # noqa: F811
    checked, missed = 0, []
    for path in ("sdpa/", "at-a-glance/", "training/"):
        page = open_page(phone, site_url + path)
        for src, seen_from, seen_to, largest in page.evaluate(LARGEST_SIZES):
            checked += 1
            if len(largest) < 2 or not all(seen_from <= x <= seen_to for x in largest):
                missed.append(
                    f"/{path} {src}: shows {seen_from:.2f}–{seen_to:.2f}, ticks {largest}"
                )
        page.close()
    assert checked >= 3, f"only {checked} figures against sequence length were shown"
    assert not missed, f"the largest sizes are off-screen at {PHONE} px: {missed}"


# Each shown timeline: the part its frame shows and each label's text and middle, as fractions of
# its width.
TIMELINE_LABELS = """async () => {
  const found = [];
  for (const img of document.querySelectorAll('article img[src$="/timeline.svg"]')) {
    if (!img.getClientRects().length) continue;
    const svg = new DOMParser().parseFromString(
      await (await fetch(img.currentSrc || img.src)).text(), "image/svg+xml").documentElement;
    const width = Number(svg.getAttribute("viewBox").split(/[ ,]+/)[2]);
    const labels = [...svg.querySelectorAll("text")]
      .map((t) => [t.textContent.trim(), Number(t.getAttribute("x")) / width]);
    const frame = img.closest("p").getBoundingClientRect(), box = img.getBoundingClientRect();
    found.push([img.getAttribute("src"), (frame.left - box.left) / box.width,
                (frame.right - box.left) / box.width, labels]);
  }
  return found;
}"""


# Each set's tab in turn: a set with no screenshot (no event selected) may be the first tab.
SHOW_TAB = """(k) => document.querySelectorAll("article .tabbed-set").forEach((set) => {
  const label = set.querySelectorAll(":scope > .tabbed-labels > label")[k];
  if (label) label.click();
})"""


def shown_timelines(page, tabs: int) -> list:
    """TIMELINE_LABELS of the timelines each tab shows, tab by tab."""
    found = []
    for k in range(tabs):
        page.evaluate(SHOW_TAB, k)
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(300)  # narrow-screens.js places a picture once it has a size
        found += page.evaluate(TIMELINE_LABELS)
    return found


def test_a_timeline_opens_at_the_event_its_chapter_is_about(built_site, site_url, phone):  # noqa: F811
    """The event the screenshot selects, labelled on the timeline where the timeline holds it."""
    from attn.traces.figures.timeline import short_name

    checked, hidden = 0, []
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        for src, seen_from, seen_to, labels in shown_timelines(page, len(tab_titles(built_site))):
            summary = built_site.parent / "profiles" / src.split("profiles/", 1)[1]
            viewer = json.loads(summary.with_name("summary.json").read_text()).get("viewer") or {}
            name = viewer.get("selected")
            at = [
                x
                for text, x in labels
                if name and (text in (name, short_name(name)) or (
                    text.endswith("…") and short_name(name).startswith(text[:-1])
                ))
            ]  # fmt: skip
            if not at:
                continue  # a training step's timeline shows its forward, the screenshot its backward
            checked += 1
            if not seen_from <= at[0] <= seen_to:
                hidden.append(
                    f"/{path} {src}: {name} at {at[0]:.2f}, shown {seen_from:.2f}–{seen_to:.2f}"
                )
        page.close()
    assert checked >= 5, f"only {checked} timelines labelled their chapter's event"
    assert not hidden, f"the chapter's event is off-screen at {PHONE} px: {hidden}"


# Each shown figure that scrolls sideways (matplotlib's SVG): where its legend and the strip left of
# its plots (the y axis) are, in px of the picture as shown (getBBox of legend_N and of each
# axes_N's patch), the part of it its frame shows, and every block on the page drawn from the same
# picture (its background) outside the frame: what it shows of the picture, and where.
FIGURE_KEYS = """async () => {
  const found = [];
  for (const img of document.querySelectorAll('article img[src*="profiles/"][src$=".svg"]')) {
    const frame = img.closest("p");
    if (!img.getClientRects().length || frame.scrollWidth <= frame.clientWidth + 1) continue;
    const text = await (await fetch(img.src)).text();
    const probe = document.createElement("div");
    probe.style.cssText = "position:absolute;left:-10000px;top:0;visibility:hidden";
    probe.innerHTML = text.slice(text.indexOf("<svg"));
    document.body.appendChild(probe);
    const svg = probe.querySelector("svg");
    const scale = img.getBoundingClientRect().width / Number(svg.getAttribute("viewBox").split(/[ ,]+/)[2]);
    const plots = [...svg.querySelectorAll('g[id^="axes_"] > g[id^="patch_"]:first-of-type > path')]
      .map((p) => p.getBBox().x * scale);
    const legend = svg.querySelector('g[id^="legend_"]');
    const key = legend && legend.getBBox();
    probe.remove();
    const box = img.getBoundingClientRect(), seen = frame.getBoundingClientRect();
    const copies = [...document.querySelectorAll("article *")]
      .filter((e) => !frame.contains(e) && e.getClientRects().length && !e.hidden)
      .filter((e) => getComputedStyle(e).backgroundImage.includes(img.src))
      .map((e) => {
        const r = e.getBoundingClientRect(), at = getComputedStyle(e).backgroundPosition.split(" ");
        return { left: r.left - seen.left, top: r.top - box.top, width: r.width, height: r.height,
                 x: -parseFloat(at[0]), y: -parseFloat(at[1]) };
      });
    found.push({ src: img.getAttribute("src"), from: seen.left - box.left, to: seen.right - box.left,
                 axis: plots.length ? Math.min(...plots) : null,
                 legend: key && key.width ? [key.x * scale, key.y * scale, key.width * scale, key.height * scale] : null,
                 copies });
  }
  return found;
}"""


def key_in_view(figure: dict) -> list[str]:
    """What of a figure's legend and y axis is neither in its frame's view nor drawn again."""
    missing = []
    axis, legend, copies = figure["axis"], figure["legend"], figure["copies"]
    if axis and figure["from"] > 1:  # scrolled past its y axis: a copy of the strip at the left
        held = [c for c in copies if abs(c["left"]) <= 1 and c["x"] <= 1 and c["width"] >= axis - 1]
        if not held:
            missing.append(
                f"its y axis (0–{axis:.0f} px; shows {figure['from']:.0f}–{figure['to']:.0f})"
            )
    if legend:
        x, y, w, h = legend
        if not (figure["from"] <= x and x + w <= figure["to"]):
            drawn = [c for c in copies if c["x"] <= x + 1 and c["y"] <= y + 1
                     and c["x"] + c["width"] >= x + w - 1 and c["y"] + c["height"] >= y + h - 1]  # fmt: skip
            if not drawn:
                missing.append(f"its legend ({x:.0f}–{x + w:.0f} px)")
    return missing


def test_a_figure_that_scrolls_keeps_its_legend_and_y_axis_in_view(built_site, site_url, phone):  # noqa: F811
    checked, missing = 0, {}
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        for figure in page.evaluate(FIGURE_KEYS):
            checked += bool(figure["axis"] or figure["legend"])
            if lost := key_in_view(figure):
                missing[f"/{path} {figure['src']}"] = lost
        if path == "at-a-glance/":
            shot(page, "phone-at-a-glance-figures-390", full_page=True)
        page.close()
    assert checked >= 5, f"only {checked} figures that scroll had a legend or an axis"
    assert not missing, f"figures whose legend or y axis is out of view at {PHONE} px: {missing}"


# Each highlighted line (hl_lines): where Material draws its bar (the line's left edge) against the
# code block's and the line's first character.
HIGHLIGHTS = """() => [...document.querySelectorAll("article pre > code .hll")]
  .filter((h) => h.getClientRects().length).map((h) => {
    const range = document.createRange();
    range.selectNodeContents(h);
    const text = [...range.getClientRects()].find((r) => r.width > 0);
    return [h.textContent.trim().slice(0, 40), h.getBoundingClientRect().left,
            h.closest("code").getBoundingClientRect().left, text ? text.left : null];
  })"""


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_a_highlighted_lines_bar_is_at_the_block_edge(site_url, browser, width):  # noqa: F811
    """Material's bar beside a highlighted line (hl_lines) is drawn at the block's edge, not
    through the line's text."""
    context = new_context(browser, width)
    try:
        page = open_page(context, site_url + "inplace/")
        lines = page.evaluate(HIGHLIGHTS)
        page.close()
    finally:
        context.close()
    assert lines, "In-place masking highlights no line"
    for text, bar, block, first in lines:
        assert abs(bar - block) <= 1 and first is not None and first > bar + 2, (text, bar, block)
