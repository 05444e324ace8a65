"""Show a trace in the Catapult trace viewer (the code behind chrome://tracing), offline.

The viewer is two files from the package registries, fetched once into a cache folder and checked
against pinned hashes: `trace_viewer_full.html` from the torch-tb-profiler wheel (PyPI) and the
`webcomponents.min.js` polyfill it needs in current browsers (npm). Our own `index.html` beside
them loads a trace named in its query string. From there we take screenshots in headless Chromium
and publish the same viewer with the site.

    python -m attn.profiling.viewer fetch
    python -m attn.profiling.viewer shot profiles/cpu/naive/trace.json.gz viewer.png --select aten::clone
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.server
import json
import logging
import os
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
from urllib.parse import quote, urlencode

log = logging.getLogger(__name__)

TB_PROFILER = "torch-tb-profiler==0.4.3"
WEBCOMPONENTS = "webcomponents.js@0.7.24"
VIEWER_HTML = "trace_viewer_full.html"
POLYFILL_JS = "webcomponents.min.js"
SHA256 = {
    VIEWER_HTML: "a46409ce4119222d5149e46d80d6068309f0d68d100904204089b73150bb4bbd",
    POLYFILL_JS: "3858273ab39b299e7c2227f0830534afafaabf4a572c9ea73c2076fecbd8978c",
}
VIEWER_NOTICE = "LICENSE-trace-viewer.txt"
POLYFILL_NOTICE = "LICENSE-webcomponents.txt"
INDEX_HTML = "index.html"
FETCH_HINT = "run once with access to PyPI and npm: python -m attn.profiling.viewer fetch"

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


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/attention-profiled/trace-viewer, else ~/.cache/...: never the repository."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-profiled" / "trace-viewer"


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
    """Write bytes atomically (scratch file, then rename), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def why_unavailable(cache_dir: Path | None = None) -> str | None:
    """None when the fetched files are in the cache folder with their pinned hashes, else why not."""
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    for name, expected in SHA256.items():
        path = folder / name
        if not path.is_file():
            return f"the trace viewer is not fetched ({path} is missing); {FETCH_HINT}"
        if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            return f"{path} does not have its pinned sha256; {FETCH_HINT}"
    return None


def require_viewer(cache_dir: Path | None = None) -> Path:
    """The cache folder, ready to serve (index.html refreshed); raises ViewerUnavailable if not."""
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    why = why_unavailable(folder)
    if why is not None:
        raise ViewerUnavailable(why)
    _write_index(folder)
    return folder


# --- license notices ------------------------------------------------------------------------------

# The BSD text both projects publish (Chromium's LICENSE; Polymer's LICENSE.txt), with their holder.
BSD_3 = """\
Copyright {holder}. All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are
met:

   * Redistributions of source code must retain the above copyright
notice, this list of conditions and the following disclaimer.
   * Redistributions in binary form must reproduce the above
copyright notice, this list of conditions and the following disclaimer
in the documentation and/or other materials provided with the
distribution.
   * Neither the name of Google Inc. nor the names of its
contributors may be used to endorse or promote products derived from
this software without specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
"AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR
A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
OWNER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT
LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE,
DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
(INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
"""


def _viewer_notice(package_license: bytes) -> str:
    """Catapult's notice (the file carries only a pointer to it) and the wheel's own LICENSE."""
    return (
        f"{VIEWER_HTML} is the Catapult trace viewer (https://github.com/catapult-project/catapult),\n"
        f"as shipped in the {TB_PROFILER} wheel on PyPI. Its code says: 'Copyright 2015 The\n"
        "Chromium Authors. All rights reserved. Use of this source code is governed by a\n"
        "BSD-style license that can be found in the LICENSE file.' That license:\n\n"
        + BSD_3.format(holder="2015 The Chromium Authors")
        + f"\n--- The LICENSE file of the {TB_PROFILER} wheel, as shipped ---\n\n"
        + package_license.decode("utf-8")
    )


def _polyfill_notice(polyfill: bytes) -> str:
    """The file's own @license header, and the Polymer BSD text it points to."""
    header = re.match(rb"\s*(/\*\*.*?\*/)", polyfill, re.DOTALL)
    return (
        f"{POLYFILL_JS} is from the npm package {WEBCOMPONENTS}\n"
        "(https://github.com/webcomponents/webcomponentsjs, license BSD-3-Clause). Its header:\n\n"
        + (header.group(1).decode("utf-8") if header else "")
        + "\n\nThe license it points to (http://polymer.github.io/LICENSE.txt):\n\n"
        + BSD_3.format(holder="(c) 2014 The Polymer Project Authors")
    )


# --- our page -------------------------------------------------------------------------------------

# index.html?trace=URL[&title=TEXT][&range=NAME[&select=NAME]][&still=1] loads the trace (gzip or
# plain JSON) and, given a range, zooms to its middle occurrence and selects `select` inside it (else
# the range itself); `still` lays the page out for a screenshot.
# window.traceViewer.opened resolves to {range, selected} once that is on screen.
INDEX = """\
<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>Trace viewer</title>
<link rel="icon" href="data:,">
<!-- The viewer is an HTML import: current browsers need the polyfill (and then it warns). -->
<script>window.__hideTraceViewerPolyfillWarning = true;</script>
<script src="webcomponents.min.js"></script>
<link rel="import" href="trace_viewer_full.html" onerror="window.importFailed = true">
<style>
  html, body { margin: 0; padding: 0; width: 100%; height: 100%; overflow: hidden; }
  tr-ui-timeline-view { width: 100%; height: 100%; }
  tr-ui-timeline-view:focus { outline: none; }
  #status { position: fixed; top: 40%; width: 100%; text-align: center; font: 16px sans-serif; }
</style>
</head>
<body>
<div id="status">Loading the trace viewer…</div>
<script>
"use strict";
window.traceViewer = (function () {
  var status = document.getElementById("status");
  var viewer;

  var ready = new Promise(function (resolve, reject) {
    document.addEventListener("WebComponentsReady", function () {
      if (window.importFailed || !window.tr) {
        return reject(new Error("trace_viewer_full.html did not load"));
      }
      var container = document.createElement("track-view-container");
      container.id = "track_view_container";
      viewer = document.createElement("tr-ui-timeline-view");
      Polymer.dom(viewer).appendChild(container);
      viewer.globalMode = true;  // keyboard shortcuts (w/a/s/d, f, m) work anywhere on the page
      Polymer.dom(document.body).appendChild(viewer);
      resolve(viewer);
    });
  });

  /* The trace as text: gzip (as committed) is recognised by its magic bytes, not its name,
     because a server may already have decoded it (Content-Encoding: gzip). */
  async function fetchText(url) {
    var response = await fetch(url);
    if (!response.ok) throw new Error(url + ": HTTP " + response.status);
    var bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      return new Response(stream).text();
    }
    return new TextDecoder().decode(bytes);
  }

  async function loadText(text, title) {
    await ready;
    var model = new tr.Model();
    await new tr.importer.Import(model).importTracesWithProgressDialog([text]);
    viewer.model = model;
    viewer.viewTitle = title;
    await viewer.builtPromise;
    // The track view sets its first viewport once attached; a zoom before that would be undone.
    while (viewer.trackView.pollIfViewportAttachedInterval_ !== undefined) {
      await new Promise(function (r) { setTimeout(r, 20); });
    }
  }

  async function load(url, title) {
    var path = new URL(url, location.href).pathname;
    await loadText(await fetchText(url), title || decodeURIComponent(path.split("/").slice(-3).join("/")));
  }

  function slicesNamed(title) {
    var found = [];
    for (var e of viewer.model.getDescendantEvents()) {
      if (e instanceof tr.model.Slice && e.title === title) found.push(e);
    }
    return found.sort(function (a, b) { return a.start - b.start; });
  }

  /* Zoom to the middle `rangeName` on the CPU (widened to its GPU twin, the GPU range of the same
     rank, where the trace has them) and select `selectName` inside the view, else the range. */
  function focus(rangeName, selectName) {
    var all = slicesNamed(rangeName);
    var isGpu = function (e) { return e.category === "gpu_user_annotation"; };
    var cpu = all.filter(function (e) { return !isGpu(e); });
    var gpu = all.filter(isGpu);
    var ranges = cpu.length ? cpu : gpu;
    if (!ranges.length) throw new Error("the trace has no event named " + rangeName);
    var index = Math.floor((ranges.length - 1) / 2);
    var range = ranges[index];
    var twin = cpu.length && gpu.length === cpu.length ? gpu[index] : range;
    var start = Math.min(range.start, twin.start);
    var end = Math.max(range.end, twin.end);
    zoomTo(start, end);
    var chosen = range;
    if (selectName) {
      chosen = slicesNamed(selectName).find(function (e) { return e.start >= start && e.end <= end; });
      if (!chosen) throw new Error("no event named " + selectName + " inside " + rangeName);
    }
    viewer.brushingStateController.changeSelectionFromTimeline(new tr.model.EventSet([chosen]));
    return {
      range: { name: rangeName, index: index, count: ranges.length, start_ms: start, end_ms: end },
      selected: chosen.title,
    };
  }

  /* For a still picture: the details panel takes the height the tracks leave free (at least a
     third of the page), and the floating mouse-mode buttons go. */
  function stillPicture() {
    var tracksBottom = viewer.trackView.modelTrack_.getBoundingClientRect().bottom;
    var free = window.innerHeight - tracksBottom - 32;  // room for the viewer's hint line
    viewer.$.drag_handle.setTargetSize_(Math.max(free, window.innerHeight / 3));
    var buttons = document.querySelectorAll("tr-ui-b-mouse-mode-selector");
    Array.prototype.forEach.call(buttons, function (e) { e.style.display = "none"; });  // polyfilled NodeList
  }

  /* What the 'f' key does for a selection, without its animation and with a 5% margin. */
  function zoomTo(start, end) {
    var trackView = viewer.trackView;
    var pad = (end - start) * 0.05;
    trackView.modelTrackContainer_.updateCanvasSizeIfNeeded_();
    var transform = new tr.ui.TimelineDisplayTransform(trackView.viewport.currentDisplayTransform);
    transform.xSetWorldBounds(start - pad, end + pad, trackView.modelTrackContainer_.canvas.width);
    trackView.viewport.setDisplayTransformImmediately(transform);
  }

  async function open(query) {
    var trace = query.get("trace");
    if (!trace) throw new Error("no trace: open this page as index.html?trace=URL");
    await load(trace, query.get("title"));
    status.hidden = true;
    var facts = query.get("range") ? focus(query.get("range"), query.get("select")) : null;
    if (query.get("still")) stillPicture();
    // Resolve once the zoomed view and the details panel have been painted.
    await new Promise(function (r) { requestAnimationFrame(function () { requestAnimationFrame(r); }); });
    return facts;
  }

  var opened = open(new URLSearchParams(location.search));
  opened.catch(function (error) {
    status.hidden = false;
    status.textContent = "Could not show the trace: " + error.message;
  });
  return { ready: ready, opened: opened, load: load, loadText: loadText, focus: focus };
})();
</script>
</body>
</html>
"""


def _write_index(folder: Path) -> None:
    path = folder / INDEX_HTML
    if not path.is_file() or path.read_text(encoding="utf-8") != INDEX:
        _write(path, INDEX.encode("utf-8"))


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
    folder = require_viewer(cache_dir)
    chromium = find_chromium()
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ViewerUnavailable("playwright is not installed (pip install -e .[test])") from None
    trace_path, png_path = Path(trace_path).resolve(), Path(png_path)
    if not trace_path.is_file():
        raise FileNotFoundError(trace_path)

    # One folder to serve: the viewer, and the trace beside it (links, not copies).
    with tempfile.TemporaryDirectory(prefix="trace-viewer-") as tmp:
        root = Path(tmp)
        (root / "viewer").symlink_to(folder, target_is_directory=True)
        trace_name = "trace" + "".join(trace_path.suffixes)
        (root / trace_name).symlink_to(trace_path)
        query = {
            "trace": f"../{trace_name}",
            "title": "/".join(trace_path.parts[-3:]),  # e.g. cpu/naive/trace.json.gz
            "range": range_name or "",
            "select": select or "",
            "still": "1",
        }
        with serve(root) as base, sync_playwright() as p:
            try:
                browser = p.chromium.launch(
                    executable_path=chromium, headless=True, args=CHROMIUM_ARGS
                )
            except PlaywrightError as error:
                why = str(error).splitlines()[0]
                raise ViewerUnavailable(f"{chromium} did not start ({why})") from None
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.set_default_timeout(TIMEOUT_MS)
                page.goto(f"{base}viewer/{INDEX_HTML}?{urlencode(query, quote_via=quote)}")
                try:
                    facts = page.evaluate("window.traceViewer.opened") or {}
                except PlaywrightError as error:
                    message = str(error).splitlines()[0]
                    raise RuntimeError(
                        f"the viewer could not show {trace_path}: {message}"
                    ) from None
                selected = _selected_title(page) if range_name else None
                _write(png_path, page.screenshot(type="png"))
            finally:
                browser.close()
    return {"selected": selected, "range": facts.get("range"), "png": png_path}


def _selected_title(page) -> str | None:
    """The Title row of the details panel at the bottom, as the reader sees it."""
    details = page.locator("tr-ui-a-single-event-sub-view").first
    details.wait_for()
    for line in details.inner_text().splitlines():
        label, _, value = line.partition("\t")
        if label.strip() == "Title":
            return value.strip()
    return None


# --- publishing -----------------------------------------------------------------------------------


def publish_viewer(site_dir: Path, cache_dir: Path | None = None) -> Path | None:
    """Copy the viewer, index.html and notices into `site_dir/trace-viewer/`; None (logged) if not fetched."""
    why = why_unavailable(cache_dir)
    if why is not None:
        log.warning("trace viewer not published: %s", why)
        return None
    folder = require_viewer(cache_dir)
    dest = Path(site_dir) / "trace-viewer"
    dest.mkdir(parents=True, exist_ok=True)
    for name in (INDEX_HTML, VIEWER_HTML, POLYFILL_JS, VIEWER_NOTICE, POLYFILL_NOTICE):
        shutil.copyfile(folder / name, dest / name)
    return dest


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
    except ViewerUnavailable as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
