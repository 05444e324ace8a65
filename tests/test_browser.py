"""The built site in a real browser: every page loads cleanly at a desktop and a phone width, text
and buttons are readable in both palettes, tables and pictures fit, tabs switch, search highlights,
timelines zoom, "Open in Perfetto" hands the trace over with Perfetto's postMessage handshake, and
"Open here" shows it in the viewer published with the site.

Uses Debian's chromium (never a browser Playwright downloads) on the site served from localhost.
Screenshots land in test-artifacts/browser/ (gitignored): PAGE-1280.png and PAGE-390.png.
"""

from __future__ import annotations

import base64
import functools
import gzip
import http.server
import json
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e .[test])"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "no chromium on PATH (Debian: apt-get install chromium); .ci/run installs it",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "browser"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Only a guard against hanging: the tests run a worker per core beside other work, where a page
# can take many seconds to settle.
TIMEOUT_MS = 60_000

# A stand-in for ui.perfetto.dev: answers PONG from the second PING on (so the page must retry,
# as it must while the real UI loads) and keeps what the trace message carried.
STUB_PAGE = """<!doctype html><meta charset="utf-8"><title>Perfetto stand-in</title>
<script>
window.pings = 0;
window.received = null;
addEventListener("message", (event) => {
  if (event.data === "PING") {
    window.pings += 1;
    if (window.pings >= 2) event.source.postMessage("PONG", "*");
    return;
  }
  const p = event.data && event.data.perfetto;
  if (!p) return;
  const bytes = new Uint8Array(p.buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  window.received = {
    title: p.title, fileName: p.fileName, isArrayBuffer: p.buffer instanceof ArrayBuffer,
    base64: btoa(binary), origin: event.origin, pings: window.pings,
  };
});
</script><p>stand-in</p>"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` on a free localhost port in a thread; yields the base URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site_url(built_site) -> Iterator[str]:
    yield from serve(built_site)


@pytest.fixture(scope="module")
def perfetto_stub(tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("perfetto_stub")
    (folder / "index.html").write_text(STUB_PAGE, encoding="utf-8")
    yield from serve(folder)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser
        browser.close()


class Problems:
    """What went wrong on a page: script errors, console errors, local loads that failed."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.blocked: list[str] = []  # external requests, refused: there is no network here

    def watch(self, page) -> None:
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("console", self._console)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, msg) -> None:
        if msg.type != "error":
            return
        where = (msg.location or {}).get("url", "")
        if where in self.blocked or any(url in msg.text for url in self.blocked):
            return  # an external resource we refused to fetch: allowed if the page still renders
        self.errors.append(f"console error: {msg.text} ({where})")

    def _failed(self, request) -> None:
        if urlsplit(request.url).hostname in LOCAL_HOSTS:
            self.errors.append(f"failed to load {request.url}: {request.failure}")

    def _response(self, response) -> None:
        if urlsplit(response.url).hostname in LOCAL_HOSTS and response.status >= 400:
            self.errors.append(f"HTTP {response.status} for {response.url}")


DESKTOP, PHONE = 1280, 390


def new_context(browser, width: int = DESKTOP, scheme: str = "light"):
    """A browser context at that width and palette where every request off localhost is refused
    (and recorded)."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    context.set_default_timeout(TIMEOUT_MS)
    problems = Problems()

    def route(route):
        url = route.request.url
        if url.startswith(("http:", "https:")) and urlsplit(url).hostname not in LOCAL_HOSTS:
            problems.blocked.append(url)
            return route.abort("internetdisconnected")
        return route.continue_()

    context.route("**/*", route)
    context.problems = problems
    return context


@pytest.fixture
def context(browser):
    context = new_context(browser)
    yield context
    context.close()


@pytest.fixture
def page(context):
    page = context.new_page()
    context.problems.watch(page)
    return page


def pages_of(site: Path) -> list[str]:
    """Every page of the site as a URL path ('', 'naive/', ...): the 404 page and the published
    trace viewer (a tool the pages open, not a page) left out."""
    return sorted(
        "" if p.parent == site else p.parent.relative_to(site).as_posix() + "/"
        for p in site.rglob("index.html")
        if p.parent.relative_to(site).parts[:1] != ("trace-viewer",)
    )


def shot(page, name: str, **kwargs) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), **kwargs)


# Every <img>'s natural size, decoded from its URL (lazy images in hidden tabs are not loaded yet).
IMAGE_SIZES = """async () => Promise.all([...document.querySelectorAll("article img")].map(async (img) => {
  const probe = new Image();
  probe.src = img.currentSrc || img.src;
  try { await probe.decode(); } catch (e) { return [img.src, 0, 0]; }
  return [img.src, probe.naturalWidth, probe.naturalHeight];
}))"""


# Table cells whose code wraps onto a second line (an identifier broken in the middle).
# A name in a table never breaks in the middle, unless it is long (narrow-screens.js marks those
# and lets them break after their underscores and colons only).
WRAPPED_CODE = """() => [...document.querySelectorAll("article table code:not([data-long])")]
  .filter((code) => code.getClientRects().length > 1)
  .map((code) => code.textContent)"""
UNMARKED_LONG_CODE = """() => [...document.querySelectorAll("article table td code:not([data-long])")]
  .filter((code) => code.textContent.length > 24).map((code) => code.textContent)"""
# Tables whose frame scrolls sideways (a phone shows a wide one as cards instead).
SIDEWAYS_TABLES = """() => [...document.querySelectorAll(".md-typeset__scrollwrap")]
  .filter((w) => w.offsetParent && w.scrollWidth > w.clientWidth + 1)
  .map((w) => w.textContent.trim().replace(/\\s+/g, " ").slice(0, 60))"""
# Code blocks wider than their frame: what is past the edge (a comment, most often) goes unread.
# (A notebook's outputs, tables drawn in characters, scroll instead.)
WIDE_CODE = """() => [...document.querySelectorAll("article pre > code, article .jp-InputArea pre")]
  .filter((c) => c.offsetParent && c.scrollWidth > c.clientWidth + 1)
  .map((c) => `${c.scrollWidth} > ${c.clientWidth} px: ${c.textContent.trim().slice(0, 60)}`)"""
# The smallest text of each SVG figure as drawn: its font size (SVG units) times the picture's
# width on the page over its viewBox's (a notebook's inline timeline too). Figures in tabs not shown
# are left out.
SMALL_SVG_TEXT = """async () => {
  const found = [];
  for (const img of document.querySelectorAll("article img[src$='.svg'], article .jp-RenderedSVG img")) {
    if (!img.offsetParent) continue;
    const svg = new DOMParser().parseFromString(
      await (await fetch(img.currentSrc || img.src)).text(), "image/svg+xml").documentElement;
    const scale = img.getBoundingClientRect().width / Number(svg.getAttribute("viewBox").split(/[ ,]+/)[2]);
    const sizes = [...svg.querySelectorAll("text, tspan")].filter((t) => t.textContent.trim())
      .map((t) => /font-size:\\s*([\\d.]+)px/.exec(t.getAttribute("style") || ""))
      .filter(Boolean).map((m) => parseFloat(m[1]) * scale);
    if (sizes.length && Math.min(...sizes) < 11) {
      found.push(`${img.getAttribute("src")}: ${Math.min(...sizes).toFixed(1)} px`);
    }
  }
  return found;
}"""
# Small print (observed values, lessons, the machine a tab ran on) drawn under 11 px.
SMALL_PRINT = """() => [...document.querySelectorAll("article small, article small *")]
  .filter((e) => e.offsetParent && e.textContent.trim() && parseFloat(getComputedStyle(e).fontSize) < 11)
  .map((e) => `${getComputedStyle(e).fontSize}: ${e.textContent.trim().slice(0, 40)}`)"""
# Pictures that scroll sideways with no note saying so (test_browser_phone.py checks where they open).
SCROLLS_UNSAID = """() => [...document.querySelectorAll('article p > a.glightbox > img[src*="profiles/"]')]
  .map((i) => i.closest("p")).filter((p) => p.offsetParent && p.scrollWidth > p.clientWidth + 1)
  .filter((p) => !(p.nextElementSibling && p.nextElementSibling.matches(".attn-scroll-note")))
  .map((p) => p.querySelector("img").getAttribute("src"))"""
# At a glance's chart, which a phone shows whole: one that scrolls sideways or is cut.
OVERVIEW_CUT = """() => [...document.querySelectorAll('article img[src$="/overview.svg"]')]
  .filter((i) => i.offsetParent).filter((i) => {
    const frame = i.closest("p");
    return frame.scrollWidth > frame.clientWidth + 1 || i.clientWidth < i.naturalWidth - 1;
  }).map((i) => i.getAttribute("src"))"""
# Trace-viewer screenshots (taken at device scale 2) shown at under half their pixels.
SHRUNK_SHOTS = """() => [...document.querySelectorAll('article img[src$="/viewer.png"]')]
  .filter((i) => i.offsetParent && i.naturalWidth && 2 * i.clientWidth < i.naturalWidth)
  .map((i) => i.getAttribute("src"))"""

# trace-viewer.js has asked whether the viewer is published, and had its answer.
SETTLED = "document.documentElement.hasAttribute('data-trace-viewer')"


# What follows a guess box (the evidence, the checks, figures) is hidden, and the evidence closed,
# until the reader answers or skips: the checks below skip every question, and look at it.
OPEN_EVIDENCE = "document.querySelectorAll('.attn-guess [data-skip]').forEach((b) => b.click())"


# Every closed block of a page (evidence, answers, a figure's table): the checks below look in them.
OPEN_ALL = (
    OPEN_EVIDENCE
    + "; document.querySelectorAll('article details').forEach((d) => { d.open = true; })"
)


def open_settled(context, url: str):
    page = context.new_page()
    context.problems.watch(page)
    page.goto(url, wait_until="load")
    page.evaluate(OPEN_ALL)
    page.wait_for_load_state("networkidle")
    page.wait_for_function(SETTLED)
    return page


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_every_page_loads_cleanly_and_its_images_have_a_size(built_site, site_url, browser, width):
    urls = pages_of(built_site)
    assert len(urls) >= 5, urls
    context = new_context(browser, width)
    images = 0
    try:
        for path in urls:
            page = open_settled(context, site_url + path)
            assert page.locator("article h1").count() >= 1, f"/{path}: no heading: did it render?"
            sizes = page.evaluate(IMAGE_SIZES)
            empty = [src for src, w, h in sizes if not (w and h)]
            assert not empty, f"/{path}: images with no natural size: {empty}"
            images += len(sizes)
            if width == DESKTOP:
                wrapped = page.evaluate(WRAPPED_CODE)
                assert not wrapped, f"/{path}: table code broken across lines: {wrapped}"
                wide = page.evaluate(WIDE_CODE)
                assert not wide, f"/{path}: code wider than its block: {wide}"
            assert not page.evaluate(UNMARKED_LONG_CODE), f"/{path}: a long name cannot break"
            sideways = page.evaluate(SIDEWAYS_TABLES)
            assert not sideways, f"/{path} at {width} px: tables scroll sideways: {sideways}"
            small = page.evaluate(SMALL_SVG_TEXT)
            assert not small, f"/{path} at {width} px: figure text under 11 px: {small}"
            small = page.evaluate(SMALL_PRINT)
            assert not small, f"/{path} at {width} px: small print under 11 px: {small[:5]}"
            if width == PHONE:
                cut = page.evaluate(OVERVIEW_CUT)
                assert not cut, f"/{path}: At a glance's chart does not fit a phone: {cut}"
                unsaid = page.evaluate(SCROLLS_UNSAID)
                assert not unsaid, f"/{path}: pictures scroll sideways and do not say so: {unsaid}"
            shrunk = page.evaluate(SHRUNK_SHOTS)
            assert not shrunk, f"/{path}: viewer screenshots under half size: {shrunk}"
            shot(page, f"{(path.strip('/') or 'index').replace('/', '-')}-{width}", full_page=True)
            page.close()
            assert not context.problems.errors, f"/{path}:\n" + "\n".join(context.problems.errors)
    finally:
        context.close()
    assert images > 0, "no page had an image"


# --- guess first ----------------------------------------------------------------------------------

GUESS_PAGES = [  # every chapter with a guess box
    "reading-a-profile/", "naive/", "inplace/", "sdpa/", "custom-kernels/",
    "compiled-and-flex/", "decoding/", "training/",
]  # fmt: skip
# Each question's group (its tab set) and the evidence blocks after it, up to the next question.
EVIDENCE_OF = """(n) => {
  const group = (el) => el.closest(".tabbed-set") || el;
  const items = [...document.querySelectorAll(".attn-guess, details.evidence")];
  const boxes = [...new Set(items.filter((i) => i.matches(".attn-guess")).map(group))];
  const mine = boxes[n], next = boxes[n + 1];
  const from = items.findIndex((i) => group(i) === mine);
  const to = next ? items.findIndex((i) => group(i) === next) : items.length;
  return { groups: boxes.length,
           open: items.slice(from, to).filter((i) => i.matches("details")).map((d) => d.open) };
}"""


def score_matrices(summary: dict) -> str:
    """The naive chapter's answer, worked out here from its summary.json as a reader would."""
    s = summary["shape"]
    one = {"float32": 4, "bfloat16": 2}[summary["dtype"]] * s["batch"] * s["heads"]
    return f"{summary['peak_memory_bytes'] / (one * s['seq_q'] * s['seq_k']):.2f}"


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_answering_a_guess_opens_the_evidence_beside_the_measured_value(
    built_site, site_url, browser, width
):
    context = new_context(browser, width)
    try:
        for path in GUESS_PAGES:
            page = context.new_page()
            context.problems.watch(page)
            page.goto(site_url + path)
            groups = page.evaluate(EVIDENCE_OF, 0)["groups"]
            assert groups >= 1, f"/{path}: no guess box"
            for n in range(groups):
                evidence = page.evaluate(EVIDENCE_OF, n)["open"]
                # Two questions in a row share the evidence after the second: the first opens none.
                assert evidence or n + 1 < groups, f"/{path} #{n}: no evidence after the last guess"
                assert not any(evidence), f"/{path} #{n}: evidence open before a guess"
                box = page.locator(".attn-guess:visible").nth(n)
                box.scroll_into_view_if_needed()
                if box.locator("input[type=number]").count():
                    box.locator("input[type=number]").fill("1")
                else:
                    box.locator("input[type=radio]").first.check()
                box.get_by_role("button", name="Check").click()
                opened = page.evaluate(EVIDENCE_OF, n)["open"]
                assert len(opened) == len(evidence) and all(opened), f"/{path} #{n}: still closed"
                result = box.locator(".attn-guess-result")
                answer = box.get_attribute("data-answer")
                assert result.is_visible() and f"measured: {answer}." in result.inner_text()
                assert box.locator(".attn-guess-answer").get_attribute("open") is not None
            if path == "naive/":  # the first tab's, the one shown
                slug = tab_titles(built_site)[0][1]
                naive = built_site.parent / "profiles" / slug / "naive/summary.json"
                summary = json.loads(naive.read_text())
                assert answer == score_matrices(summary), (answer, summary["peak_memory_bytes"])
            shot(page, f"guess-{path.strip('/')}-{width}")
            page.close()
        scripts = [e for e in context.problems.errors if e.startswith("page error")]
        assert not scripts, "\n".join(scripts)
    finally:
        context.close()


def test_skipping_a_guess_opens_the_evidence_too_and_without_javascript_a_click_does(
    site_url, browser
):
    context = new_context(browser)
    try:
        page = context.new_page()
        page.goto(site_url + "naive/")
        page.locator(".attn-guess:visible").get_by_role("button", name="Skip, show me").click()
        assert page.evaluate(EVIDENCE_OF, 0)["open"] == [True]
    finally:
        context.close()
    bare = browser.new_context(viewport={"width": PHONE, "height": 900}, java_script_enabled=False)
    try:
        page = bare.new_page()
        page.goto(site_url + "naive/")
        assert page.locator(".attn-guess form:visible").count() == 0  # no form that cannot answer
        evidence = page.locator("details.evidence")
        assert evidence.get_attribute("open") is None
        evidence.locator("summary").click()
        assert evidence.get_attribute("open") is not None
        page.locator(".attn-guess-answer:visible summary").first.click()
        assert "score matrices" in page.locator(".attn-guess-answer:visible").first.inner_text()
    finally:
        bare.close()


# --- readable -------------------------------------------------------------------------------------

# WCAG contrast of each matching, visible element's text against what is painted behind it: its own
# background or its ancestors', composited, over white.
CONTRAST = """(selector) => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
  });
  const behind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    return layers.reverse().reduce((under, top) => over(top, under), { r: 255, g: 255, b: 255, a: 1 });
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  return [...document.querySelectorAll(selector)]
    .filter((el) => el.getClientRects().length && el.textContent.trim()
      && getComputedStyle(el).visibility !== "hidden" && getComputedStyle(el).opacity !== "0")
    .map((el) => {
      const bg = behind(el);
      const fg = over(parse(getComputedStyle(el).color), bg);
      const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      return [el.textContent.trim().slice(0, 40), Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100];
    });
}"""

READABLE = {
    "body text": "article p, article li",
    "links": "article a:not(.md-button):not(.headerlink)",
    "buttons": "article .md-button",
}


def contrast(page, selector: str) -> list[tuple[str, float]]:
    return page.evaluate(CONTRAST, selector)


def test_the_contrast_check_finds_low_contrast(site_url, page):
    page.goto(site_url + "naive/")
    page.evaluate("document.querySelector('article p').style.color = '#bbbbbb'")
    first = contrast(page, "article p")[0]
    assert first[1] < 2.5, first  # light grey on white


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_links_and_buttons_are_readable_in_both_palettes(browser, site_url, scheme):
    context = new_context(browser, DESKTOP, scheme)
    try:
        for path in ("", "naive/", "custom-kernels/"):
            page = open_settled(context, site_url + path)
            slate = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
            assert slate == ("slate" if scheme == "dark" else "default"), "palette not applied"
            for what, selector in READABLE.items():
                found = contrast(page, selector)
                assert found or what == "buttons", f"/{path}: nothing matched {selector}"
                low = [(text, ratio) for text, ratio in found if ratio < 4.5]
                assert not low, f"/{path} ({scheme}): {what} below 4.5:1: {low[:5]}"
            if path == "naive/":
                buttons = dict(contrast(page, "[data-perfetto-trace]"))
                assert buttons.get("Open in Perfetto", 0) >= 4.5, buttons
            page.close()
    finally:
        context.close()


def test_timelines_fill_the_column_on_a_desktop_and_scroll_on_a_phone(browser, site_url):
    measure = """() => {
      const img = [...document.querySelectorAll("article img[src$='timeline.svg']")]
        .find((i) => i.getClientRects().length);
      const box = img.closest("p");
      return { shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
               column: box.clientWidth, scrolls: box.scrollWidth > box.clientWidth };
    }"""
    for width in (DESKTOP, PHONE):
        context = new_context(browser, width)
        try:
            page = open_settled(context, site_url + "naive/")
            page.evaluate(
                "document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
            )
            page.wait_for_function(  # the one measured: the tab that shows, loaded
                "[...document.querySelectorAll(\"article img[src$='timeline.svg']\")]"
                ".find((i) => i.getClientRects().length)?.naturalWidth > 0"
            )
            m = page.evaluate(measure)
            text_px = 8.5 * 96 / 72 * m["shown"] / m["natural"]  # the timeline's 8.5 pt labels
            if width == DESKTOP:
                assert abs(m["shown"] - m["column"]) <= 1 and not m["scrolls"], m
                assert text_px >= 11, f"timeline text is {text_px:.1f} px on a desktop"
            else:
                assert m["scrolls"] and m["shown"] > width, m  # wider than the phone: it scrolls
                assert text_px >= 10, f"timeline text is {text_px:.1f} px on a phone"
        finally:
            context.close()


def test_every_viewer_screenshot_is_a_picture_of_something(built_site):
    from PIL import Image, ImageStat

    pngs = sorted(built_site.glob("profiles/*/*/viewer.png"))
    assert pngs, "no viewer.png was published"
    for png in pngs:
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width >= 640 and image.height >= 360, png
            grey = image.convert("L")
            colours = len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16))
            assert ImageStat.Stat(grey).stddev[0] > 10 and colours > 16, f"{png} looks blank"


def tab_titles(built_site: Path) -> list[tuple[str, str]]:
    """(tab label as a page shows it, folder) of each set the site was built from, in tab order."""
    from test_docs_hook import sets

    profiles = built_site.parent / "profiles"  # conftest's built_site
    sets.hardware_sets.cache_clear()
    return [(h["title"], h["slug"]) for h in sets.hardware_sets(profiles)]


def test_hardware_tabs_switch(built_site, site_url, page):
    """A tab per set (a GPU, the committed CPU, a second CPU, and any set profiles/ holds), each
    showing its own set's pictures."""
    expected = tab_titles(built_site)
    assert len({slug for _, slug in expected}) >= 3 and len(set(expected)) == len(expected)
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    tabs = page.locator(".tabbed-set").filter(has=page.locator("img[src*='timeline.svg']")).first
    tabs.scroll_into_view_if_needed()  # the pictures load lazily, when near the screen
    labels = tabs.locator(".tabbed-labels label")
    assert labels.all_inner_texts() == [title for title, _ in expected]
    pictures = [
        tabs.locator(".tabbed-block").nth(i).locator("img[src*='timeline.svg']")
        for i in range(len(expected))
    ]
    for i, (_, slug) in enumerate(expected):
        labels.nth(i).click()
        pictures[i].wait_for(state="visible")
        assert not any(p.is_visible() for p in pictures[:i] + pictures[i + 1 :])
        assert f"/profiles/{slug}/naive/" in pictures[i].get_attribute("src")


VERDICT_MARKS = {True: "✓", False: "✗", None: "?"}


def test_each_claim_shows_each_sets_own_verdict(built_site, site_url, page):
    """A claim of a variant, where its chapter explains it: a line per set that checked it, with
    that set's own verdict (each set's summary.json holds a trace claim's, its claims.json a claim
    on the set's own rows)."""
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    marked = re.findall(
        r"<!-- profile-claim: naive ([\w.-]+) -->", (ROOT / "docs/naive.md").read_text()
    )
    boxes = page.locator("article .admonition:visible").filter(has_text="(observed:")
    lines = [line for text in boxes.all_inner_texts() for line in text.splitlines()]
    checked = 0
    for title, slug in tab_titles(built_site):
        summary = json.loads(
            (built_site.parent / "profiles" / slug / "naive/summary.json").read_text()
        )
        stored = built_site.parent / "profiles" / slug / "claims.json"
        on_rows = (
            json.loads(stored.read_text())["variants"].get("naive", {}) if stored.is_file() else {}
        )
        expected = [VERDICT_MARKS[c["holds"]] for c in summary["claims"] if c["key"] in marked]
        expected += [VERDICT_MARKS[c["holds"]] for key, c in on_rows.items() if key in marked]
        shown = [line.split()[0] for line in lines if f" on {title} (observed:" in line]
        assert sorted(shown) == sorted(expected), (slug, shown, expected)
        checked += bool(expected)  # a GPU set's claims of naive are other claims than the page's
    assert checked, "no set checked a claim the page marks"


def test_search_finds_memcpy(site_url, page):
    page.goto(site_url)
    search = page.locator("input.md-search__input")
    search.click()  # on a wide screen the search field sits in the header
    search.press_sequentially("Memcpy")  # Material reads the query on keyup, which fill() skips
    # Results for "M", "Me", ... come and go while typing: wait for the query that was typed.
    page.locator(".md-search-result__meta", has_text="matching document").wait_for()
    hits = page.locator(".md-search-result__item", has_text=re.compile("memcpy", re.IGNORECASE))
    hits.first.wait_for(state="visible")
    assert search.input_value() == "Memcpy"
    links = page.evaluate(
        "[...document.querySelectorAll('.md-search-result a[href]')].map(a => a.href)"
    )
    highlights = [parse_qs(urlsplit(url).query).get("h", [""])[0] for url in links]
    assert links and all(h == "memcpy" for h in highlights), list(
        zip(links, highlights, strict=True)
    )
    shot(page, "search-memcpy")


# A word a reader searches for, and the chapter that teaches it (each names it in its tags).
TAUGHT_BY = {
    "masked_fill_": "In-place masking",
    "ring attention": "Context parallelism",
    "online softmax": "Custom kernels",
    "group_by_input_shape": "Reading a profile",
}


@pytest.mark.parametrize("query", list(TAUGHT_BY))
def test_material_search_ranks_the_chapter_that_teaches_a_word_first(site_url, page, query):
    """Material's own search (its lunr index of the built site, in its worker) puts the chapter
    that teaches the word at the top of the results."""
    page.goto(site_url)
    search = page.locator("input.md-search__input")
    search.click()
    search.press_sequentially(query)  # Material reads the query on keyup, which fill() skips
    # Results for the first letters come and go while typing: wait for those of the whole query.
    page.wait_for_function(
        "(h) => [...document.querySelectorAll('.md-search-result a[href]')]"
        ".some((a) => new URL(a.href).searchParams.get('h') === h)",
        arg=query,
    )
    pages = page.evaluate(
        "[...document.querySelectorAll('.md-search-result__item')]"
        ".map((i) => (i.querySelector('h1') || i.querySelector('h2')).textContent.trim())"
    )
    assert pages[0] == TAUGHT_BY[query], f"{query!r} ranks {pages[:4]}"


def test_clicking_a_timeline_zooms_it(site_url, page):
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    picture = page.locator("a.glightbox img[src*='timeline.svg']").first
    picture.scroll_into_view_if_needed()
    picture.wait_for(state="visible")  # loaded: a lazy picture has no size before
    inline = picture.bounding_box()["width"]
    picture.click()
    zoomed = page.locator(".glightbox-container .gslide-image img").first
    zoomed.wait_for(state="visible")
    # Wait out the zoom animation: the lightbox shows the picture wider than the page does.
    page.wait_for_function(
        "w => document.querySelector('.glightbox-container .gslide-image img')"
        ".getBoundingClientRect().width > w * 1.2",
        arg=inline,
    )
    page.wait_for_timeout(600)  # only so the screenshot shows the end of the fade
    shot(page, "naive-timeline-zoomed")


def test_perfetto_button_hands_the_trace_to_perfetto(built_site, site_url, perfetto_stub, context):
    context.add_init_script(f"window.ATTN_PERFETTO_URL = {json.dumps(perfetto_stub)};")
    page = context.new_page()
    context.problems.watch(page)
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    button = page.locator("[data-perfetto-trace]:visible").first
    assert button.inner_text().strip() == "Open in Perfetto"
    href = button.get_attribute("href")  # still a plain link to the trace: downloads without JS
    button.scroll_into_view_if_needed()
    with context.expect_page() as opened:
        button.click()
    perfetto = opened.value
    perfetto.wait_for_function("window.received !== null")
    received = perfetto.evaluate("window.received")

    assert perfetto.url.startswith(perfetto_stub)
    assert received["isArrayBuffer"]
    assert received["pings"] >= 2, "the page must keep pinging until the UI answers"
    assert received["origin"] == site_url.rstrip("/")
    title, slug = tab_titles(built_site)[0]  # the first tab's button
    assert received["title"] == f"naive on {title}"
    assert received["fileName"] == f"{slug}-naive-trace.json.gz"
    data = base64.b64decode(received["base64"])
    trace_file = built_site / "naive" / href  # ../profiles/<hardware>/naive/trace.json.gz
    assert data == trace_file.resolve().read_bytes(), "Perfetto got other bytes than the trace"
    trace = json.loads(gzip.decompress(data))
    assert trace["traceEvents"], "the trace has no events"
    page.locator(".attn-perfetto-status").filter(has_text="Sent to Perfetto").wait_for()
    shot(page, "naive-perfetto-sent")
    # The page's reachability probe of the UI (a no-cors request) gets an opaque HTML response,
    # which the browser withholds from the page and reports as aborted: the probe still succeeds.
    probe = f"failed to load {perfetto_stub}: net::ERR_ABORTED"
    errors = [e for e in context.problems.errors if e != probe]
    assert not errors, "\n".join(errors)


def test_perfetto_button_tells_an_offline_reader(site_url, context):
    """perfetto.js gives up on an unreachable UI after REACH_WITHIN_MS (4 s); a refused
    connection, as here, fails at once. How long the page takes here is the machine's business."""
    with socket.socket() as sock:  # a port nothing listens on: as unreachable as the UI offline
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    context.add_init_script(f"window.ATTN_PERFETTO_URL = {json.dumps(nowhere)};")
    page = context.new_page()
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    button = page.locator("[data-perfetto-trace]:visible").first
    button.scroll_into_view_if_needed()
    button.click()
    status = page.locator(".attn-perfetto-status--error:visible").first
    status.wait_for()
    assert "cannot be reached" in status.inner_text()


def test_perfetto_button_explains_a_blocked_popup(site_url, context):
    context.add_init_script("window.open = () => null;")  # what a pop-up blocker hands back
    page = context.new_page()
    page.goto(site_url + "naive/")
    page.evaluate(OPEN_EVIDENCE)
    button = page.locator("[data-perfetto-trace]:visible").first
    button.scroll_into_view_if_needed()
    button.click()
    status = page.locator(".attn-perfetto-status:visible").first
    status.wait_for()
    assert "blocked" in status.inner_text()
    shot(page, "naive-perfetto-popup-blocked")


def test_perfetto_button_explains_a_page_opened_from_a_file(built_site, context):
    page = context.new_page()
    page.goto((built_site / "naive" / "index.html").as_uri())
    page.evaluate(OPEN_EVIDENCE)
    button = page.locator("[data-perfetto-trace]:visible").first
    status = page.locator(".attn-perfetto-status:visible").first
    status.wait_for()  # said up front, before any click
    assert "opened from a file" in status.inner_text()
    before = len(context.pages)
    button.click()
    assert len(context.pages) == before, "no Perfetto window from a file:// page"
    assert "opened from a file" in status.inner_text()


def test_open_here_shows_the_trace_in_the_published_viewer(built_site, site_url, context):
    if not (built_site / "trace-viewer" / "index.html").is_file():
        pytest.skip("the trace viewer was not fetched here (python -m attn.profiling.viewer fetch)")
    page = open_settled(context, site_url + "naive/")
    assert page.evaluate("document.documentElement.getAttribute('data-trace-viewer')") == "ready"
    link = page.locator("a[data-trace-viewer]:visible").first
    assert link.inner_text().strip() == "Open here"
    assert "trace-viewer/index.html?trace=" in link.get_attribute("href")
    link.scroll_into_view_if_needed()
    with context.expect_page() as opened:
        link.click()
    viewer = opened.value
    viewer.set_default_timeout(90_000)  # parsing the 2.6 MB viewer takes a while on two cores
    viewer.wait_for_function("window.traceViewer !== undefined")  # its script has run
    facts = viewer.evaluate("window.traceViewer.opened")
    assert facts["range"]["name"] == "attn_fwd" and facts["range"]["count"] == 3, facts
    assert viewer.locator("#status").is_hidden(), viewer.locator("#status").inner_text()
    tracks = viewer.evaluate("window.traceViewer.ready.then(v => v.model.getAllThreads().length)")
    assert tracks >= 1
    viewer.wait_for_timeout(300)
    shot(viewer, "naive-open-here")
    assert not context.problems.errors, "\n".join(context.problems.errors)


def _runs_script(browser, html: str) -> tuple[bool, str]:
    """(whether a handler the HTML carries ran, its text) once chromium has loaded it."""
    page = browser.new_page()
    try:
        page.set_content(f"<!doctype html><meta charset=utf-8><body>{html}</body>")
        page.wait_for_load_state("load")  # a broken image's onerror fires before load
        return page.evaluate("window.xss !== undefined"), page.evaluate("document.body.textContent")
    finally:
        page.close()


def test_the_script_check_sees_a_script_run(browser):
    """The check below can fail: the same name, put in a page as HTML, runs."""
    from test_docs_hook import XSS

    assert _runs_script(browser, XSS)[0]


@pytest.mark.parametrize("case", ["kernel name", "op name in table.md", "claim text and observed",
                                  "unavailable reason", "diff", "public where",
                                  "benchmark row", "environment"])  # fmt: skip
def test_a_name_from_a_set_runs_no_script_and_shows_as_text(browser, tmp_path, case):
    """The docs hook's output for a set or trace carrying HTML, as chromium shows it."""
    from test_docs_hook import XSS, rendered, write_fake_profiles

    ran, text = _runs_script(browser, rendered(case, write_fake_profiles(tmp_path / "profiles")))
    assert not ran and XSS in text


# --- a hostile set --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Path:
    """The site built from a small set whose every free-text field a page shows carries script,
    snippet includes and Markdown's extension syntax (tests/hostile_sets.py)."""
    import hostile_sets
    from conftest import build_site

    work = tmp_path_factory.mktemp("hostile_site")
    hostile_sets.small_set(work / "profiles")
    hostile_sets.poison_text(work / "profiles")
    run = build_site(work / "profiles", work / "site")
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr[-3000:]}"
    return work / "site"


def alerts_on(browser, url: str, paths: list[str]) -> list[str]:
    """The dialogs (alert, confirm, prompt) each page raised while loading, opened whole."""
    raised: list[str] = []
    context = new_context(browser)
    try:
        for path in paths:
            page = context.new_page()
            page.on("dialog", lambda d, path=path: (raised.append(f"/{path}: {d.message}"), d.dismiss()))  # fmt: skip
            page.goto(url + path, wait_until="load")
            page.evaluate(OPEN_ALL)
            page.wait_for_load_state("networkidle")
            page.close()
    finally:
        context.close()
    return raised


def test_the_alert_check_sees_an_alert(browser, tmp_path):
    """The check below can fail: the poison, put in a page as HTML, raises its dialogs."""
    from hostile_sets import ALERT

    (tmp_path / "index.html").write_text(f"<!doctype html><body>{ALERT}</body>")
    for url in serve(tmp_path):
        assert alerts_on(browser, url, [""]) == ["/: 1", "/: 2"]


def test_a_site_built_from_a_hostile_set_runs_no_script_and_holds_no_file_from_outside(
    browser, hostile_site
):
    """A set's names and sentences ran script on the pages, and a snippet include in one
    published a file of the checkout; each field is now text (or refused: test_docs_hook_sets)."""
    from hostile_sets import ALERT, OUTSIDE

    texts = [p for p in hostile_site.rglob("*") if p.suffix in {".html", ".json", ".xml", ".svg"}]
    leaked = [(p.name, s) for p in texts for s in OUTSIDE if s in p.read_text(errors="replace")]
    assert not leaked, leaked
    for url in serve(hostile_site):
        assert not alerts_on(browser, url, pages_of(hostile_site))
        page = browser.new_page()
        try:
            for path in ("naive/", "sdpa/", "decoding/", "custom-kernels/"):
                page.goto(url + path)
                page.evaluate(OPEN_ALL)
                shown = page.locator("article").inner_text()
                assert ALERT in shown and "--8<--" in shown, f"/{path}: the poison is not shown"
        finally:
            page.close()
