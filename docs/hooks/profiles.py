"""MkDocs hook: replace the profile markers of a page with the artifacts under profiles/.

Written the way Material for MkDocs' hooks/shortcodes.py is: one regex finds the markers, RENDERERS
says which function renders each kind, and each renderer's docstring says what it writes. A marker
stands alone on its line (inline code such as `<!-- profile: naive -->` is left alone), e.g.
`<!-- profile: naive -->`, `<!-- profile-claim: naive clone-under-masked-fill -->` (a claim of the
variant's spec in attn/specs.py, by key) or `<!-- profile-figure: scaling -->`. One that names an
unknown variant, claim or figure fails the build. The sets are read and checked by profile_sets.py;
variants, claims and lessons come from attn.specs.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import textwrap
from pathlib import Path
from typing import NamedTuple

from guesses import QUESTIONS, form
from mkdocs.exceptions import PluginError
from mkdocs.utils.meta import get_data
from profile_sets import BrokenSet, artifact_files, hardware_sets, read_json

from attn import specs
from attn.traces import intervals, layout
from attn.traces import markdown as md
from attn.traces.backward import as_forward
from attn.traces.benchmark_checks import BenchmarkClaim, BenchmarkEvidence
from attn.traces.diff import diff_name
from attn.traces.diff import render_diff as diff_markdown
from attn.traces.trace import BACKWARD_RANGE, FORWARD_RANGE
from attn.traces.units import bytes_text, count_text, time_text

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*(?P<kind>profile[\w-]*)\s*(?::(?P<args>[^>]*?))?\s*-->[ \t]*$",
    re.M,
)
MADE_BY = {
    "benchmark": "benchmark"
}  # the nox session that writes a figure, if not profile_examples
VERDICT = {True: ("✓", "holds"), False: ("✗", "does not hold"), None: ("?", "cannot tell")}
DEVICE_WORDS = {"cuda": "On a GPU", "cpu": "On CPU"}  # in the order the sets are shown


class Page(NamedTuple):
    """Where a marker renders: the page's path in docs/, the checked sets, the site's config."""

    src_uri: str
    sets: list[dict]
    config: dict
    root: Path  # profiles/: where the sets, and the public traces' artifacts, are

    def link(self, target: str) -> str:
        """Relative URL from this page to a path in the docs tree (MkDocs resolves it)."""
        return posixpath.relpath(target, posixpath.dirname(self.src_uri) or ".")

    def error(self, message: str) -> PluginError:
        return PluginError(f"{self.src_uri}: {message}")

    def variants(self, *names: str) -> None:
        """Fail the build on a name that has no spec."""
        for name in names:
            if specs.spec(name) is None:
                known = ", ".join(specs.names())
                raise self.error(f"unknown variant {name!r}; known variants: {known}")


# --- pieces of Markdown ---------------------------------------------------------------------------


def _tabs(tabs: list[tuple[str, str]]) -> str:
    """A content-tab set; `===!` opens a new set, so it never merges with tabs written around it."""
    return "\n".join(
        f'{"===!" if i == 0 else "==="} "{title}"\n\n{textwrap.indent(body.strip(), "    ")}\n'
        for i, (title, body) in enumerate(tabs)
    )


def _not_profiled(page: Page, what: str) -> str:
    return (
        f'!!! note "Not profiled yet"\n\n    No hardware set in `profiles/` has artifacts for {what} '
        f"yet. [Reproduce]({page.link('reproduce.md')}) says how to make them.\n"
    )


def per_set(page: Page, what: str, body) -> str:
    """One tab per set that body(hw) has something for, or a note that no set has `what` yet."""
    tabs = [(hw["title"], text) for hw in page.sets if (text := body(hw))]
    return _tabs(tabs) or _not_profiled(page, what)


def _row(cells: list) -> str:
    """A table row; None, a number not measured, shows as a dash."""
    return "| " + " | ".join("–" if c is None else str(c) for c in cells) + " |"


def unmark(text: str) -> str:
    """A set's title without the backslashes that keep its Markdown marks as text (an attribute)."""
    return re.sub(r"\\(.)", r"\1", text)


def _fmt(text, value) -> str | None:
    return None if value is None else text(value)


COLUMNS = {  # per-forward number -> how to read it from a summary (None: not measured)
    "CPU time (profiled)": lambda s: _fmt(time_text, s.get("cpu_time_us")),
    "device time (profiled)": lambda s: _fmt(time_text, s.get("device_time_us")),
    "ATen ops": lambda s: _fmt(count_text, s.get("ops_per_forward")),
    "kernels": lambda s: _fmt(count_text, s.get("kernels_per_forward")),
    "peak memory": lambda s: _fmt(bytes_text, s.get("peak_memory_bytes") or None),
}


def timed_text(t: dict | None) -> str | None:
    """A timed row as '98.15 ms (95.21 ms–101.30 ms)': the median and its interquartile range."""
    if t is None:
        return None
    return f"{time_text(t['median_us'])} ({time_text(t['low_us'])}–{time_text(t['high_us'])})"


def timed(hw: dict, name: str) -> dict | None:
    """The variant's row of the set's timing pass, if the set has one that timed it."""
    return ((hw.get("timing") or {}).get("variants") or {}).get(name)


def timed_cell(t: dict | None) -> str | None:
    """A timed row in a table cell: the median, its interquartile range small beneath it."""
    if t is None:
        return None
    return f"{time_text(t['median_us'])}<br><small>{time_text(t['low_us'])}–{time_text(t['high_us'])}</small>"


def ratio_cell(value: float, low: float, high: float, verdict: bool | None = True) -> str:
    """A ratio in a table cell: its value, its range small beneath, and 'cannot tell' where said."""
    tell = ", cannot tell" if verdict is None else ""
    return f"{value:.2f}×<br><small>{low:.2f}–{high:.2f}×{tell}</small>"


def speedup_text(base: dict | None, t: dict | None) -> str | None:
    """base's median ÷ t's, with the interval their interquartile ranges allow; 'cannot tell'
    where that interval holds 1 (neither is faster for sure)."""
    if base is None or t is None:
        return None
    value, low, high = intervals.ratio(base, t)
    return ratio_cell(value, low, high, intervals.above(low, high))


def busy_line(hw: dict) -> str | None:
    """One line when the set was made on a busy machine: other work's share of its CPU time (a
    load average above its core count, where a set predates that count)."""
    loads = [hw["env"].get("load"), (hw.get("timing") or {}).get("load")]
    busy = [x for x in loads if isinstance(x, dict) and x.get("busy")]
    if not busy:
        return None
    cores = busy[0].get("cpu_count")
    shares = [x["others_share"] for x in busy if isinstance(x.get("others_share"), (int, float))]
    if shares:
        what = f"other work used {max(shares):.0%} of its {cores} cores"
    else:
        most = max(
            max((x.get("load_avg_before") or [0])[0], (x.get("load_avg_after") or [0])[0])
            for x in busy
        )
        what = f"a load average of {most:.2f} on {cores} cores"
    return (
        f"**Busy machine:** {what} while this set was made; its times are slower and wider than "
        "on an idle machine."
    )


def environment_line(hw: dict) -> str:
    """Device, torch (and CUDA) version, date and commit of a hardware set, on one line."""
    env = hw["env"]
    parts = [env.get("device_name") or hw["title"]]
    if hw["device_type"] == "cpu" and env.get("cpu_model"):
        threads = f", {env['threads']} threads" if env.get("threads") else ""
        parts[0] = f"CPU: {env['cpu_model']}{threads}"
    parts.append(f"torch {env.get('torch_version', '?')}")
    parts += [f"CUDA {env['cuda_version']}"] if env.get("cuda_version") else []
    parts += [f"cuDNN {env['cudnn_version']}"] if env.get("cudnn_version") else []
    parts += [f"profiled {env['date']}"] if env.get("date") else []
    parts += [f"commit `{env['git_commit']}`"] if env.get("git_commit") else []
    line = " · ".join(parts)
    return f"{line}  \n{busy}" if (busy := busy_line(hw)) else line


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
    """What was run, and the per-forward numbers (memcpys and memsets apart from kernels)."""
    parts = [f"{v} {label}" for label, read in COLUMNS.items() if (v := read(summary)) is not None]
    memcpy = summary.get("memcpy_per_forward")
    if memcpy is not None:
        copies = ", ".join(f"{count_text(n)} {d}" for d, n in memcpy.items() if n) or "0"
        memset = _fmt(count_text, summary.get("memset_per_forward")) or "–"
        parts += [f"{copies} memcpy", f"{memset} memset"]
    text = setup_line(summary) + (f"  \n**Per forward:** {' · '.join(parts)}" if parts else "")
    if backward := summary.get("backward"):  # a training step's
        b = as_forward(backward)
        parts = [f"{v} {label}" for label, read in COLUMNS.items() if (v := read(b)) is not None]
        kept = {
            "saved for it": "saved_for_backward_bytes",
            "peak of the step": "peak_memory_step_bytes",
        }
        parts += [
            f"{bytes_text(backward[k])} {label}" for label, k in kept.items() if backward.get(k)
        ]
        text += f"  \n**Per backward:** {' · '.join(parts)}"
    return text


# --- the renderers, one per marker kind -----------------------------------------------------------


def _focus(viewer: dict | None) -> str:
    """The image attribute that scrolls a phone to the event a screenshot marks, if it marks one."""
    mark = (viewer or {}).get("mark")
    return f" data-focus={(mark['left'] + mark['right']) / 2:.3f}" if mark else ""


def render_variant(page: Page, name: str) -> str:
    """`<!-- profile: name -->`: one tab per hardware set that has the variant."""
    page.variants(name)

    def body(hw: dict) -> str | None:
        summary = hw["summaries"].get(name)
        if summary is None:
            return None
        if not summary["available"]:
            reason = (summary.get("reason") or "No reason was recorded.").strip()
            reason = reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")
            return f'!!! note "Not available on {hw["title"]}"\n\n    {md.prose(reason)}'
        files = set(hw["manifest"]["variants"][name].get("files", []))
        url = lambda f: page.link(f"profiles/{hw['slug']}/{name}/{f}")  # noqa: E731
        where = f"{name} on {hw['title']}"
        text = [f"<small>{environment_line(hw)}</small>", run_line(summary)]
        if layout.TABLE_MD in files:
            text.append((hw["folder"] / name / layout.TABLE_MD).read_text(encoding="utf-8").strip())
        shown = BACKWARD_RANGE if "backward" in summary else FORWARD_RANGE  # a step: backward
        if layout.VIEWER in files:
            selected = (summary.get("viewer") or {}).get("selected")
            alt = f"The trace of {where} in a trace viewer, one {shown}" + (
                f", {md.text(selected)} selected and boxed in red" if selected else ""
            )
            focus = _focus(summary.get("viewer"))
            text.append(f"![{alt}]({url(layout.VIEWER)}){{ loading=lazy{focus} }}")
        if layout.TIMELINE in files:
            alt = f"Timeline of one profiled forward of {where}"
            text.append(f"![{alt}]({url(layout.TIMELINE)}){{ loading=lazy }}")
        if layout.TRACE in files:
            text.append(
                f"[Open in Perfetto]({url(layout.TRACE)}){{ .md-button data-perfetto-trace "
                f'data-perfetto-title="{unmark(where)}" }} [Open here]({url(layout.TRACE)}){{ .md-button '
                f'data-trace-viewer data-trace-range="{shown}" }}'
            )
        if kernels := summary.get("kernels"):
            items = "\n".join(f"    - {md.code(k)}" for k in kernels)
            more = summary.get("kernels_not_listed") or 0
            count = f"the first {len(kernels)} of {len(kernels) + more}" if more else len(kernels)
            text.append(f'??? info "Kernel names ({count})"\n\n{items}')
        downloads = {layout.TRACE: "", layout.TABLE_TXT: " (the profiler's own table)"}
        links = [f"[{f}]({url(f)}){why}" for f, why in downloads.items() if f in files]
        text += ["Download: " + " · ".join(links)] if links else []
        return "\n\n".join(text)

    return per_set(page, f"`{name}`", body)


def claims_of(name: str, hw: dict) -> list[dict]:
    """The claims as evaluated on a set ([] when the variant did not run there)."""
    summary = hw["summaries"].get(name) or {}
    return (summary.get("claims") or []) if summary.get("available") else []


def _on(device_type: str, text: str) -> str:
    """The sentence with the hardware it is about in front, unless it already starts with it."""
    words = DEVICE_WORDS[device_type]
    return md.prose(text) if text.startswith(words) else f"{words}: {md.prose(text)}"


def render_check(page: Page, name: str) -> str:
    """`<!-- profile-check: name -->`: every claim, as checked on every set, then those unchecked."""
    page.variants(name)
    checked = [(hw, claims) for hw in page.sets if (claims := claims_of(name, hw))]
    tabs = [
        (hw["title"], "\n".join(
            f"- {VERDICT[c.get('holds')][0]} **{VERDICT[c.get('holds')][1]}:** {md.prose(c['text'])} "
            f"<small>Observed: {md.prose(c.get('observed') or '–')}</small>"
            for c in claims
        ))
        for hw, claims in checked
    ]  # fmt: skip
    profiled = {hw["device_type"] for hw, _ in checked}
    waiting = [
        f"- {_on(c.device_type, c.text)}"
        for device_type in DEVICE_WORDS
        if device_type not in profiled
        for c in specs.spec(name).trace_claims
        if c.device_type == device_type
    ]
    body = _tabs(tabs)
    if waiting:
        body += (
            f'\n!!! note "Not checked yet: {name}"\n\n    No profile set here has run these; each '
            "run on such hardware checks them:\n\n" + textwrap.indent("\n".join(waiting), "    ")
        )
    return body or _not_profiled(page, f"`{name}`")


def render_claim(page: Page, name: str, key: str) -> str:
    """`<!-- profile-claim: name KEY -->`: one claim of the variant's spec, with its verdict on
    each set that checked it (a benchmark claim: each set with a benchmark of its device type)."""
    page.variants(name)
    claim = specs.claim(name, key)
    if claim is None:
        keys = ", ".join(c.key for c in specs.spec(name).claims)
        raise page.error(f"{name!r} has no claim {key!r}; its claims: {keys}")
    if isinstance(claim, BenchmarkClaim):  # about a figure's rows (benchmark.json by default)
        rows = lambda hw: read_json(hw["folder"] / f"{claim.figure}.json", list)  # noqa: E731
        results = [
            (*claim.check(BenchmarkEvidence(name, rows(hw))), hw["title"])
            for hw in page.sets
            if hw["device_type"] == claim.device_type
            and claim.figure in hw["manifest"].get("figures", [])
        ]
        where = {"cpu": "a CPU", "cuda": "a GPU"}[claim.device_type]
        waiting = (
            f"Not measured yet: no profile set here has {claim.figure}.json on {where}. "
            f"`nox -s {MADE_BY.get(claim.figure, 'profile_examples')}` on such a machine writes "
            "it, and the next build checks it."
        )
    else:
        results = [
            (c.get("holds"), c.get("observed"), hw["title"])
            for hw in page.sets
            for c in claims_of(name, hw)
            if c.get("key") == key
        ]
        waiting = "Not checked yet: no profile set here has run it on such hardware."
    verdicts = {holds for holds, _, _ in results}
    kind = "note" if not results else "success" if verdicts == {True} else "warning"
    lines = [
        f"{VERDICT[holds][0]} **{VERDICT[holds][1]}** on {title} (observed: {md.prose(seen or '–')})"
        for holds, seen, title in results
    ] or [waiting]
    # A sentence several variants share (each compiled variant's first call) says whose it is.
    shared = sum(any(c.text == claim.text for c in spec.claims) for spec in specs.SPECS) > 1
    title = md.prose(f"{name}: {claim.text}" if shared else claim.text).replace('"', "'")
    return f'!!! {kind} "{title}"\n\n    ' + "  \n    ".join(lines) + "\n"


def render_compare(page: Page, *names: str) -> str:
    """`<!-- profile-compare: a b -->`: a table of per-forward numbers per hardware set."""
    page.variants(*names)

    def body(hw: dict) -> str | None:
        summaries = {n: hw["summaries"][n] for n in names if n in hw["summaries"]}
        if not summaries:
            return None
        ran = [s for s in summaries.values() if s["available"]]
        columns = [c for c, read in COLUMNS.items() if any(read(s) is not None for s in ran)]
        columns = columns or ["CPU time (profiled)"]
        # The timing pass's median and interquartile range first: the time to compare by.
        if any(timed(hw, n) for n in summaries):
            read = {"time (median, IQR)": lambda n, s: timed_cell(timed(hw, n))}
        else:
            read = {}
        read |= {c: (lambda n, s, c=c: COLUMNS[c](s)) for c in columns}
        rows = [
            _row([f"`{n}`", *(cell(n, s) for cell in read.values())])
            if s["available"]
            else f"| `{n}` | not available here |" + " |" * (len(read) - 1)
            for n, s in summaries.items()
        ]
        head = _row(["variant", *read]) + "\n|---|" + "--:|" * len(read)
        shapes = {setup_line(s) for s in ran}
        shape = (
            shapes.pop() if len(shapes) == 1 else "rows at different shapes: see each variant's tab"
        )
        return f"<small>{environment_line(hw)}</small>\n\n{shape}. Per forward:\n\n" + "\n".join(
            [head, *rows]
        )

    return per_set(page, ", ".join(f"`{n}`" for n in names), body)


def render_speedup(page: Page, a: str, b: str) -> str:
    """`<!-- profile-speedup: A B -->`: A's and B's times from each set's timing pass, A's ÷ B's with
    its interval and verdict (cannot tell where the interval holds 1); with A naive, the clone of
    one score matrix timed in the same rounds."""
    page.variants(a, b)

    def body(hw: dict) -> str | None:
        ta, tb = timed(hw, a), timed(hw, b)
        if ta is None or tb is None:
            return None
        value, low, high = intervals.ratio(ta, tb)
        verdict = {
            True: f"`{b}` is faster: the whole interval is above 1×.",
            False: f"`{b}` is slower: the whole interval is below 1×.",
            None: "Cannot tell which is faster: the interval holds 1×.",
        }[intervals.above(low, high)]
        lines = [
            f"<small>{environment_line(hw)}</small>",
            f"Timed interleaved, apart from the profiler: `{a}` {timed_text(ta)}, `{b}` "
            f"{timed_text(tb)} per forward (median and {intervals.INTERVAL}). `{a}` ÷ `{b}`: "
            f"**{intervals.ratio_text(value, low, high)}**. {verdict}",
        ]
        clone = (hw.get("timing") or {}).get("score_clone")
        if clone and a == specs.REFERENCE:
            share = clone["median_us"] / ta["median_us"]
            lines.append(
                f"The clone of one score matrix ({bytes_text(clone['bytes'])}), timed in the same "
                f"rounds: {timed_text(clone)}, {share:.0%} of `{a}`'s median forward."
            )
        return "\n\n".join(lines)

    return per_set(page, f"a timing pass with `{a}` and `{b}`", body)


def render_diff(page: Page, a: str, b: str) -> str:
    """`<!-- profile-diff: A B -->`: what changed from A to B on each set, as the harness wrote it."""
    page.variants(a, b)

    def body(hw: dict) -> str | None:
        if diff_name(a, b) not in hw["manifest"].get("diffs", []):
            return None
        path = hw["folder"] / layout.DIFF_DIR / diff_name(a, b)
        try:  # drawn from its rows, each name as text: the stored Markdown could hold anything
            return diff_markdown(read_json(path))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BrokenSet(f"profiles hook: {path} is not a diff ({type(e).__name__}: {e})") from e

    return per_set(page, f"a diff of `{a}` and `{b}`", body)


def render_env(page: Page) -> str:
    """`<!-- profile-env -->`: one row per hardware set (CUDA and cuDNN only where a set has them)."""
    versions = {"cuda_version": "CUDA", "cudnn_version": "cuDNN"}
    keys = [k for k in versions if any(hw["env"].get(k) for hw in page.sets)]
    head = ["folder", "device", "torch", *(versions[k] for k in keys), "date", "commit"]
    rows = [_row(head), "|---" * len(head) + "|"]
    for hw in page.sets:
        env = hw["env"]
        device = env.get("device_name") or hw["title"]
        if hw["device_type"] == "cpu" and env.get("threads"):
            device += f" ({env['threads']} threads)"
        cells = [env.get(k) for k in ("torch_version", *keys, "date")]
        commit = f"`{env['git_commit']}`" if env.get("git_commit") else None
        rows.append(_row([f"`profiles/{hw['slug']}/`", device, *cells, commit]))
    return "\n".join(rows) + "\n" if page.sets else _not_profiled(page, "any variant")


def render_glance(page: Page) -> str:
    """`<!-- profile-glance -->`: every variant of every hardware set, side by side, with its
    speedup over the reference variant (at the reference's shape) and its lesson."""
    ref = specs.REFERENCE

    def body(hw: dict) -> str | None:
        found = hw["summaries"]
        summaries = [found[n] for n in specs.names() if n in found]
        if not summaries:
            return None
        gpu = hw["device_type"] == "cuda"
        key = "device_time_us" if gpu else "cpu_time_us"
        count = "kernels" if gpu else "ATen ops"
        has_timing = bool(timed(hw, ref) or any(timed(hw, s["variant"]) for s in summaries))
        # With a timing pass, the time of each row is its median and interquartile range; without,
        # the profiler's means, labelled as such, and no speedup.
        times = (
            ["CPU time (profiled)", "device time (profiled)"] if gpu else ["CPU time (profiled)"]
        )
        base = found.get(ref) or {}
        ran = [s for s in summaries if s["available"]]
        # Speedups compare rows at the reference's shape; rows at other shapes get a table of their own.
        common = setup_line(base) if base.get("available") else setup_line(ran[0]) if ran else None
        time_head = ["time (median, IQR)", "speedup"] if has_timing else times
        head = ["variant and its lesson", count, *time_head, "peak memory"]
        rows = [_row(head), "|---|" + "--:|" * (len(head) - 1)]
        other = ["variant and its lesson", "shape", count, time_head[0], "peak memory"]
        other = [_row(other), "|---|---|--:|--:|--:|"]
        # A step's table gives the time that matters on the device (GPU: device time), to fit a page.
        step = [
            "variant and its lesson",
            "step (median, IQR)",
            "forward (profiled)",
            "backward (profiled)",
            "saved for backward",
            "peak of the step",
        ]
        steps = [_row(step), "|---|" + "--:|" * (len(step) - 1)]
        for s in summaries:
            # The lesson under the name: one column less keeps the table within a page's width.
            name = f"`{s['variant']}`<br><small>{specs.spec(s['variant']).lesson}</small>"
            if specs.spec(s["variant"]).trains:  # a training step: forward and backward apart
                b = s.get("backward") or {}
                cells = [timed_cell(timed(hw, s["variant"]))]
                cells += [_fmt(time_text, part.get(key)) for part in (s, b)]
                kept = ("saved_for_backward_bytes", "peak_memory_step_bytes")
                cells += [_fmt(bytes_text, b.get(k)) for k in kept]
                if not s["available"]:
                    cells = ["not available here", *[None] * (len(cells) - 1)]
                steps.append(_row([name, *cells]))
            elif not s["available"]:
                rows.append(_row([name, "not available here", *[None] * (len(head) - 2)]))
            elif setup_line(s) != common:
                shown = timed_cell(timed(hw, s["variant"])) if has_timing else COLUMNS[times[0]](s)
                cells = [COLUMNS[count](s), shown, COLUMNS["peak memory"](s)]
                other.append(_row([name, setup_line(s), *cells]))
            else:
                if has_timing:
                    mine = timed(hw, s["variant"])
                    speedup = speedup_text(timed(hw, ref), mine) if s["variant"] != ref else "1×"
                    cells = [timed_cell(mine), speedup]
                else:
                    cells = [COLUMNS[c](s) for c in times]
                cells = [COLUMNS[count](s), *cells]
                rows.append(_row([name, *cells, COLUMNS["peak memory"](s)]))
        text = [f"<small>{environment_line(hw)}</small>"] + ([common] if common else [])
        if has_timing:
            text.append(
                f"Per forward, timed apart from the profiler, every variant interleaved in one "
                f"process: the median and, in brackets, the {intervals.INTERVAL} (the middle half "
                f"of the timed repetitions). Speedup: {ref}'s median ÷ the variant's, at {ref}'s "
                "shape, with the lowest and highest ratio the two ranges allow; where that range "
                "holds 1×, the table says it cannot tell which is faster."
            )
        else:
            text.append(
                "Per forward, as the profiler timed three forwards (no timing pass in this set, so "
                "no spread and no speedup)."
            )
        text.append("\n".join(rows))
        if len(other) > 2:
            text += [
                f"Profiled at a shape of their own (no speedup over {ref}):\n\n" + "\n".join(other)
            ]
        if len(steps) > 2:
            text.append(
                "Training steps: a whole step timed (median and interquartile range), the "
                f"{times[-1]} of its forward and of its backward, what autograd saved for the "
                "backward, and the peak from the start of the forward to the end of the "
                "backward:\n\n" + "\n".join(steps)
            )
        if hw["manifest"].get("overview"):
            svg = page.link(f"profiles/{hw['slug']}/{layout.OVERVIEW}")
            alt = f"Time per forward of each variant on {hw['title']}"
            text.append(f"![{alt}]({svg}){{ loading=lazy }}")
        return "\n\n".join(text)

    return per_set(page, "any variant", body)


def render_figure(page: Page, name: str) -> str:
    """`<!-- profile-figure: NAME -->`: that picture of each hardware set that has one, and its data."""
    if name not in layout.FIGURES:
        raise page.error(f"unknown figure {name!r}; known figures: {', '.join(layout.FIGURES)}")

    def body(hw: dict) -> str | None:
        if name not in hw["manifest"].get("figures", []):
            return None
        svg, data = (page.link(f"profiles/{hw['slug']}/{name}.{ext}") for ext in ("svg", "json"))
        text = [
            f"<small>{environment_line(hw)}</small>",
            f"![{name} on {hw['title']}]({svg}){{ loading=lazy }}",
        ]
        if name in TABLES:  # closed: long on a phone (the benchmark's, 5 screens), the figure first
            path = hw["folder"] / f"{name}.json"
            try:  # every value shows as text; one of the wrong type names the file
                table = TABLES[name](read_json(path, list))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BrokenSet(f"profiles hook: {path}: a row the page cannot show ({e!r})") from e
            text.append(
                f'??? abstract "The {name} in numbers"\n\n' + textwrap.indent(table, "    ")
            )
        return "\n\n".join([*text, f"Data: [{name}.json]({data})"])

    return per_set(page, f"the {name} figure", body)


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
                f"| {md.text(impl)} | {int(lo['cache_len'])} | {lo['bandwidth_ratio']:.2f} "
                f"| {int(hi['cache_len'])} "
                f"| {hi['bandwidth_ratio']:.2f} | {lo['overhead_share']:.0%} |"
            )
    every = [r for r in rows if r.get("kind") == "step"]
    if every:
        lines += ["", *monotonic_lines(every)]
    return "\n".join(lines)


def monotonic_lines(steps: list[dict]) -> list[str]:
    """Whether each way's step time grows with the cache; where a longer cache took less time, the
    pair, and whether the drop is within the two interquartile ranges (a tie) or beyond them; a drop
    every way makes between the same two caches is the moment they were timed at (all ways are timed
    in the same rounds), not the cache."""
    drops = []
    for key in dict.fromkeys((r["impl"], r["batch"]) for r in steps):
        mine = sorted(
            (r for r in steps if (r["impl"], r["batch"]) == key), key=lambda r: r["cache_len"]
        )
        for a, b in zip(mine, mine[1:], strict=False):
            if b["time_us"] < a["time_us"]:
                beyond = b.get("high_us", b["time_us"]) < a.get("low_us", a["time_us"])
                drops.append((a, b, beyond))
    if not drops:
        return ["Every way's step time grows with the cache (medians), at every batch."]
    ways = {r["impl"] for r in steps}
    pair = lambda a, b: (a["batch"], a["cache_len"], b["cache_len"])  # noqa: E731
    beyond_at = [pair(a, b) for a, b, beyond in drops if beyond]
    everyone = {p for p in beyond_at if beyond_at.count(p) == len(ways)}
    lines = ["Where a longer cache took less time than a shorter one:", ""]
    for a, b, beyond in drops:
        if not beyond:
            why = "within the interquartile ranges: a tie, not a drop"
        elif pair(a, b) in everyone:
            why = (
                "beyond both interquartile ranges, as for every way at these two caches: the "
                "shorter cache was timed at a slow moment of the machine (its load, above)"
            )
        else:
            why = (
                "beyond both interquartile ranges, for this way alone: its shorter step was slowed "
                "by something other than its cache (fixed costs, last column)"
            )
        lines.append(
            f"- {a['impl']}, batch {a['batch']}: cache {a['cache_len']} {time_text(a['time_us'])} → "
            f"cache {b['cache_len']} {time_text(b['time_us'])}, {why}."
        )
    return lines


def benchmark_table(rows: list[dict]) -> str:
    """On a CPU, the vector ISA the run used; then each custom kernel's time as a multiple of the
    baseline's, measured in the same run."""
    mine = [r for r in rows if "ratio_to_flash" in r]
    sizes = sorted(
        {f"{md.text(r.get('batch', '?'))} × {md.text(r.get('heads', '?'))}" for r in mine}
    )
    isas = sorted({md.text(r["cpu_capability"]) for r in rows if r.get("cpu_capability")})
    lines = []
    if isas:  # a CPU run (GPU runs, and CPU runs made before it was recorded, leave it out)
        ours = ", ".join(md.code(n) for n in dict.fromkeys(r["variant"] for r in mine))
        lines += [
            f"Vector ISA of this run: {', '.join(isas)} (`torch.backends.cpu.get_cpu_capability()`)."
            f" Torch's CPU kernels ran that ISA's code, and so did {ours or 'our kernel'}: it"
            " carries a copy of its vector code per ISA and runs the one torch runs.",
            "",
        ]
    ceilings = {r.get("dtype"): r["matmul_tflops"] for r in rows if r.get("matmul_tflops")}
    if ceilings:
        gemm = "a large `torch.mm`" if isas else "a large `torch.mm` (cuBLAS)"
        each = ", ".join(f"{t:.3g} TFLOP/s in {d}" for d, t in ceilings.items())
        lines += [
            f"This machine's matmul ceiling, {gemm} timed in the same run: {each}. The last column "
            "is the variant's FLOP/s as a share of it (causal rows count the half of the products "
            "they need).",
            "",
        ]
    spread = any("ratio_low" in r for r in mine)
    lines += [
        f"Batch × heads: {', '.join(sizes)}. TFLOP/s of every row: in the data below."
        + (
            f" Times: the median and its {intervals.INTERVAL}; the ratio of the medians, with the "
            "lowest and highest ratio the two ranges allow."
            if spread
            else ""
        ),
        "",
        f"| variant | dtype, seq × head_dim | time | ÷ {specs.BENCHMARK_BASELINE} |"
        + (" × ceiling |" if ceilings else ""),
        "|---|--:|--:|--:|" + ("--:|" if ceilings else ""),
    ]
    for r in mine:  # the shape in one column: the table fits a page's column at 1280 px
        masking = "causal" if r["is_causal"] else "full"
        shape = (
            f"{md.text(r.get('dtype', '?'))}<br><small>{int(r['seq'])} × {int(r['head_dim'])}, "
            f"{masking}</small>"
        )
        cells = [md.code(r["variant"]), shape]
        if "low_us" in r:
            cells.append(timed_cell({**r, "median_us": r["time_us"]}))
        else:
            cells.append(time_text(r["time_us"]))
        if "ratio_low" in r:
            cells.append(ratio_cell(r["ratio_to_flash"], r["ratio_low"], r["ratio_high"]))
        else:
            cells.append(f"{r['ratio_to_flash']:.2f}")
        if ceilings:
            cells.append(_fmt(lambda x: f"{x:.2f}", r.get("ceiling_share")))
        lines.append(_row(cells))
    return "\n".join(lines)


TABLES = {"benchmark": benchmark_table, "decoding": decoding_table}  # figure -> its data, tabled


def render_chapters(page: Page) -> str:
    """`<!-- profile-chapters -->`: each page of the nav but this one, linked with its nav title and
    followed by its description: a page's `description:` front matter, a notebook's metadata's."""
    items = []
    for title, path in (item for entry in page.config["nav"] for item in entry.items()):
        if path == page.src_uri:
            continue
        text = (Path(page.config["docs_dir"]) / path).read_text(encoding="utf-8")
        meta = json.loads(text)["metadata"] if path.endswith(".ipynb") else get_data(text)[1]
        if not meta.get("description"):
            raise page.error(f"{path}, in the nav, has no description to list it with")
        items.append(f"- [{title}]({page.link(path)}): {meta['description']}")
    return "\n".join(items) + "\n"


def render_public(page: Page, folder: str) -> str:
    """`<!-- profile-public: FOLDER -->`: a GPU trace recorded by others (attn.specs.PUBLIC): where
    it is from, its license and GPU, what diagnose finds in it, one attention call in the trace
    viewer, and its claims as checked when its artifacts were written."""
    if specs.public(folder) is None:
        known = ", ".join(p.folder for p in specs.PUBLIC)
        raise page.error(f"unknown public trace {folder!r}; known: {known}")
    path = page.root / layout.PUBLIC_DIR / folder / layout.DIAGNOSIS
    if not path.is_file():
        return (
            f'!!! note "Not written yet: {folder}"\n\n    `python -m attn.profiling.public` writes '
            "what this section shows, from the trace in `tests/fixtures/realtraces/`.\n"
        )
    try:
        return _public_markdown(page, folder, read_json(path))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BrokenSet(
            f"profiles hook: {path} is not a diagnosis ({type(e).__name__}: {e})"
        ) from e


def _public_markdown(page: Page, folder: str, data: dict) -> str:
    """What render_public shows of a diagnosis.json; every value in it shows as text."""
    here = f"profiles/{layout.PUBLIC_DIR}/{folder}"
    src = data["source"]
    repository = src["repository"]
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"source.repository {repository!r} is not a GitHub repository's address")
    repo = md.text(repository.removeprefix("https://github.com/"))
    commit, path = (re.sub(r"[^\w./-]", "_", str(src[k])) for k in ("commit", "path"))
    url = f"{repository}/blob/{commit}/{path}"
    text = [
        f"<small>Recorded by others on an **{md.text(src['GPU'])}** · torch: "
        f"{md.text(src['torch'])} · [{md.code(path.rsplit('/', 1)[-1])}]({url}) from "
        f"[{repo}]({repository}) at commit {md.code(commit[:8])}, {md.text(src['license'])} "
        f"license. A copy is kept as test data in `tests/fixtures/realtraces/{folder}/`, with its "
        "SOURCE.txt and LICENSE.</small>"
    ]
    rows = []  # four columns, to fit a page's column: pass and compiled under the name, the
    for r in data["attention"]:  # shapes under where, one call's cost with its spread and share
        k, t = r["kernels_per_call"], r["device_time_us_per_call"]
        cost = None if k is None else f"{count_text(k)} kernel{'' if k == 1 else 's'}"
        if t is not None:
            lo, hi = r["device_time_us_range"]
            spread = f" ({time_text(lo)}–{time_text(hi)})" if hi > 1.05 * lo else ""
            share = f"{r['share_of_device_time']:.0%} of device time"
            cost = " · ".join(x for x in (cost, time_text(t) + spread, share) if x)
        notes = [r["pass"]] + (["compiled"] if r["compiled"] else [])
        name = f"{md.code(r['implementation'])}<br><small>{md.text(', '.join(notes))}</small>"
        shapes = f"<br><small>{md.text(r['shapes'])}</small>" if r.get("shapes") else ""
        rows.append(_row([name, md.text(r["where"]) + shapes, count_text(r["calls"]), cost]))
    head = "| implementation | where | calls | per call |"
    text.append("**What `diagnose` finds:**\n\n" + "\n".join([head, "|---|---|--:|--:|", *rows]))
    if data.get("attention_share_of_device_time"):
        text.append(
            f"Attention takes {data['attention_share_of_device_time']:.0%} of the trace's device "
            "time (its kernels, copies and fills, summed)."
        )
    chapters = {p for entry in page.config.get("nav", []) for p in entry.values()}
    found = []
    for f in data["findings"]:
        if chapters and f["chapter"] not in chapters:
            raise ValueError(f"findings: chapter {f['chapter']!r} is not a page of the site")
        found.append(
            f"- {md.code(f['kind'])} ({count_text(f['count'])}): {md.prose(f['advice'])} See "
            f"[{md.text(f['chapter'])}]({page.link(f['chapter'])})."
        )
    found = found or ["- No finding: nothing to fix that diagnose knows of."]
    unchecked: dict[str, list[str]] = {}  # one line per reason
    for gap in data["not_checked"]:
        unchecked.setdefault(md.prose(gap["why"]), []).append(md.code(gap["kind"]))
    found += [f"- Not checked, {', '.join(k)}: {why}." for why, k in unchecked.items()]
    found += [f"- The trace itself: {line}." for line in data.get("lint", [])]
    text.append("\n".join(found))
    shot = data["screenshot"]
    if (page.root / layout.PUBLIC_DIR / folder / layout.VIEWER).is_file():
        alt = f"One attention call of the {md.text(src['GPU'])} trace in a trace viewer"
        focus = _focus(data.get("viewer"))
        text.append(
            f"![{alt}]({page.link(f'{here}/{layout.VIEWER}')}){{ loading=lazy{focus} }}\n\n<small>"
            f"{md.text(shot.get('band', 'One attention call').capitalize())} in the trace viewer "
            f"(where: {md.text(shot['where'])}), marked by the band on the diagnose track; selected "
            f"and boxed in red: {md.code(shot['select'][:80])}. Python's stack frames are left out "
            "of the picture.</small>"
        )
    # The trace itself from its source, as recorded (not ours to scrub and republish).
    raw = f"{src['repository']}/raw/{src['commit']}/{src['path']}"
    text.append(f"Download: [{src['path'].rsplit('/', 1)[-1]}]({raw}) (from {repo}, as recorded)")
    text.append(
        "\n".join(
            f"- {VERDICT[c['holds']][0]} **{VERDICT[c['holds']][1]}:** {md.prose(c['text'])} "
            f"<small>Observed: {md.prose(c['observed'])}</small>"
            for c in data["claims"]
        )
    )
    return "\n\n".join(text)


def render_guess(page: Page, kind: str, *names: str) -> str:
    """`<!-- profile-guess: KIND VARIANT... -->`: a question of docs/hooks/guesses.py the reader
    answers on the page, per set, its answer read from the set's summaries; answering opens the
    evidence below it (a `??? abstract evidence` block)."""
    question = QUESTIONS.get(kind)
    if question is None:
        raise page.error(f"unknown guess {kind!r}; the guesses: {', '.join(QUESTIONS)}")
    if len(names) != question.variants:
        raise page.error(
            f"the guess {kind!r} names {question.variants} variant(s), not {len(names)}"
        )
    page.variants(*names)

    def body(hw: dict) -> str | None:
        found = [hw["summaries"].get(n) for n in names]
        answer = None if None in found else question.answer(found)
        key = f"guess-{hw['slug']}-{kind}-{'-'.join(names)}"
        return answer and form(question, list(names), answer, key)

    return per_set(page, " and ".join(f"`{n}`" for n in names), body)


RENDERERS = {  # marker kind -> (how many arguments it takes, None: one or more; its renderer)
    "profile": (1, render_variant),
    "profile-check": (1, render_check),
    "profile-claim": (2, render_claim),
    "profile-compare": (None, render_compare),
    "profile-diff": (2, render_diff),
    "profile-speedup": (2, render_speedup),
    "profile-env": (0, render_env),
    "profile-glance": (0, render_glance),
    "profile-figure": (1, render_figure),
    "profile-chapters": (0, render_chapters),
    "profile-public": (1, render_public),
    "profile-guess": (None, render_guess),
}


def expand(markdown: str, src_uri: str, root: Path, config: dict | None = None) -> str:
    """Replace every marker of a page; a marker that cannot be rendered fails the build."""
    page = Page(src_uri, hardware_sets(Path(root)), config or {}, Path(root))

    def replace(m: re.Match) -> str:
        marker, args = m[0].strip(), (m["args"] or "").split()
        if m["kind"] not in RENDERERS:
            raise page.error(f"unknown marker {marker!r}; the markers: {', '.join(RENDERERS)}")
        arity, render = RENDERERS[m["kind"]]
        if len(args) != arity if arity is not None else not args:
            takes = "one or more" if arity is None else arity
            raise page.error(f"{marker!r} takes {takes} argument(s)")
        # A marker indented inside an admonition or tab gets its output indented the same way.
        return "\n" + textwrap.indent(render(page, *args), m["indent"]).rstrip() + "\n"

    return MARKER.sub(replace, markdown)


# --- MkDocs events --------------------------------------------------------------------------------


def profiles_root(config) -> Path:
    """$ATTN_PROFILES_DIR, or profiles/ beside mkdocs.yml."""
    here = Path(config.config_file_path).resolve().parent
    return Path(os.environ.get("ATTN_PROFILES_DIR") or here / "profiles")


def on_files(files, config):
    hardware_sets.cache_clear()  # checked once per build, then reused by every page
    for file in artifact_files(profiles_root(config), config):
        if files.get_file_from_path(file.src_uri) is None:
            files.append(file)
    return files


def on_page_markdown(markdown, page, config, files):
    return expand(markdown, page.file.src_uri, profiles_root(config), config)


def on_post_build(config):
    """Publish the offline trace viewer beside the site, for the "Open here" buttons."""
    from attn.profiling.viewer import publish_viewer  # copies files; measures nothing

    publish_viewer(Path(config["site_dir"]))
