"""The measured sections overhead.json feeds (Reading a profile's cost of the profiler, Naive's
first-touch copy) in a real browser at 1280 and 390 px: shown before any question is answered,
a tab per CPU set holding its table or saying it was not measured there, each table inside the
column or scrolling inside its own box, the page never sideways. And Compiled's section on the
pattern Inductor matched: shown, its code's tokens whole.

Reuses test_browser.py's browser, served site and helpers (Debian's chromium).
"""

from __future__ import annotations

import pytest
from test_browser import (  # noqa: F401  (browser and site_url are fixtures)
    DESKTOP,
    PHONE,
    SHOTS,
    browser,
    new_context,
    site_url,
)
from test_browser_phone import PAGE_SIDEWAYS, SPLIT_TOKENS

# page -> (the section's heading, what its measured table says in its first column)
SECTIONS = {
    "reading-a-profile/": ("What the profiler itself costs", "the forward alone"),
    "naive/": ("Where the copy's time goes", "into memory already touched"),
}
MEASURED, NOT_MEASURED = "CPU: Intel Xeon (family 6, model 167)", "CPU: AMD EPYC with AVX-512 BF16"


def shot_path(name: str) -> str:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return str(SHOTS / f"{name}.png")


# Each table shown in the panel: how far its box, and its scrolling wrapper's, reach past the
# viewport's right edge (px; a wide table scrolls inside its wrapper, which must stay in view).
TABLES_PAST_EDGE = """(panel) => [...panel.querySelectorAll("table")].map((t) => {
  const box = (t.closest(".md-typeset__scrollwrap") || t).getBoundingClientRect();
  return box.right - document.documentElement.clientWidth;
})"""


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
@pytest.mark.parametrize("path", SECTIONS)
def test_a_measured_section_shows_each_sets_table_or_that_it_was_not_measured(
    built_site, site_url, browser, width, path  # noqa: F811
):  # fmt: skip
    heading, row = SECTIONS[path]
    context = new_context(browser, width)
    try:
        page = context.new_page()
        page.goto(site_url + path, wait_until="networkidle")
        title = page.locator(f'article :is(h2, h3):has-text("{heading}")').first
        assert title.is_visible(), f"{path}: {heading!r} hidden before any question is answered"
        tabs = title.locator("xpath=following-sibling::div[contains(@class, 'tabbed-set')][1]")
        said = {}
        for label in tabs.locator(".tabbed-labels > label").all():
            label.click()
            panel = tabs.locator(".tabbed-content > .tabbed-block:visible")
            said[label.inner_text().strip()] = panel.inner_text()
            if label.inner_text().strip() == MEASURED:
                panel.screenshot(path=shot_path(f"section-{path.strip('/')}-{width}"))
            past = panel.evaluate(TABLES_PAST_EDGE)
            assert all(x <= 0.5 for x in past), (
                f"{path} at {width} px: a table past the edge {past}"
            )
        # A ratio with its range; on a phone the table shows as cards, its heads drawn by CSS.
        assert row in said[MEASURED] and "×" in said[MEASURED], said[MEASURED]
        assert "Not measured in this set" in said[NOT_MEASURED], said[NOT_MEASURED]
        assert page.evaluate(PAGE_SIDEWAYS) <= 0, f"{path} scrolls sideways at {width} px"
    finally:
        context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_the_matched_pattern_section_shows_its_code_whole(built_site, site_url, browser, width):  # noqa: F811
    context = new_context(browser, width)
    try:
        page = context.new_page()
        page.goto(site_url + "compiled-and-flex/", wait_until="networkidle")
        title = page.locator('article h3:has-text("Which pattern Inductor matched")')
        assert title.is_visible(), "the section is hidden before any question is answered"
        code = title.locator("xpath=following-sibling::div[contains(@class, 'highlight')][1]")
        assert "fuse_attention" in code.inner_text()
        code.screenshot(path=shot_path(f"section-compiled-pattern-{width}"))
        assert not page.evaluate(SPLIT_TOKENS), f"code tokens split at {width} px"
        assert page.evaluate(PAGE_SIDEWAYS) <= 0, f"the page scrolls sideways at {width} px"
    finally:
        context.close()
