"""MkDocs hook: replace profile markers in chapters with the artifacts under profiles/.

Markers, each alone on its own line (inline code such as `<!-- profile: naive -->` is left alone):

    <!-- profile: VARIANT -->         one content tab per hardware set that has VARIANT: the run's
                                      environment and shape, per-forward numbers, table.md, the
                                      trace-viewer screenshot, timeline.svg, links to the trace
    <!-- profile-check: VARIANT -->   "check your guess": each claim about VARIANT as evaluated on
                                      every hardware set, with what was observed
    <!-- profile-claim: VARIANT N --> claim N of VARIANT, inline: the sentence and, per set, whether
                                      it holds and the value observed. N counts the variant's CPU
                                      sentences, then its GPU ones, as index.json lists them
    <!-- profile-claim: benchmark N --> claim N of attn.profiling.claims.BENCHMARK_CLAIMS, checked
                                      against each set's benchmark.json when the site is built
    <!-- profile-compare: A B ... --> one tab per hardware set: per-forward numbers of the variants named
    <!-- profile-env -->               a table of every hardware set's environment.json
    <!-- profile-glance -->            every variant of every set, side by side
    <!-- profile-figure: NAME -->      scaling or benchmark picture per set

A hardware set is a folder of profiles/ (or of $ATTN_PROFILES_DIR) with an index.json manifest,
which names its variants and their files; the hook reads the manifest and the files it names, never
measuring code. A set that is broken (a summary that is not one, a file the manifest names missing
or unreadable, a folder the manifest does not know) fails the build with one line naming the file.
GPU sets come first, then CPU.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import posixpath
import re
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.profiles")

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*profile(?P<kind>|-compare|-env|-glance|-figure|-check|-claim|-diff)"
    r"\s*(?::(?P<args>[^>]*?))?\s*-->[ \t]*$",
    re.M,
)
FIGURES = ("scaling", "benchmark", "decoding")  # set-level pictures: <hardware>/<name>.svg
PUBLISHED = {".json", ".gz", ".txt", ".svg", ".png"}  # table.md is inlined into pages instead
DEVICE_ORDER = {"cuda": 0, "cpu": 2}  # GPUs first, anything else in between, CPU last
DEVICE_WORDS = {"cpu": "On CPU", "cuda": "On a GPU"}

_state: dict = {"root": None, "known": None, "sets": None}


# --- reading and checking profiles/ -----------------------------------------------------------


class BrokenSet(PluginError):
    """A profile set the site must not publish; the message names the file and the problem."""


def _read_json(path: Path, kind: type = dict):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BrokenSet(f"profiles hook: cannot read {path}: {e}") from e
    if not isinstance(data, kind):
        raise BrokenSet(
            f"profiles hook: {path} holds a {type(data).__name__}, not a {kind.__name__}"
        )
    return data


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_summary(path: Path, variant: str) -> dict:
    """The summary at path, or BrokenSet naming what is wrong with it."""
    s = _read_json(path)
    if s.get("variant") != variant:
        raise BrokenSet(
            f"profiles hook: {path} is the summary of {s.get('variant')!r}, not {variant!r} "
            "(a folder copied over another?)"
        )
    if not isinstance(s.get("available"), bool):
        raise BrokenSet(f"profiles hook: {path} has no 'available' true/false")
    if not s["available"]:
        return s
    for key in ("cpu_time_us", "ops_per_forward"):
        if not _number(s.get(key)):
            raise BrokenSet(f"profiles hook: {path}: {key} is {s.get(key)!r}, not a number")
    shape = s.get("shape")
    if not isinstance(shape, dict) or not all(
        _number(shape.get(k)) for k in ("batch", "heads", "seq_q", "seq_k", "head_dim")
    ):
        raise BrokenSet(
            f"profiles hook: {path}: shape is {shape!r}, not batch/heads/seq_q/seq_k/head_dim"
        )
    return s


def check_file(path: Path) -> None:
    """A published artifact must be whole: gzip JSON traces decode, pictures parse, data loads."""
    try:
        if path.name.endswith(".json.gz"):
            json.loads(gzip.decompress(path.read_bytes()))
        elif path.suffix == ".svg":
            ElementTree.fromstring(path.read_bytes())
        elif path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".png" and not path.read_bytes().startswith(b"\x89PNG"):
            raise ValueError("not a PNG")
        elif path.stat().st_size == 0:
            raise ValueError("empty")
    except (OSError, ValueError, EOFError, ElementTree.ParseError) as e:
        raise BrokenSet(f"profiles hook: {path} is broken ({type(e).__name__}: {e})") from e


def load_set(folder: Path) -> dict:
    """One hardware set, checked: {slug, env, manifest, title, device_type, summaries}."""
    manifest = _read_json(folder / "index.json")
    variants = manifest.get("variants")
    if not isinstance(variants, dict):
        raise BrokenSet(f"profiles hook: {folder / 'index.json'} has no 'variants' object")
    on_disk = {
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name != "diff"
    }
    unknown = sorted(on_disk - set(variants))
    if unknown:
        raise BrokenSet(
            f"profiles hook: {folder}/{unknown[0]}/ is not in {folder / 'index.json'}: "
            "rerun the profile, or delete the folder"
        )
    summaries = {}
    for name, entry in variants.items():
        vdir = folder / name
        for f in entry.get("files", []):
            if not (vdir / f).is_file():
                raise BrokenSet(
                    f"profiles hook: {folder / 'index.json'} lists {vdir / f}, which is missing"
                )
            check_file(vdir / f)
        summaries[name] = check_summary(vdir / "summary.json", name)
    for figure in manifest.get("figures", []):
        check_file(folder / f"{figure}.svg")
        check_file(folder / f"{figure}.json")
    env = _read_json(folder / "environment.json") if (folder / "environment.json").exists() else {}
    device_type = manifest.get("device_type") or env.get("device_type") or "cpu"
    name = manifest.get("device_name") or env.get("device_name") or folder.name
    return {
        "slug": folder.name,
        "folder": folder,
        "env": env,
        "manifest": manifest,
        "summaries": summaries,
        "title": "CPU" if device_type == "cpu" else name,
        "device_type": device_type,
    }


def hardware_sets(root: Path) -> list[dict]:
    """Every hardware set under root (folders with an index.json), checked, GPUs first."""
    root = Path(root)
    if _state.get("sets") is not None and _state.get("sets_root") == root:
        return _state["sets"]
    found = []
    for folder in sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith(".")):
        if not (folder / "index.json").is_file():
            log.info(
                "profiles hook: %s has no index.json; not a profile set, not published", folder
            )
            continue
        found.append(load_set(folder))
    return sorted(found, key=lambda h: (DEVICE_ORDER.get(h["device_type"], 1), h["title"]))


# --- rendering --------------------------------------------------------------------------------


def _link(target: str, src_uri: str) -> str:
    """Relative URL from the Markdown page to a path in the docs tree (MkDocs resolves it)."""
    return posixpath.relpath(target, posixpath.dirname(src_uri) or ".")


def _time(us: float | None) -> str | None:
    if us is None:
        return None
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def _count(n: float | None) -> str | None:
    if n is None:
        return None
    return str(int(n)) if float(n).is_integer() else f"{n:.1f}"


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def environment_line(hw: dict) -> str:
    """Device, torch (and CUDA) version, date and commit of a hardware set, on one line."""
    env = hw["env"]
    parts = [env.get("device_name") or hw["title"]]
    if hw["device_type"] == "cpu" and env.get("cpu_model"):
        threads = f", {env['threads']} threads" if env.get("threads") else ""
        parts[0] = f"CPU: {env['cpu_model']}{threads}"
    parts.append(f"torch {env.get('torch_version', '?')}")
    if env.get("cuda_version"):
        parts.append(f"CUDA {env['cuda_version']}")
    if env.get("cudnn_version"):
        parts.append(f"cuDNN {env['cudnn_version']}")
    if env.get("date"):
        parts.append(f"profiled {env['date']}")
    if env.get("git_commit"):
        parts.append(f"commit `{env['git_commit']}`")
    return " · ".join(parts)


COLUMNS = {  # per-forward number -> how to read it from a summary (None: not measured)
    "CPU time": lambda s: _time(s.get("cpu_time_us")),
    "device time": lambda s: _time(s.get("device_time_us")),
    "ATen ops": lambda s: _count(s.get("ops_per_forward")),
    "kernels": lambda s: _count(s.get("kernels_per_forward")),
    "peak memory": lambda s: _bytes(s["peak_memory_bytes"]) if s.get("peak_memory_bytes") else None,
}


def setup_line(summary: dict) -> str:
    """What was run: dtype, shape and masking."""
    s = summary.get("shape", {})
    shape = (
        f"batch {s.get('batch')}, heads {s.get('heads')}, "
        f"seq {s.get('seq_q')} (q) × {s.get('seq_k')} (k/v), head_dim {s.get('head_dim')}"
    )
    causal = "causal" if summary.get("is_causal") else "not causal"
    return f"`{summary.get('dtype', '?')}` · {shape} · {causal}"


def memcpy_text(summary: dict) -> str | None:
    counts = summary.get("memcpy_per_forward")
    if counts is None:
        return None
    return ", ".join(f"{_count(n)} {d}" for d, n in counts.items() if n) or "0"


def run_line(summary: dict) -> str:
    """What was run, and the per-forward numbers (memcpys and memsets apart from kernels)."""
    parts = [
        f"{read(summary)} {label}" for label, read in COLUMNS.items() if read(summary) is not None
    ]
    if memcpy_text(summary) is not None:
        parts += [
            f"{memcpy_text(summary)} memcpy",
            f"{_count(summary.get('memset_per_forward'))} memset",
        ]
    line = setup_line(summary)
    return line + (f"  \n**Per forward:** {' · '.join(parts)}" if parts else "")


VERDICT = {True: ("✓", "holds"), False: ("✗", "does not hold"), None: ("?", "cannot tell")}


def _code(text: str) -> str:
    """Backticks around op names in a claim's sentence."""
    return re.sub(r"(?<!`)\b((?:aten|attn)::\w+)", r"`\1`", text)


def claims_of(name: str, hw: dict) -> list[dict]:
    """The claims as evaluated on a set ([] when the variant did not run there)."""
    s = hw["summaries"].get(name)
    return (s or {}).get("claims") or [] if s and s.get("available") else []


def claim_texts(name: str, device_type: str, sets: list[dict]) -> list[str]:
    """The claim sentences about a device type, from any manifest that lists them."""
    for hw in sets:
        texts = ((hw["manifest"].get("claims") or {}).get(name) or {}).get(device_type)
        if texts:
            return texts
    return []


def render_check(name: str, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-check: name -->`: every claim, as checked on every set."""
    sets = hardware_sets(root)
    tabs = []
    for hw in sets:
        claims = claims_of(name, hw)
        if not claims:
            continue
        lines = []
        for c in claims:
            mark, word = VERDICT[c.get("holds")]
            lines.append(
                f"- {mark} **{word}:** {_code(c['text'])} <small>Observed: {_code(c.get('observed') or '–')}</small>"
            )
        tabs.append((hw["title"], "\n".join(lines)))
    waiting = []
    profiled = {hw["device_type"] for hw in sets if claims_of(name, hw)}
    for device_type in ("cuda", "cpu"):
        if device_type in profiled:
            continue
        for text in claim_texts(name, device_type, sets):
            waiting.append(f"- {DEVICE_WORDS[device_type]}: {_code(text)}")
    body = _tabs(tabs) if tabs else ""
    if waiting:
        body += (
            f'\n!!! note "Not checked yet: {name}"\n\n    No profile set here has run these; each run on such '
            "hardware checks them:\n\n" + textwrap.indent("\n".join(waiting), "    ") + "\n"
        )
    return body or _not_profiled(f"`{name}`", src_uri)


def claim_sentences(name: str, sets: list[dict]) -> list[str]:
    """Every sentence claimed about a variant: its CPU ones, then its GPU ones (as index.json lists
    them), then any a set evaluated that its manifest does not list yet."""
    texts: list[str] = []
    for hw in sets:
        listed = (hw["manifest"].get("claims") or {}).get(name) or {}
        for device_type in ("cpu", "cuda"):
            texts += [t for t in listed.get(device_type) or [] if t not in texts]
    for hw in sorted(sets, key=lambda h: h["device_type"] != "cpu"):  # CPU first, as above
        texts += [c["text"] for c in claims_of(name, hw) if c["text"] not in texts]
    return texts


def _claim_box(text: str, results: list[tuple[bool | None, str, str]], waiting: str) -> str:
    """An admonition titled with the sentence: one line per set (verdict, set, observed value)."""
    verdicts = {holds for holds, _, _ in results}
    kind = "note" if not results else "success" if verdicts == {True} else "warning"
    lines = [
        f"{VERDICT[holds][0]} **{VERDICT[holds][1]}** on {title} (observed: {_code(observed or '–')})"
        for holds, title, observed in results
    ] or [waiting]
    title = _code(text).replace(chr(34), chr(39))
    return f'!!! {kind} "{title}"\n\n    ' + "  \n    ".join(lines) + "\n"


def render_claim(name: str, index: int, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-claim: name N -->`: one claim, inline, per set that checked it."""
    sets = hardware_sets(root)
    texts = claim_sentences(name, sets)
    if index >= len(texts):
        raise PluginError(
            f"{src_uri}: {name!r} has {len(texts)} claim(s) in the profile sets; no claim {index}"
        )
    text = texts[index]
    results = [
        (c.get("holds"), hw["title"], c.get("observed"))
        for hw in sets
        for c in claims_of(name, hw)
        if c["text"] == text
    ]
    return _claim_box(
        text, results, "Not checked yet: no profile set here has run it on such hardware."
    )


def render_benchmark_claim(index: int, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-claim: benchmark N -->`: checked on each set's benchmark.json."""
    # Checks over the rows, as the claims module defines them: they read, they measure nothing.
    from attn.profiling.claims import BENCHMARK_CLAIMS

    if index >= len(BENCHMARK_CLAIMS):
        raise PluginError(
            f"{src_uri}: there are {len(BENCHMARK_CLAIMS)} benchmark claims; no claim {index}"
        )
    claim = BENCHMARK_CLAIMS[index]
    results = []
    for hw in hardware_sets(root):
        if hw["device_type"] != claim.device_type:
            continue
        if "benchmark" not in hw["manifest"].get("figures", []):
            continue
        holds, observed = claim.check(_read_json(hw["folder"] / "benchmark.json", list))
        results.append((holds, hw["title"], observed))
    where = {"cpu": "on a CPU", "cuda": "on a GPU"}[claim.device_type]
    return _claim_box(
        claim.text,
        results,
        f"Not measured yet: no profile set here has a benchmark {where}. "
        "`nox -s benchmark` on such a machine makes one, and the next build checks it.",
    )


def _tabs(tabs: list[tuple[str, str]]) -> str:
    """A content-tab set; `===!` opens a new set, so it never merges with tabs written around it."""
    return "\n".join(
        f'{"===!" if i == 0 else "==="} "{title}"\n\n{textwrap.indent(body.strip(), "    ")}\n'
        for i, (title, body) in enumerate(tabs)
    )


def _not_profiled(what: str, src_uri: str) -> str:
    return (
        f'!!! note "Not profiled yet"\n\n'
        f"    No hardware set in `profiles/` has artifacts for {what} yet. "
        f"[Reproduce]({_link('reproduce.md', src_uri)}) says how to make them.\n"
    )


def render_variant(name: str, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile: name -->`: one tab per hardware set that has the variant."""
    tabs = []
    for hw in hardware_sets(root):
        summary = hw["summaries"].get(name)
        if summary is None:
            continue
        if not summary["available"]:
            reason = _sentence(summary.get("reason") or "No reason was recorded.")
            tabs.append((hw["title"], f'!!! note "Not available on {hw["title"]}"\n\n    {reason}'))
            continue
        files = set(hw["manifest"]["variants"][name].get("files", []))
        url = f"profiles/{hw['slug']}/{name}"
        body = [f"<small>{environment_line(hw)}</small>", run_line(summary)]
        if "table.md" in files:
            body.append((hw["folder"] / name / "table.md").read_text(encoding="utf-8").strip())
        if "viewer.png" in files:
            png = _link(url + "/viewer.png", src_uri)
            alt = f"The trace of {name} on {hw['title']} in a trace viewer, zoomed to one attn_fwd"
            body.append(f"![{alt}]({png}){{ loading=lazy }}")
        if "timeline.svg" in files:
            alt = f"Timeline of one profiled forward of {name} on {hw['title']}"
            body.append(f"![{alt}]({_link(url + '/timeline.svg', src_uri)}){{ loading=lazy }}")
        if "trace.json.gz" in files:
            trace = _link(url + "/trace.json.gz", src_uri)
            title = f"{name} on {hw['title']}"
            body.append(
                f'[Open in Perfetto]({trace}){{ .md-button data-perfetto-trace data-perfetto-title="{title}" }} '
                f'[Open here]({trace}){{ .md-button data-trace-viewer data-trace-range="attn_fwd" }}'
            )
        kernels = summary.get("kernels") or []
        if kernels:
            items = "\n".join(f"    - `{k}`" for k in kernels)
            body.append(f'??? info "Kernel names ({len(kernels)})"\n\n{items}')
        links = []
        if "trace.json.gz" in files:
            links.append(f"[trace.json.gz]({_link(url + '/trace.json.gz', src_uri)})")
        if "table.txt" in files:
            links.append(
                f"[table.txt]({_link(url + '/table.txt', src_uri)}) (the profiler's own table)"
            )
        if links:
            body.append("Download: " + " · ".join(links))
        tabs.append((hw["title"], "\n\n".join(body)))
    if not tabs:
        log.info("profiles hook: %s has a marker for %r but no artifacts", src_uri, name)
        return _not_profiled(f"`{name}`", src_uri)
    return _tabs(tabs)


def render_compare(names: list[str], root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-compare: a b -->`: a per-forward table per hardware set."""
    tabs = []
    for hw in hardware_sets(root):
        summaries = {n: hw["summaries"][n] for n in names if n in hw["summaries"]}
        if not summaries:
            continue
        ran = [s for s in summaries.values() if s["available"]]
        columns = [c for c, read in COLUMNS.items() if any(read(s) is not None for s in ran)]
        columns = columns or ["CPU time"]
        rows = [
            f"| `{name}` | " + " | ".join(COLUMNS[c](s) or "–" for c in columns) + " |"
            if s["available"]
            else f"| `{name}` | not available here |" + " |" * (len(columns) - 1)
            for name, s in summaries.items()
        ]
        head = "| variant | " + " | ".join(columns) + " |\n|---|" + "--:|" * len(columns)
        shapes = {setup_line(s) for s in ran}
        shape = (
            shapes.pop() if len(shapes) == 1 else "rows at different shapes: see each variant's tab"
        )
        body = f"<small>{environment_line(hw)}</small>\n\n{shape}. Per forward:\n\n" + "\n".join(
            [head, *rows]
        )
        tabs.append((hw["title"], body))
    if not tabs:
        return _not_profiled(", ".join(f"`{n}`" for n in names), src_uri)
    return _tabs(tabs)


def render_env(root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-env -->`: one row per hardware set."""
    sets = hardware_sets(root)
    if not sets:
        return _not_profiled("any variant", src_uri)
    rows = [
        "| folder | device | torch | CUDA | cuDNN | date | commit |",
        "|---|---|---|---|---|---|---|",
    ]
    for hw in sets:
        env = hw["env"]
        device = env.get("device_name") or hw["title"]
        if hw["device_type"] == "cpu" and env.get("threads"):
            device += f" ({env['threads']} threads)"
        cells = [env.get(k) for k in ("torch_version", "cuda_version", "cudnn_version", "date")]
        commit = f"`{env['git_commit']}`" if env.get("git_commit") else None
        values = [f"`profiles/{hw['slug']}/`", device, *cells, commit]
        rows.append("| " + " | ".join("–" if v is None else str(v) for v in values) + " |")
    return "\n".join(rows) + "\n"


def _bytes(n: int | None) -> str:
    if n is None:
        return "–"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def render_glance(root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-glance -->`: every variant of every hardware set, side by side."""
    tabs = []
    for hw in hardware_sets(root):
        found = hw["summaries"]
        summaries = [found[n] for n in _state["known"] or found if n in found]
        if not summaries:
            continue
        gpu = hw["device_type"] == "cuda"
        key = "device_time_us" if gpu else "cpu_time_us"
        naive = (found.get("naive") or {}).get(key)
        count = ("kernels", "kernels_per_forward") if gpu else ("ATen ops", "ops_per_forward")
        ran = [x for x in summaries if x["available"]]
        # Speedups compare rows at naive's shape; rows run at other shapes get a table of their own.
        common = setup_line(found["naive"]) if found.get("naive", {}).get("available") else None
        common = common or (setup_line(ran[0]) if ran else None)
        head = ["variant", f"{count[0]} / forward", "CPU time"] + (["device time"] if gpu else [])
        head += ["speedup over naive", "peak memory", "lesson"]
        rows = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 2) + "---|"]
        elsewhere = []
        for s in summaries:
            if s["available"] and setup_line(s) != common:
                elsewhere.append(s)
                continue
            if not s["available"]:
                cells = ["not available here"] + ["–"] * (len(head) - 3)
                rows.append(
                    f"| `{s['variant']}` | " + " | ".join(cells) + f" | {s.get('lesson', '')} |"
                )
                continue
            speedup = f"{naive / s[key]:.2f}×" if naive and s.get(key) else "–"
            cells = [_count(s.get(count[1])) or "–", _time(s.get("cpu_time_us")) or "–"]
            cells += [_time(s.get("device_time_us")) or "–"] if gpu else []
            cells += [speedup, _bytes(s.get("peak_memory_bytes")), s.get("lesson", "")]
            rows.append(f"| `{s['variant']}` | " + " | ".join(cells) + " |")
        body = [f"<small>{environment_line(hw)}</small>"] + ([common] if common else [])
        body.append("\n".join(rows))
        if elsewhere:
            other = [
                "| variant | shape | " + f"{count[0]} / forward | CPU time | peak memory | lesson |"
            ]
            other.append("|---|---|--:|--:|--:|---|")
            for s in elsewhere:
                cells = [
                    setup_line(s),
                    _count(s.get(count[1])) or "–",
                    _time(s.get("cpu_time_us")) or "–",
                ]
                cells += [_bytes(s.get("peak_memory_bytes")), s.get("lesson", "")]
                other.append(f"| `{s['variant']}` | " + " | ".join(cells) + " |")
            body.append(
                "Profiled at a shape of their own (no speedup over naive):\n\n" + "\n".join(other)
            )
        if hw["manifest"].get("overview"):
            svg = _link(f"profiles/{hw['slug']}/overview.svg", src_uri)
            body.append(
                f"![Time per forward of each variant on {hw['title']}]({svg}){{ loading=lazy }}"
            )
        tabs.append((hw["title"], "\n\n".join(body)))
    return _tabs(tabs) if tabs else _not_profiled("any variant", src_uri)


def render_figure(name: str, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-figure: scaling|benchmark -->`: that picture per hardware set."""
    if name not in FIGURES:
        raise PluginError(
            f"{src_uri}: unknown figure {name!r}; known figures: {', '.join(FIGURES)}"
        )
    tabs = []
    for hw in hardware_sets(root):
        if name not in hw["manifest"].get("figures", []):
            continue
        svg = _link(f"profiles/{hw['slug']}/{name}.svg", src_uri)
        data = _link(f"profiles/{hw['slug']}/{name}.json", src_uri)
        body = [
            f"<small>{environment_line(hw)}</small>",
            f"![{name} on {hw['title']}]({svg}){{ loading=lazy }}",
        ]
        if name == "benchmark":
            body.append(benchmark_table(_read_json(hw["folder"] / "benchmark.json", list)))
        if name == "decoding":
            body.append(decoding_table(_read_json(hw["folder"] / "decoding.json", list)))
        body.append(f"Data: [{name}.json]({data})")
        tabs.append((hw["title"], "\n\n".join(body)))
    return _tabs(tabs) if tabs else _not_profiled(f"the {name} figure", src_uri)


def decoding_table(rows: list[dict]) -> str:
    """The run's ceilings, then each way's bandwidth (a share of the copy ceiling) at the shortest and
    longest cache, batch 1, and the share of its shortest step that a one-key cache already costs."""
    ceilings = {r["name"]: r for r in rows if r.get("kind") in ("ceiling", "probe")}
    lines = []
    if "copy" in ceilings and "matmul" in ceilings:
        copy, matmul = ceilings["copy"]["gb_per_s"], ceilings["matmul"]["gflop_per_s"]
        lines.append(
            f"Measured in this run: copy ceiling {copy:.1f} GB/s, matmul {matmul:.0f} GFLOP/s, so the "
            f"roofs meet at {matmul / copy:.1f} FLOPs per byte."
        )
    steps = [r for r in rows if r.get("kind") == "step" and r.get("batch") == 1]
    if steps:
        lines += [
            "",
            "| way (batch 1) | cache | × copy ceiling | cache | × copy ceiling | one key costs, at the shortest |",
            "|---|--:|--:|--:|--:|--:|",
        ]
        for impl in dict.fromkeys(r["impl"] for r in steps):
            mine = sorted((r for r in steps if r["impl"] == impl), key=lambda r: r["cache_len"])
            lo, hi = mine[0], mine[-1]
            lines.append(
                f"| {impl} | {lo['cache_len']} | {lo['bandwidth_ratio']:.2f} | {hi['cache_len']} "
                f"| {hi['bandwidth_ratio']:.2f} | {lo['overhead_share']:.0%} |"
            )
    return "\n".join(lines)


def benchmark_table(rows: list[dict]) -> str:
    """Each custom kernel's time as a multiple of sdpa_flash's, measured in the same run."""
    # The ratio comes right after the name: a wide table scrolls, and this is the column to read.
    lines = [
        "| variant | time ÷ sdpa_flash | batch × heads | seq | head_dim | causal | time | TFLOP/s |",
        "|---|--:|--:|--:|--:|---|--:|--:|",
    ]
    for r in rows:
        if "ratio_to_flash" not in r:
            continue
        lines.append(
            f"| `{r['variant']}` | {r['ratio_to_flash']:.2f} | {r.get('batch', '?')} × {r.get('heads', '?')} "
            f"| {r['seq']} | {r['head_dim']} | {'yes' if r['is_causal'] else 'no'} | {_time(r['time_us'])} "
            f"| {r['tflops']:.3g} |"
        )
    return "\n".join(lines)


def expand(markdown: str, src_uri: str, root: Path, known: Iterable[str]) -> str:
    """Replace every marker in a page; an unknown variant name is a build error."""
    known = list(known)

    def check(name: str) -> str:
        if name not in known:
            raise PluginError(
                f"{src_uri}: profile marker names unknown variant {name!r}; "
                f"known variants: {', '.join(known)}"
            )
        return name

    def replace(m: re.Match) -> str:
        kind, args = m["kind"], (m["args"] or "").split()
        if kind == "-env":
            return render_env(root, src_uri)
        if kind == "-glance":
            return render_glance(root, src_uri)
        if kind == "-figure" and len(args) == 1:
            return render_figure(args[0], root, src_uri)
        if kind == "-check" and len(args) == 1:
            return render_check(check(args[0]), root, src_uri)
        if kind == "-claim" and len(args) == 2 and args[1].isdigit():
            if args[0] == "benchmark":
                return render_benchmark_claim(int(args[1]), root, src_uri)
            return render_claim(check(args[0]), int(args[1]), root, src_uri)
        if kind == "-diff" and len(args) == 2:
            return render_diff_marker(check(args[0]), check(args[1]), root, src_uri)
        if not args:
            raise PluginError(f"{src_uri}: profile marker {m[0]!r} names no variant")
        if kind == "-compare":
            return render_compare([check(a) for a in args], root, src_uri)
        if len(args) != 1:
            raise PluginError(
                f"{src_uri}: {m[0]!r} must name one variant (use profile-compare for more)"
            )
        return render_variant(check(args[0]), root, src_uri)

    # A marker indented inside an admonition gets its output indented the same way.
    return MARKER.sub(
        lambda m: "\n" + textwrap.indent(replace(m), m["indent"]).rstrip() + "\n", markdown
    )


def artifact_files(root: Path, config) -> list[File]:
    """Every published artifact of every set, as MkDocs files at profiles/<hardware>/..."""
    found = []
    for hw in hardware_sets(root):
        paths = [hw["folder"] / "index.json", hw["folder"] / "environment.json"]
        paths += [
            hw["folder"] / f"{f}.{ext}"
            for f in hw["manifest"].get("figures", [])
            for ext in ("svg", "json")
        ]
        paths += [hw["folder"] / "overview.svg"] if hw["manifest"].get("overview") else []
        paths += [hw["folder"] / "diff" / d for d in hw["manifest"].get("diffs", [])]
        for name, entry in hw["manifest"]["variants"].items():
            paths += [hw["folder"] / name / f for f in entry.get("files", []) if f != "table.md"]
        found += [p for p in paths if p.is_file()]
    return [
        File.generated(config, "profiles/" + p.relative_to(root).as_posix(), abs_src_path=str(p))
        for p in sorted(found)
    ]


def render_diff_marker(a: str, b: str, root: Path, src_uri: str) -> str:
    """Markdown for `<!-- profile-diff: A B -->`: what changed from A to B on each set."""
    tabs = []
    for hw in hardware_sets(root):
        name = f"{a}__{b}.json"
        if name not in hw["manifest"].get("diffs", []):
            continue
        data = _read_json(hw["folder"] / "diff" / name)
        tabs.append((hw["title"], render_diff(data)))
    return _tabs(tabs) if tabs else _not_profiled(f"a diff of `{a}` and `{b}`", src_uri)


def render_diff(data: dict) -> str:
    """The diff as the harness rendered it when it wrote the file."""
    if not isinstance(data.get("markdown"), str):
        raise BrokenSet("profiles hook: a diff file has no 'markdown'; rerun the profile")
    return data["markdown"]


def variant_names(repo_root: Path) -> list[str]:
    """Names of attn.variants(); the repository root is put on sys.path if attn is not installed."""
    try:
        import attn
    except ImportError:
        sys.path.insert(0, str(repo_root))
        import attn
    return [v.name for v in attn.variants()]


# --- MkDocs events ----------------------------------------------------------------------------


def on_config(config):
    repo_root = Path(config.config_file_path).resolve().parent
    _state["root"] = Path(os.environ.get("ATTN_PROFILES_DIR") or repo_root / "profiles")
    _state["known"] = variant_names(repo_root)
    return config


def on_files(files, config):
    _state["sets"], _state["sets_root"] = None, None
    sets = hardware_sets(_state["root"])  # checked once per build, then reused by every page
    _state["sets"], _state["sets_root"] = sets, Path(_state["root"])
    for file in artifact_files(_state["root"], config):
        if files.get_file_from_path(file.src_uri) is None:
            files.append(file)
    return files


def on_page_markdown(markdown, page, config, files):
    return expand(markdown, page.file.src_uri, _state["root"], _state["known"])


def on_post_build(config):
    """Publish the offline trace viewer beside the site, for the "Open here" buttons."""
    from attn.profiling.viewer import publish_viewer  # copies files; measures nothing

    publish_viewer(Path(config["site_dir"]))
