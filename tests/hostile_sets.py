"""Hostile profile sets, as a pull request could carry them: a small copy of the committed CPU set
with a kind of field poisoned.

REFUSED maps each field kind whose poison the docs hook refuses to how the set carries it and what
the refusal names (file and field); tests/test_docs_hook_sets.py checks each one. `poison_text`
poisons, all at once, the fields that are free text, which the pages show as text;
tests/test_browser.py builds the site from that set and finds no alert and no file from outside
the set in it (OUTSIDE: what LICENSE, .git/config and /etc/passwd hold).
"""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from committed import CPU_SET

from attn.traces.common import artifacts

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = CPU_SET  # as HEAD holds it: a profile run here may have rewritten the work tree's
PUBLIC = "tracelens-h100-bert-small-sdpa-flash"  # shown on the SDPA page
ALERT = "<script>alert(1)</script><img src=x onerror=alert(2)>"
INCLUDE = '--8<-- "LICENSE"'  # pymdownx.snippets reads from the checkout's root
GIT = '--8<-- ".git/config"'
OUTSIDE = ["The attention-profiled authors", "repositoryformatversion", "root:x:0:0:"]
# Every kind of Markdown a set's text could slip into a page: HTML, a link, an attribute list,
# a hook marker, an include on a line of its own, an admonition and a tab opened where it starts.
POISON = (
    f'!!! danger "x" {ALERT} [x](javascript:alert(3)){{: onclick="alert(4)" }}'
    f'<!-- profile: naive -->\n{INCLUDE}\n{GIT}\n=== "tab"'
)
VARIANTS = ("naive", "inplace", "sdpa_cudnn", "decode_repeat_kv")  # one of them unavailable


def small_set(root: Path) -> Path:
    """root/cpu: the committed set's environment, claims, timing, overview, figures and a few variants
    with the diff between two of them, manifest rewritten; root/public: the traces of others."""
    folder = root / "cpu"
    folder.mkdir(parents=True)
    for name in (artifacts.ENVIRONMENT, artifacts.TIMING, artifacts.OVERVIEW, artifacts.CLAIMS):
        shutil.copy(COMMITTED / name, folder / name)
    for figure in ("benchmark", "decoding"):
        for ext in ("json", "svg"):
            shutil.copy(COMMITTED / f"{figure}.{ext}", folder / f"{figure}.{ext}")
    for name in VARIANTS:
        shutil.copytree(COMMITTED / name, folder / name)
    (folder / artifacts.DIFF_DIR).mkdir()
    shutil.copy(COMMITTED / "diff/naive__inplace.json", folder / "diff/naive__inplace.json")
    artifacts.write_manifest(folder)
    shutil.copytree(ROOT / "profiles" / artifacts.PUBLIC_DIR, root / artifacts.PUBLIC_DIR)
    return folder


def edit(path: Path, change: Callable[[object], None]) -> None:
    """Change the JSON at path in place (change mutates what it is given)."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def put(path: Path, **fields) -> None:
    edit(path, lambda d: d.update(fields))


def link(path: Path, target: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(target)


def _rows(name: str, key: str, value) -> Callable[[Path], None]:
    return lambda root: edit(root / f"cpu/{name}.json", lambda rows: rows[0].update({key: value}))


def _load(name: str) -> Callable[[Path], None]:
    # A busy machine's line says its cores.
    return lambda root: edit(
        root / f"cpu/{name}", lambda d: d["load"].update(cpu_count=ALERT, busy=True)
    )


def _public(change: Callable[[dict], None]) -> Callable[[Path], None]:
    return lambda root: edit(root / f"public/{PUBLIC}/diagnosis.json", change)


def _svg(svg: str) -> Callable[[Path], None]:
    return lambda root: (root / "cpu/naive/timeline.svg").write_text(svg)


SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" {}>{}</svg>'
)
LISTENER = "http://127.0.0.1:9"  # what a picture would fetch: an address nothing answers


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and header chunk declaring width x height (PIL refuses one this large
    only when it opens it, with a traceback)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0"))
        + chunk(b"IEND", b"")
    )


DEEP = (  # every kind of JSON file a set or a trace of others holds
    "cpu/environment.json", "cpu/index.json", "cpu/naive/summary.json", "cpu/timing.json",
    "cpu/benchmark.json", "cpu/diff/naive__inplace.json", f"public/{PUBLIC}/diagnosis.json",
)  # fmt: skip
REFUSED = {  # field kind -> (how the set carries it, what the refusal names)
    "summary dtype, an include": (
        lambda r: put(r / "cpu/naive/summary.json", dtype=GIT),
        "naive/summary.json: dtype is",
    ),
    "summary dtype, an include on its own line": (
        lambda r: put(r / "cpu/naive/summary.json", dtype=f"float32`\n{INCLUDE}\n`"),
        "naive/summary.json: dtype is",
    ),
    "memcpy direction": (
        lambda r: put(r / "cpu/naive/summary.json", memcpy_per_forward={ALERT: 1.0}),
        "naive/summary.json: memcpy_per_forward's key is",
    ),
    "environment value, an object": (
        lambda r: put(r / "cpu/environment.json", cpu_model={ALERT: ALERT}),
        "environment.json: cpu_model is {",
    ),
    "environment value, a list": (
        lambda r: put(r / "cpu/environment.json", threads=[ALERT]),
        "environment.json: threads is [",
    ),
    "environment version, HTML": (
        lambda r: put(r / "cpu/environment.json", torch_version=ALERT),
        "environment.json: torch_version is",
    ),
    "environment commit, HTML": (
        lambda r: put(r / "cpu/environment.json", git_commit=ALERT),
        "environment.json: git_commit is",
    ),
    "environment load.cpu_count, HTML": (
        _load(artifacts.ENVIRONMENT),
        "environment.json: load.cpu_count is",
    ),
    "timing load.cpu_count, HTML": (_load(artifacts.TIMING), "timing.json: load.cpu_count is"),
    "benchmark dtype": (_rows("benchmark", "dtype", ALERT), "benchmark.json: [0].dtype is"),
    "benchmark peaks, a text for a rate": (
        _rows("benchmark", "peaks", {"fp32_fma_tflops": ALERT}),
        "benchmark.json: [0].peaks.fp32_fma_tflops is",
    ),
    "benchmark tile path": (_rows("benchmark", "path", ALERT), "benchmark.json: [0].path is"),
    "decoding impl, not a string": (
        _rows("decoding", "impl", {"x": ALERT}),
        "decoding.json: [0].impl is",
    ),
    "manifest figure outside the set": (
        lambda r: put(r / "cpu/index.json", figures=["../../etc/passwd"]),
        "index.json: figures[0] is",
    ),
    "manifest diff outside the set": (
        lambda r: put(r / "cpu/index.json", diffs=["../../../.git/config"]),
        "index.json: diffs[0] is",
    ),
    "public source.commit": (
        _public(lambda d: d["source"].update(commit=f"x) {ALERT} (")),
        "diagnosis.json: source.commit is",
    ),
    "public source.path": (
        _public(lambda d: d["source"].update(path=f"x) {ALERT} [y](z")),
        "diagnosis.json: source.path is",
    ),
    "public lint, not a string": (
        _public(lambda d: d.update(lint=[{"x": ALERT}])),
        "diagnosis.json: lint[0] is",
    ),
    "overview.svg, a link to /etc/passwd": (
        lambda r: link(r / "cpu/overview.svg", Path("/etc/passwd")),
        "cpu/overview.svg is a link",
    ),
    "environment.json, a link": (
        lambda r: link(r / "cpu/environment.json", COMMITTED / "environment.json"),
        "cpu/environment.json is a link",
    ),
    "a diff, a link": (
        lambda r: link(r / "cpu/diff/naive__inplace.json", Path("/etc/passwd")),
        "cpu/diff/naive__inplace.json is a link",
    ),
    "the set's folder, a link": (
        lambda r: (shutil.rmtree(r / "cpu"), (r / "cpu").symlink_to(COMMITTED)),
        "cpu is a link",
    ),
    "a public trace's folder, a link": (
        lambda r: (
            shutil.rmtree(r / f"public/{PUBLIC}"),
            (r / f"public/{PUBLIC}").symlink_to(ROOT / f"profiles/public/{PUBLIC}"),
        ),
        f"public/{PUBLIC} is a link",
    ),
    "svg, a script": (
        _svg(SVG.format("", "<script>alert(1)</script>")),
        "naive/timeline.svg: <script> is not",
    ),
    "svg, an event handler": (
        _svg(SVG.format('onload="alert(1)"', "")),
        "naive/timeline.svg: onload on <svg> is not",
    ),
    "svg, a foreign object": (
        _svg(SVG.format("", "<foreignObject><div>x</div></foreignObject>")),
        "naive/timeline.svg: <foreignObject> is not",
    ),
    "svg, a link out": (
        _svg(SVG.format("", '<use xlink:href="https://example.com/x.svg#a"/>')),
        "naive/timeline.svg: xlink:href on <use> is",
    ),
    "svg, javascript in a style": (
        _svg(SVG.format("", "<rect style=\"fill: url('javascript:alert(1)')\"/>")),
        "naive/timeline.svg: style on <rect> is",
    ),
    "svg, an XSLT stylesheet that writes script": (
        _svg('<?xml-stylesheet type="text/xsl" href="table.txt"?>' + SVG.format("", "")),
        "naive/timeline.svg: a processing instruction <?xml-stylesheet",
    ),
    "svg, a stylesheet fetched": (
        _svg(f'<?xml-stylesheet href="{LISTENER}/a.css"?>' + SVG.format("", "")),
        "naive/timeline.svg: a processing instruction <?xml-stylesheet",
    ),
    "svg, image-set() in a style attribute": (
        _svg(SVG.format("", f"<rect style=\"fill: image-set('{LISTENER}/a.png' 1x)\"/>")),
        "naive/timeline.svg: style on <rect> is",
    ),
    "svg, image-set() in a style element": (
        _svg(SVG.format("", f"<style>rect {{fill: image-set('{LISTENER}/b.png' 1x)}}</style>")),
        "naive/timeline.svg: <style> holds 'image-set('",
    ),
    "svg, a cursor fetched": (
        _svg(SVG.format("", f"<style>svg {{cursor: url({LISTENER}/c.cur), auto}}</style>")),
        "naive/timeline.svg: <style> holds 'url(",
    ),
    "svg, a list-style-image fetched": (
        _svg(SVG.format("", f"<rect style='list-style-image: url({LISTENER}/d.png)'/>")),
        "naive/timeline.svg: style on <rect> is",
    ),
    "svg, an import": (
        _svg(SVG.format("", f'<style>@import "{LISTENER}/e.css";</style>')),
        "naive/timeline.svg: <style> holds '@'",
    ),
    "svg, a DOCTYPE with an external DTD": (
        _svg(f'<!DOCTYPE svg SYSTEM "{LISTENER}/f.dtd">' + SVG.format("", "")),
        "naive/timeline.svg: a DOCTYPE other than",
    ),
    "png, 50,000 x 50,000 pixels declared": (
        lambda r: (r / "cpu/naive/viewer.png").write_bytes(png_header(50_000, 50_000)),
        "naive/viewer.png is broken (ValueError: declares 50000 x 50000 pixels",
    ),
    **{
        f"{name}, nested 100,000 deep": (
            lambda r, name=name: (r / name).write_text("[" * 100_000 + "]" * 100_000),
            f"{name.partition('/')[2]}: nested deeper than",
        )
        for name in DEEP
    },
    **{
        f"{name}, a 401-digit integer": (
            lambda r, name=name: (r / name).write_text('{"x": 1' + "0" * 400 + "}"),
            f"{name.partition('/')[2]}: x is an integer of 401 digits",
        )
        for name in DEEP
    },
    "summary cpu_time_us, Infinity": (
        lambda r: (r / "cpu/naive/summary.json").write_text('{"cpu_time_us": Infinity}'),
        "naive/summary.json: cpu_time_us is inf, not a finite number",
    ),
    "svg, an entity": (
        _svg('<!DOCTYPE svg [<!ENTITY x "y">]>' + SVG.format("", "<text>&x;</text>")),
        "naive/timeline.svg: an entity",
    ),
}


def poison_text(root: Path) -> None:
    """Every free-text field a page shows, poisoned: a name or sentence a program chose."""
    cpu = root / "cpu"
    put(cpu / artifacts.ENVIRONMENT, cpu_model=POISON, device_name=POISON)
    put(cpu / "sdpa_cudnn/summary.json", reason=POISON)

    def summary(s):
        s["claims"][0].update(text=POISON, observed=POISON)
        s.update(kernels=[POISON], ops=[POISON, *s["ops"]])
        s["viewer"]["selected"] = POISON

    edit(cpu / "naive/summary.json", summary)
    edit(cpu / "benchmark.json", lambda rows: rows[0].update(cpu_capability=POISON))
    edit(cpu / "benchmark.json", lambda rows: [r.update(variant=POISON) for r in rows[1:2]])
    edit(cpu / "decoding.json", lambda rows: [r.update(impl=POISON) for r in rows if "impl" in r])

    def diff(d):
        d.update(headline=POISON, notes=[POISON])
        d["rows"][0]["name"] = POISON

    edit(cpu / "diff/naive__inplace.json", diff)

    def public(d):
        d["lint"] = [POISON]
        d["source"].update(license=POISON, GPU=POISON, torch=POISON)
        d["attention"][0].update(where=POISON, shapes=POISON, implementation=POISON)
        d["screenshot"].update(where=POISON, select=POISON)
        d["claims"][0].update(text=POISON, observed=POISON)

    edit(root / f"public/{PUBLIC}/diagnosis.json", public)
