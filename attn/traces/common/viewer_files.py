"""The offline trace viewer's files, as the site publishes them beside its pages: copied, never run.

The viewer is two files fetched once into a cache folder by `python -m attn.profiling.viewer fetch`
and checked here against pinned hashes: `trace_viewer_full.html` from the torch-tb-profiler wheel
and the `webcomponents.min.js` polyfill it needs, with their license notices; our own `index.html`
(attn/profiling/trace_viewer/, package data) loads a trace named in its query string. The docs
hook publishes them after a build; attn.profiling.viewer fetches them and takes screenshots.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

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
# Our own files (index.html, the notices' templates): package data beside the code that fetches.
OURS = Path(__file__).resolve().parents[2] / "profiling" / "trace_viewer"


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/attention-profiled/trace-viewer, else ~/.cache/...: never the repository."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-profiled" / "trace-viewer"


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


def publish_viewer(site_dir: Path, cache_dir: Path | None = None) -> Path | None:
    """Copy the viewer, index.html and notices into `site_dir/trace-viewer/`; None (logged) if not fetched."""
    why = why_unavailable(cache_dir)
    if why is not None:
        log.warning("trace viewer not published: %s", why)
        return None
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    dest = Path(site_dir) / "trace-viewer"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(OURS / INDEX_HTML, dest / INDEX_HTML)  # ours, as the package holds it now
    for name in (VIEWER_HTML, POLYFILL_JS, VIEWER_NOTICE, POLYFILL_NOTICE):
        shutil.copyfile(folder / name, dest / name)
    return dest
