"""attn.profiling.viewer: the pinned viewer files, a screenshot of one forward, "Open here" on a page.

The viewer files are fetched once into the user's cache (PyPI and npm); where they cannot be had,
or there is no chromium or playwright, the tests that need them skip with the reason.
Screenshots land in test-artifacts/viewer/ (gitignored).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from committed import CPU_SET

from attn.profiling import viewer

ROOT = Path(__file__).resolve().parents[1]
TRACE = CPU_SET / "naive/trace.json.gz"  # as committed
SHOTS = ROOT / "test-artifacts" / "viewer"
TIMEOUT_MS = 60_000

PAGE = """<!doctype html><meta charset="utf-8"><title>naive</title>
<p><a href="../profiles/cpu/naive/trace.json.gz" data-trace-viewer data-trace-range="attn_fwd">Open here</a>
<script src="../javascripts/trace-viewer.js"></script>"""


@pytest.fixture(scope="module")
def cache() -> Path:
    try:
        return viewer.fetch_viewer()
    except viewer.ViewerUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def chromium() -> str:
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[test])"
    )
    try:
        return viewer.find_chromium()
    except viewer.ViewerUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def browser(chromium) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, headless=True, args=viewer.CHROMIUM_ARGS
        )
        yield browser
        browser.close()


def colours(png: Path) -> tuple[tuple[int, int], int]:
    """The picture's (width, height) and how many distinct colours it has."""
    try:
        from PIL import Image

        with Image.open(png) as image:
            rgb = image.convert("RGB")
            return rgb.size, len(rgb.getcolors(maxcolors=1 << 24))
    except ImportError:
        import matplotlib.image
        import numpy as np

        pixels = matplotlib.image.imread(png)[..., :3].reshape(-1, 3)
        height, width = matplotlib.image.imread(png).shape[:2]
        return (width, height), len(np.unique(pixels, axis=0))


def site_with(folder: Path, *, viewer_from: Path | None) -> Path:
    """A tiny site: one page with an "Open here" link, our script, the trace, maybe the viewer."""
    (folder / "naive").mkdir(parents=True)
    (folder / "naive" / "index.html").write_text(PAGE, encoding="utf-8")
    (folder / "javascripts").mkdir()
    shutil.copy(ROOT / "docs/javascripts/trace-viewer.js", folder / "javascripts")
    (folder / "profiles/cpu/naive").mkdir(parents=True)
    shutil.copy(TRACE, folder / "profiles/cpu/naive")
    if viewer_from is not None:
        assert viewer.publish_viewer(folder, cache_dir=viewer_from) == folder / "trace-viewer"
    return folder


def test_fetch_pins_both_files_beside_their_notices_outside_the_repository(cache):
    for name, digest in viewer.SHA256.items():
        assert hashlib.sha256((cache / name).read_bytes()).hexdigest() == digest, name
    for notice in (viewer.VIEWER_NOTICE, viewer.POLYFILL_NOTICE):
        assert "Redistribution and use in source and binary forms" in (cache / notice).read_text()
    index = (cache / viewer.INDEX_HTML).read_text()
    assert "__hideTraceViewerPolyfillWarning = true" in index
    assert viewer.POLYFILL_JS in index and viewer.VIEWER_HTML in index
    assert ROOT not in cache.resolve().parents
    assert viewer.why_unavailable(cache) is None


def test_a_file_that_does_not_match_its_pin_is_refused(cache, tmp_path):
    for name in viewer.SHA256:
        shutil.copy(cache / name, tmp_path)
    with (tmp_path / viewer.POLYFILL_JS).open("ab") as f:
        f.write(b"\n")
    with pytest.raises(viewer.ViewerUnavailable, match="sha256"):
        viewer.require_viewer(tmp_path)


def test_a_missing_viewer_says_in_one_line_how_to_get_it(tmp_path, capsys):
    missing = tmp_path / "no-viewer"
    with pytest.raises(viewer.ViewerUnavailable) as raised:
        viewer.screenshot(TRACE, tmp_path / "x.png", select="aten::clone", cache_dir=missing)
    message = str(raised.value)
    assert "\n" not in message
    assert "python -m attn.profiling.viewer fetch" in message
    assert viewer.publish_viewer(tmp_path / "site", cache_dir=missing) is None
    assert not (tmp_path / "site").exists()

    args = ["--cache-dir", str(missing), "shot", str(TRACE), str(tmp_path / "x.png")]
    assert viewer.main(args) == 1
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "x.png").exists()


def test_screenshots_in_a_session_share_one_browser(cache, chromium, tmp_path):
    with viewer.session():
        first = viewer.screenshot(TRACE, tmp_path / "a.png", select="aten::clone", width=320)
        browser = viewer._sessions[-1]["browser"]
        second = viewer.screenshot(TRACE, tmp_path / "b.png", select="aten::clone", width=320)
        assert viewer._sessions[-1]["browser"] is browser and browser.is_connected()
    assert first["selected"] == second["selected"] == "aten::clone"
    assert not browser.is_connected() and not viewer._sessions  # closed with the session


def test_a_session_shows_each_trace_in_one_page_as_a_page_of_its_own_would(
    cache, chromium, tmp_path
):
    """The viewer's code is parsed once; each later trace replaces the one before in that page,
    with its zoom, selection and mark drawn as on a fresh page: the same pixels."""
    alone = viewer.screenshot(TRACE, tmp_path / "alone.png", select="aten::clone", width=320)
    with viewer.session():
        viewer.screenshot(CPU_SET / "sdpa_math/trace.json.gz", tmp_path / "before.png", width=320)
        page = viewer._sessions[-1]["pages"][(320, 720)].page
        again = viewer.screenshot(TRACE, tmp_path / "again.png", select="aten::clone", width=320)
        assert viewer._sessions[-1]["pages"][(320, 720)].page is page  # no second page
        assert page.locator("tr-ui-timeline-view").count() == 1  # the one before is gone
    assert again["selected"] == alone["selected"] == "aten::clone"
    assert again["mark"] == alone["mark"]
    assert (tmp_path / "again.png").read_bytes() == (tmp_path / "alone.png").read_bytes()


def test_screenshot_zooms_to_one_forward_with_the_clone_selected(cache, chromium):
    png = SHOTS / "naive-cpu-clone.png"
    facts = viewer.screenshot(TRACE, png, select="aten::clone")

    assert facts["selected"] == "aten::clone"  # read from the details panel
    assert facts["range"]["name"] == "attn_fwd"
    assert facts["range"]["index"] == (facts["range"]["count"] - 1) // 2  # the middle forward
    assert facts["png"] == png
    mark = facts["mark"]  # the red box drawn around the selected slice, in the lanes
    assert 0 < mark["left"] < mark["right"] <= 1
    size, distinct = colours(png)
    assert size == (2560, 1440)  # 1280 x 720 CSS pixels, captured at device scale 2
    assert distinct > 50, f"{png} looks blank: {distinct} colours"
    assert [p.name for p in png.parent.glob(f".{png.name}*")] == [], "a scratch file was left"


def test_open_here_shows_the_trace_in_the_published_viewer(cache, browser, tmp_path):
    site = site_with(tmp_path / "site", viewer_from=cache)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    with viewer.serve(site) as base:
        page.goto(base + "naive/")
        page.locator("html[data-trace-viewer=ready]").wait_for(state="attached")
        link = page.get_by_role("link", name="Open here")
        assert link.get_attribute("href").startswith(base + "trace-viewer/index.html?trace=")
        with page.context.expect_page() as opened:
            link.click()
        shown = opened.value
        shown.on("pageerror", lambda error: errors.append(str(error)))
        shown.wait_for_function("window.traceViewer !== undefined")  # the new tab may still load
        facts = shown.evaluate("window.traceViewer.opened")
        tracks = shown.locator("#track_view_container").inner_text()
        details = shown.locator("tr-ui-a-single-event-sub-view").first.inner_text()
        SHOTS.mkdir(parents=True, exist_ok=True)
        shown.screenshot(path=str(SHOTS / "open-here.png"))
    page.close()

    assert facts["range"]["name"] == facts["selected"] == "attn_fwd"
    assert "thread" in tracks and "python" in tracks, tracks  # the trace's CPU thread is a track
    assert "attn_fwd" in details and "Wall Duration" in details, details
    assert not errors, errors


def test_open_here_stays_a_download_without_the_viewer(browser, tmp_path):
    site = site_with(tmp_path / "site", viewer_from=None)
    page = browser.new_page()
    with viewer.serve(site) as base:
        page.goto(base + "naive/")
        page.locator("html[data-trace-viewer=absent]").wait_for(state="attached")
        href = page.get_by_role("link", name="Open here").get_attribute("href")
    page.close()
    assert href == "../profiles/cpu/naive/trace.json.gz"


@pytest.mark.parametrize("content", [None, b"", b'{"hello": 1}'], ids=["missing", "empty", "not"])
def test_shot_of_a_trace_that_is_not_one_is_one_line(tmp_path, content, capsys):
    trace = tmp_path / "trace.json.gz"
    if content is not None:
        trace.write_bytes(content)
    assert viewer.main(["shot", str(trace), str(tmp_path / "x.png")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(trace) in line and not (tmp_path / "x.png").exists()


def _edited_trace(tmp_path: Path, edit) -> Path:
    import gzip
    import json

    raw = json.loads(gzip.decompress(TRACE.read_bytes()))
    edit(raw["traceEvents"])
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(
    ("edit", "argv", "says"),
    [
        (
            lambda events: next(e for e in events if e.get("cat") == "cpu_op").update(ts="abc"),
            [],
            "has ts 'abc'",
        ),  # fmt: skip
        (lambda events: None, ["--range", "nothing"], "no range named 'nothing'"),
        (lambda events: None, ["--png-in-a-file"], "file is a file, not a folder"),
    ],
    ids=["ts abc", "no such range", "png under a file"],
)
def test_shot_refuses_before_the_browser_in_one_line(tmp_path, edit, argv, says, capsys):
    """A ts of "abc" exited 0, --range nothing and an unwritable PNG were tracebacks."""
    if not TRACE.is_file():
        pytest.skip("no committed profiles/cpu/ set here")
    trace = _edited_trace(tmp_path, edit)
    png = tmp_path / "x.png"
    if argv == ["--png-in-a-file"]:
        (tmp_path / "file").write_text("x")
        png, argv = tmp_path / "file" / "x.png", []
    assert viewer.main(["shot", str(trace), str(png), *argv]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert says in line and not png.exists()
