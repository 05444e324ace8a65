"""Show a trace in the Catapult trace viewer (the code behind chrome://tracing), offline.

The viewer is two files from the package registries, fetched once into a cache folder and checked
against pinned hashes: `trace_viewer_full.html` from the torch-tb-profiler wheel (PyPI) and the
`webcomponents.min.js` polyfill it needs in current browsers (npm). Our own `index.html` beside
them loads a trace named in its query string. From there we take screenshots in headless Chromium
and publish the same viewer with the site.

    python -m attn.profiling.viewer fetch
    python -m attn.profiling.viewer shot profiles/cpu-amd-epyc/naive/trace.json.gz viewer.png --select aten::clone
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import http.server
import json
import logging
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from attn.traces.common.atomic import RefusedOutput, check_output, replace_file
from attn.traces.common.terminal import say
from attn.traces.common.viewer_files import (  # noqa: F401 (publish_viewer: its users import it here)
    FETCH_HINT,
    INDEX_HTML,
    OURS,
    POLYFILL_JS,
    POLYFILL_NOTICE,
    SHA256,
    VIEWER_HTML,
    VIEWER_NOTICE,
    default_cache_dir,
    publish_viewer,
    why_unavailable,
)
from attn.traces.read.trace import TraceFormatError, read_trace

log = logging.getLogger(__name__)

TB_PROFILER = "torch-tb-profiler==0.4.3"
WEBCOMPONENTS = "webcomponents.js@0.7.24"

# As tests/test_browser.py launches Debian's chromium: no network of its own, no GPU.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
]
TIMEOUT_MS = 60_000  # parsing the 2.6 MB viewer takes seconds on a busy 2-core machine


class ViewerUnavailable(RuntimeError):
    """Something the viewer needs is missing; the message is one line saying what and how to get it."""


# --- fetching -------------------------------------------------------------------------------------


def fetch_viewer(cache_dir: Path | None = None) -> Path:
    """Download the viewer and its polyfill at pinned versions into the cache folder; return it."""
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    if why_unavailable(folder) is not None:
        with tempfile.TemporaryDirectory(prefix="trace-viewer-") as tmp:
            viewer, viewer_license = _from_wheel(Path(tmp))
            polyfill = _from_npm(Path(tmp))
        _check(VIEWER_HTML, viewer)
        _check(POLYFILL_JS, polyfill)
        _write(folder / VIEWER_HTML, viewer)
        _write(folder / POLYFILL_JS, polyfill)
        _write(folder / VIEWER_NOTICE, _viewer_notice(viewer_license).encode())
        _write(folder / POLYFILL_NOTICE, _polyfill_notice(polyfill).encode())
    _write_index(folder)
    return folder


def _from_wheel(tmp: Path) -> tuple[bytes, bytes]:
    """trace_viewer_full.html and the package's LICENSE, from the torch-tb-profiler wheel."""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    _run([*pip, "--quiet", TB_PROFILER, "-d", str(tmp)], "pip", "pip install pip")
    wheel = next(tmp.glob("torch_tb_profiler-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        viewer = z.read(f"torch_tb_profiler/static/{VIEWER_HTML}")
        license_name = next(n for n in names if n.endswith(".dist-info/LICENSE"))
        return viewer, z.read(license_name)


def _from_npm(tmp: Path) -> bytes:
    """webcomponents.min.js from the webcomponents.js npm package (its tarball, nothing installed)."""
    out = _run(
        ["npm", "pack", "--silent", WEBCOMPONENTS], "npm", "Debian: apt-get install npm", tmp
    )
    tarball = tmp / out.strip().splitlines()[-1]
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(f"package/{POLYFILL_JS}")
        return member.read()


def _run(cmd: list[str], tool: str, install: str, cwd: Path | None = None) -> str:
    """Run a registry client; a missing client or a failed download becomes ViewerUnavailable."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise ViewerUnavailable(f"{tool} is not installed ({install}); then {FETCH_HINT}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ViewerUnavailable(f"{tool} could not download the viewer ({last}); {FETCH_HINT}")
    return done.stdout


def _check(name: str, data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256[name]:
        raise ViewerUnavailable(
            f"{name} has sha256 {digest}, expected {SHA256[name]}; {FETCH_HINT}"
        )


def _write(path: Path, data: bytes) -> None:
    replace_file(path, lambda scratch: scratch.write_bytes(data))


def require_viewer(cache_dir: Path | None = None) -> Path:
    """The cache folder, ready to serve (index.html refreshed); raises ViewerUnavailable if not."""
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    why = why_unavailable(folder)
    if why is not None:
        raise ViewerUnavailable(why)
    _write_index(folder)
    return folder


# --- our files: the page that loads a trace, and the license notices ---------------------------------

# index.html?trace=URL[&title=TEXT][&range=NAME[&select=NAME]][&still=1] loads the trace (gzip or
# plain JSON) and, given a range, zooms to its middle occurrence and selects `select` inside it (else
# the range itself); `still` lays the page out for a screenshot.
# window.traceViewer.opened resolves to {range, selected} once that is on screen.


def _viewer_notice(package_license: bytes) -> str:
    """Catapult's notice (the file carries only a pointer to it) and the wheel's own LICENSE."""
    template = (OURS / f"{VIEWER_NOTICE}.in").read_text(encoding="utf-8")
    return template.format(
        viewer_html=VIEWER_HTML, package=TB_PROFILER, package_license=package_license.decode()
    )


def _polyfill_notice(polyfill: bytes) -> str:
    """The file's own @license header, and the Polymer BSD text it points to."""
    header = re.match(rb"\s*(/\*\*.*?\*/)", polyfill, re.DOTALL)
    template = (OURS / f"{POLYFILL_NOTICE}.in").read_text(encoding="utf-8")
    return template.format(
        polyfill_js=POLYFILL_JS,
        package=WEBCOMPONENTS,
        header=header.group(1).decode("utf-8") if header else "",
    )


def _write_index(folder: Path) -> None:
    index = (OURS / INDEX_HTML).read_bytes()
    path = folder / INDEX_HTML
    if not path.is_file() or path.read_bytes() != index:
        _write(path, index)


# --- screenshots ----------------------------------------------------------------------------------


def find_chromium() -> str:
    """Debian's chromium (never a browser Playwright downloads); raises ViewerUnavailable if absent."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise ViewerUnavailable("no chromium on PATH (Debian: apt-get install chromium)")
    return found


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` on 127.0.0.1 at a free port while the block runs; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def screenshot(
    trace_path: Path,
    png_path: Path,
    *,
    select: str | None = None,
    range_name: str | None = "attn_fwd",
    width: int = 1280,
    height: int = 720,
    cache_dir: Path | None = None,
) -> dict:
    """Take a PNG of the trace in the viewer, zoomed to one `range_name` with `select` selected."""
    _check_shot(trace_path, png_path, range_name)
    folder = require_viewer(cache_dir)
    chromium = find_chromium()
    try:
        from playwright.sync_api import Error as PlaywrightError
    except ImportError:
        raise ViewerUnavailable("playwright is not installed (pip install -e .[test])") from None
    trace_path, png_path = Path(trace_path).resolve(), Path(png_path)
    with _viewer_page(chromium, folder, (width, height)) as shot:
        query = _query(trace_path, shot.link(trace_path), range_name, select)
        try:
            if shot.loaded:  # the viewer is parsed already: only the trace changes
                facts = shot.page.evaluate("q => window.traceViewer.reopen(q)", "?" + query)
            else:
                shot.page.goto(f"{shot.base}viewer/{INDEX_HTML}?{query}")
                facts = shot.page.evaluate("window.traceViewer.opened")
            facts = facts or {}
        except PlaywrightError as error:
            shot.broken = True  # a page that failed once is not used again
            message = str(error).splitlines()[0]
            raise RuntimeError(f"the viewer could not show {trace_path}: {message}") from None
        shot.loaded = True
        selected = _selected_title(shot.page) if range_name else None
        _write(png_path, shot.page.screenshot(type="png"))
    return {
        "selected": selected,
        "range": facts.get("range"),
        "mark": facts.get("mark"),
        "png": png_path,
    }


def _check_shot(trace_path: Path, png_path: Path, range_name: str | None) -> None:
    """Refuse in one line now what would be a browser's error (or a picture of nothing) later:
    a missing, empty or unreadable trace, no such range, a PNG that cannot be written."""
    trace = read_trace(trace_path)
    if range_name and not trace.range_rows(range_name):
        raise TraceFormatError(f"{trace_path}: no range named {range_name!r} to zoom to")
    check_output(png_path, (trace_path,))
    Path(png_path).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=Path(png_path).parent):
        pass


def _query(trace_path: Path, trace_name: str, range_name: str | None, select: str | None) -> str:
    """The page's query: the trace (served beside the viewer), its title, range and selection."""
    query = {
        "trace": f"../{trace_name}",
        "title": "/".join(trace_path.parts[-3:]),  # e.g. cpu/naive/trace.json.gz
        "range": range_name or "",
        "select": select or "",
        "still": "1",
    }
    return urlencode(query, quote_via=quote)


@dataclasses.dataclass
class _Page:
    """A page of the viewer at one size, and the folder its server serves: the viewer, and each
    trace shown in it beside it (links, not copies)."""

    page: Any
    root: Path
    base: str
    loaded: bool = False  # the viewer's code parsed: the next trace goes through reopen()
    broken: bool = False
    shown: int = 0

    def link(self, trace_path: Path) -> str:
        """The trace linked into the served folder under a name of its own; that name."""
        self.shown += 1
        name = f"trace-{self.shown}" + "".join(trace_path.suffixes)
        (self.root / name).symlink_to(trace_path)
        return name


@contextlib.contextmanager
def _viewer_page(chromium: str, folder: Path, size: tuple[int, int]) -> Iterator[_Page]:
    """The open session's page at `size` (made on first use, kept for the next picture unless it
    broke), or a page for this picture alone."""
    if not _sessions:
        with contextlib.ExitStack() as stack:
            yield _new_page(stack, stack.enter_context(_browser(chromium)), folder, size)
        return
    shared = _sessions[-1]
    pages = shared.setdefault("pages", {})
    if size not in pages or pages[size].broken:
        with _browser(chromium) as browser:
            pages[size] = _new_page(shared["stack"], browser, folder, size)
    yield pages[size]


def _new_page(stack: contextlib.ExitStack, browser, folder: Path, size: tuple[int, int]) -> _Page:
    """A page at `size` (two device pixels a CSS pixel) and a served folder holding the viewer,
    both closed with `stack`."""
    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trace-viewer-")))
    (root / "viewer").symlink_to(folder, target_is_directory=True)
    base = stack.enter_context(serve(root))
    width, height = size
    page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=2)
    stack.callback(page.close)
    page.set_default_timeout(TIMEOUT_MS)
    return _Page(page, root, base)


_sessions: list[dict] = []  # the open session(): its exit stack and, once launched, its browser


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Screenshots taken inside share one browser: one launch for a whole profile run."""
    with contextlib.ExitStack() as stack:
        _sessions.append({"stack": stack})
        try:
            yield
        finally:
            _sessions.pop()


@contextlib.contextmanager
def _browser(chromium: str):
    """The open session's browser (launched on first use), or one for this screenshot alone."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    def launch(p):
        try:
            return p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        except PlaywrightError as error:
            why = str(error).splitlines()[0]
            raise ViewerUnavailable(f"{chromium} did not start ({why})") from None

    if _sessions:
        shared = _sessions[-1]
        if "browser" not in shared:
            browser = launch(shared["stack"].enter_context(sync_playwright()))
            shared["stack"].callback(browser.close)
            shared["browser"] = browser
        yield shared["browser"]
        return
    with sync_playwright() as p:
        browser = launch(p)
        try:
            yield browser
        finally:
            browser.close()


def _selected_title(page) -> str | None:
    """The Title row of the details panel at the bottom, as the reader sees it."""
    details = page.locator("tr-ui-a-single-event-sub-view").first
    details.wait_for()
    for line in details.inner_text().splitlines():
        label, _, value = line.partition("\t")
        if label.strip() == "Title":
            return value.strip()
    return None


# --- command line ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """python -m attn.profiling.viewer fetch | shot TRACE PNG | publish SITE_DIR"""
    parser = argparse.ArgumentParser(
        prog="python -m attn.profiling.viewer", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--cache-dir", type=Path, help=f"default: {default_cache_dir()}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download the viewer files once (needs PyPI and npm)")
    shot = commands.add_parser(
        "shot", help="a PNG of one forward of a trace, as the viewer shows it"
    )
    shot.add_argument("trace", type=Path)
    shot.add_argument("png", type=Path)
    shot.add_argument("--select", help="the event to select inside the range, e.g. aten::clone")
    shot.add_argument(
        "--range", default="attn_fwd", help="the range to zoom to (default: attn_fwd)"
    )
    shot.add_argument("--width", type=int, default=1280)
    shot.add_argument("--height", type=int, default=720)
    publish = commands.add_parser("publish", help="copy the viewer into a built site")
    publish.add_argument("site_dir", type=Path)
    args = parser.parse_args(argv)

    try:
        if args.command == "fetch":
            print(fetch_viewer(args.cache_dir))
        elif args.command == "shot":
            facts = screenshot(
                args.trace, args.png, select=args.select, range_name=args.range,
                width=args.width, height=args.height, cache_dir=args.cache_dir,
            )  # fmt: skip
            print(json.dumps(facts, default=str))
        else:
            dest = publish_viewer(args.site_dir, args.cache_dir)  # logs why when it cannot
            if dest is None:
                return 1
            print(dest)
    except (ViewerUnavailable, TraceFormatError, RefusedOutput, RuntimeError, OSError) as error:
        say(error, err=True)  # a read-only folder for the PNG too: one line
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
