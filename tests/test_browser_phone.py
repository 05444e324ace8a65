"""The built site on a phone, 390 px wide, in a real browser: no code block scrolls sideways unless
it is folded away in a closed block that says so; no text is drawn under 11 px (inline code, figure
labels scaled as drawn, a screenshot's labels); every picture has its width and height, so the page
keeps their room; and a trace-viewer screenshot opens scrolled to the event it boxes in red.

Reuses test_browser.py's browser, served site and page helpers (Debian's chromium).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (browser and site_url are fixtures)
    OPEN_EVIDENCE,
    PHONE,
    SMALL_SVG_TEXT,
    browser,
    new_context,
    pages_of,
    shot,
    site_url,
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
# Visible code blocks wider than their frame, outside a closed block.
SIDEWAYS_CODE = """() => [...document.querySelectorAll("article pre")]
  .filter((p) => p.getClientRects().length && !p.closest("details:not([open])"))
  .map((p) => p.querySelector("code") || p)
  .filter((c) => c.scrollWidth > c.clientWidth + 1)
  .map((c) => `${c.scrollWidth} > ${c.clientWidth} px: ${c.textContent.trim().slice(0, 50)}`)"""
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


def test_no_code_block_scrolls_sideways_unless_folded_away(built_site, site_url, phone):  # noqa: F811
    wide = {}
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        if found := page.evaluate(SIDEWAYS_CODE):
            wide[path] = found[:3]
        page.close()
    assert not wide, f"code blocks that scroll sideways at {PHONE} px: {wide}"


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


def test_a_timeline_opens_at_the_event_its_chapter_is_about(built_site, site_url, phone):  # noqa: F811
    """The event the screenshot selects, labelled on the timeline where the timeline holds it."""
    from attn.traces.figures.timeline import short_name

    checked, hidden = 0, []
    for path in pages_of(built_site):
        page = open_page(phone, site_url + path)
        for src, seen_from, seen_to, labels in page.evaluate(TIMELINE_LABELS):
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
