"""MkDocs hook: replace profile markers in chapters with the artifacts under profiles/.

Markers, each alone on its own line (inline code such as `<!-- profile: naive -->` is left alone):

    <!-- profile: VARIANT -->        one content tab per hardware set that has VARIANT: the run's
                                     environment, per-forward numbers, checked claims, table.md,
                                     timeline.svg, links to trace.json.gz and table.txt; or why it
                                     cannot run there
    <!-- profile-compare: A B ... --> one tab per hardware set: per-forward numbers of the variants named
    <!-- profile-env -->              a table of every hardware set's environment.json

GPU sets come first, then CPU. Artifacts are read from profiles/ next to mkdocs.yml, or from the
folder in $ATTN_PROFILES_DIR, and are added to the site's files so `mkdocs serve` shows them too.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.profiles")

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*profile(?P<kind>|-compare|-env|-glance|-figure|-claims)"
    r"\s*(?::(?P<args>[^>]*?))?\s*-->[ \t]*$",
    re.M,
)
FIGURES = ("scaling", "benchmark")  # hardware-level pictures: profiles/<hardware>/<name>.svg
PUBLISHED = {".json", ".gz", ".txt", ".svg"}  # table.md is inlined into pages, not published alone
DEVICE_ORDER = {"cuda": 0, "cpu": 2}  # GPUs first, anything else in between, CPU last

_state: dict = {"root": None, "known": None}


# --- reading profiles/ ------------------------------------------------------------------------


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PluginError(f"profiles hook: cannot read {path}: {e}") from e


def hardware_sets(root: Path) -> list[dict]:
    """Every hardware folder under root as {slug, env, title, device_type}, GPUs first."""
    found = []
    for folder in sorted(p for p in Path(root).glob("*") if p.is_dir()):
        env_path = folder / "environment.json"
        env = _read_json(env_path) if env_path.exists() else {}
        if not env:  # fall back on whatever a summary says about the device
            summaries = sorted(folder.glob("*/summary.json"))
            env = _read_json(summaries[0]) if summaries else {}
        device_type = env.get("device_type") or ("cpu" if folder.name == "cpu" else "cuda")
        name = env.get("device_name") or folder.name
        title = "CPU" if device_type == "cpu" else name
        found.append({"slug": folder.name, "env": env, "title": title, "device_type": device_type})
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


def run_line(summary: dict) -> str:
    """What was run, and the per-forward numbers."""
    per_forward = " · ".join(
        f"{read(summary)} {label}" for label, read in COLUMNS.items() if read(summary) is not None
    )
    line = setup_line(summary)
    return line + (f"  \n**Per forward:** {per_forward}" if per_forward else "")


def render_claims(claims: list[dict]) -> str:
    """The variant's claims as checked against this run: what the chapter's guess said, and what held."""
    code = lambda text: re.sub(r"(?<!`)\b(aten::\w+)", r"`\1`", text)  # noqa: E731
    held = all(c.get("holds") for c in claims)
    kind, title = ("success", "all hold") if held else ("warning", "not all hold")
    lines = [f'!!! {kind} "Claims checked against this trace: {title}"', ""]
    for c in claims:
        observed = f" <small>(observed: {code(c['observed'])})</small>" if c.get("observed") else ""
        lines.append(f"    - {'✓' if c.get('holds') else '✗'} {code(c['text'])}{observed}")
    return "\n".join(lines)


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
        folder = Path(root) / hw["slug"] / name
        if not (folder / "summary.json").exists():
            continue
        summary = _read_json(folder / "summary.json")
        if not summary.get("available", True):
            reason = _sentence(summary.get("reason") or "No reason was recorded.")
            body = f'!!! note "Not available on {hw["title"]}"\n\n    {reason}'
            tabs.append((hw["title"], body))
            continue
        url = f"profiles/{hw['slug']}/{name}"
        body = [f"<small>{environment_line(hw)}</small>", run_line(summary)]
        if summary.get("claims"):
            body.append(render_claims(summary["claims"]))
        if (folder / "table.md").exists():
            body.append((folder / "table.md").read_text(encoding="utf-8").strip())
        if (folder / "timeline.svg").exists():
            alt = f"Timeline of one profiled forward of {name} on {hw['title']}"
            svg = _link(url + "/timeline.svg", src_uri)
            body.append(f"![{alt}]({svg}){{ loading=lazy }}")  # a bare image: glightbox zooms it
            if (folder / "trace.json.gz").exists():
                # A link that downloads the trace; docs/javascripts/perfetto.js opens it in Perfetto.
                trace = _link(url + "/trace.json.gz", src_uri)
                body.append(
                    f"[Open in Perfetto]({trace}){{ .md-button data-perfetto-trace "
                    f'data-perfetto-title="{name} on {hw["title"]}" }}'
                )
        kernels = summary.get("kernels") or []
        if kernels:
            items = "\n".join(f"    - `{k}`" for k in kernels)
            body.append(f'??? info "Kernel names ({len(kernels)})"\n\n{items}')
        links = []
        if (folder / "trace.json.gz").exists():
            links.append(
                f"[trace.json.gz]({_link(url + '/trace.json.gz', src_uri)}) (open it in Perfetto)"
            )
        if (folder / "table.txt").exists():
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
        folder = Path(root) / hw["slug"]
        summaries = {
            n: _read_json(folder / n / "summary.json")
            for n in names
            if (folder / n / "summary.json").exists()
        }
        if not summaries:
            continue
        ran = [s for s in summaries.values() if s.get("available", True)]
        columns = [c for c, read in COLUMNS.items() if any(read(s) is not None for s in ran)]
        columns = columns or ["CPU time"]
        rows = [
            f"| `{name}` | " + " | ".join(COLUMNS[c](s) or "–" for c in columns) + " |"
            if s.get("available", True)
            else f"| `{name}` | not available here |" + " |" * (len(columns) - 1)
            for name, s in summaries.items()
        ]
        head = "| variant | " + " | ".join(columns) + " |\n|---|" + "--:|" * len(columns)
        table = "\n".join([head, *rows])
        body = f"<small>{environment_line(hw)}</small>\n\nPer forward:\n\n{table}"
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
        folder = Path(root) / hw["slug"]
        found = {p.parent.name: _read_json(p) for p in folder.glob("*/summary.json")}
        summaries = [found[n] for n in _state["known"] or found if n in found]
        if not summaries:
            continue
        gpu = hw["device_type"] == "cuda"
        key = "device_time_us" if gpu else "cpu_time_us"
        naive = found.get("naive", {}).get(key)
        count = ("kernels", "kernels_per_forward") if gpu else ("ATen ops", "ops_per_forward")
        head = ["variant", f"{count[0]} / forward", "CPU time"] + (["device time"] if gpu else [])
        head += ["speedup over naive", "peak memory", "lesson"]
        rows = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 2) + "---|"]
        for s in summaries:
            if not s.get("available", True):
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
        ran = [x for x in summaries if x.get("available", True)]
        body = [f"<small>{environment_line(hw)}</small>"] + ([setup_line(ran[0])] if ran else [])
        body.append("\n".join(rows))
        if (folder / "overview.svg").exists():
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
        folder = Path(root) / hw["slug"]
        if not (folder / f"{name}.svg").exists():
            continue
        svg = _link(f"profiles/{hw['slug']}/{name}.svg", src_uri)
        data = _link(f"profiles/{hw['slug']}/{name}.json", src_uri)
        body = [
            f"<small>{environment_line(hw)}</small>",
            f"![{name} on {hw['title']}]({svg}){{ loading=lazy }}",
        ]
        if name == "benchmark":
            body.append(benchmark_table(_read_json_list(folder / "benchmark.json")))
        body.append(f"Data: [{name}.json]({data})")
        tabs.append((hw["title"], "\n\n".join(body)))
    return _tabs(tabs) if tabs else _not_profiled(f"the {name} figure", src_uri)


def _read_json_list(path: Path) -> list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PluginError(f"profiles hook: cannot read {path}: {e}") from e


def benchmark_table(rows: list[dict]) -> str:
    """Each custom kernel's time as a multiple of sdpa_flash's, measured in the same run."""
    from attn.benchmark import ratios

    lines = [
        "| variant | seq | head_dim | causal | time | TFLOP/s | time ÷ sdpa_flash |",
        "|---|--:|--:|---|--:|--:|--:|",
    ]
    for r in ratios(rows):
        lines.append(
            f"| `{r['variant']}` | {r['seq']} | {r['head_dim']} | {'yes' if r['is_causal'] else 'no'} "
            f"| {_time(r['time_us'])} | {r['tflops']:.3f} | {r['ratio_to_flash']:.2f} |"
        )
    return "\n".join(lines)


def render_claims_list(name: str) -> str:
    """Markdown for `<!-- profile-claims: VARIANT -->`: the claims every run checks, by device."""
    from attn.profiling.claims import claims_for

    code = lambda text: re.sub(r"(?<!`)\b((?:aten|attn)::\w+)", r"`\1`", text)  # noqa: E731
    lines = []
    for device_type, where in (("cpu", "On CPU"), ("cuda", "On a GPU")):
        for claim in claims_for(name, device_type):
            lines.append(f"- *{where}:* {code(claim.text)}")
    return "\n".join(lines) or "- (no claims recorded for this variant yet)"


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
        if kind == "-claims" and len(args) == 1:
            return render_claims_list(check(args[0]))
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
    """Every published artifact under root, as MkDocs files at profiles/<hardware>/..."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [
        File.generated(
            config, "profiles/" + path.relative_to(root).as_posix(), abs_src_path=str(path)
        )
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.suffix in PUBLISHED
    ]


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
    for file in artifact_files(_state["root"], config):
        if files.get_file_from_path(file.src_uri) is None:
            files.append(file)
    return files


def on_page_markdown(markdown, page, config, files):
    return expand(markdown, page.file.src_uri, _state["root"], _state["known"])
