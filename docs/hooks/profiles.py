"""MkDocs hook: replace the markers of a page with the artifacts under profiles/, and with excerpts of
the source files.

Written the way Material for MkDocs' hooks/shortcodes.py is: one regex finds the markers, RENDERERS
says which function renders each kind, and each renderer's docstring says what it writes. A marker
stands alone on its line (inline code such as `<!-- profile: naive -->` is left alone), e.g.
`<!-- profile: naive -->`, `<!-- profile-claim: naive clone-under-masked-fill -->` (a claim of the
variant's spec in attn/specs/, by key), `<!-- profile-figure: scaling -->` or
`<!-- profile-excerpt: attn/naive.py:forward "the forward" -->`; its arguments are read as a shell
reads words, so a title in quotes is one. One that names an unknown variant, claim, figure, file or
section fails the build. The sets are read and checked by profile_sets.py, and profile_text.py
writes what a tab says of one; variants, claims and lessons come from attn.specs.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import public_text
from excerpts import excerpt
from guesses import QUESTIONS, form
from image_sizes import with_sizes
from mkdocs.exceptions import PluginError
from mkdocs.utils.meta import get_data
from profile_sets import BrokenSet, artifact_files, hardware_sets, load_public, read_json
from profile_text import (
    claim_box,
    claim_list,
    claims_of,
    compare_tab,
    downloads,
    environment_line,
    first_calls_tab,
    glance_text,
    kernel_list,
    mark,
    overhead_tab,
    run_line,
    speedup_tab,
    timeline_mark,
    trace_buttons,
    unavailable_note,
    unchecked_note,
    viewer_image,
)
from rank_text import ranks_text
from sources import wheel_name

from attn import specs
from attn.traces.claims.benchmark_checks import BenchmarkClaim
from attn.traces.claims.dispatch_tables import dispatch_table
from attn.traces.claims.figure_tables import (
    OVERHEAD_KINDS,
    benchmark_table,
    decoding_table,
    scaling_table,
    table_head,
    table_row,
)
from attn.traces.claims.roofline import limit_sentence
from attn.traces.common import artifacts
from attn.traces.common import markdown as md
from attn.traces.common.set_schema import SET_CLAIMS
from attn.traces.common.viewer_files import publish_viewer
from attn.traces.compare.diff import diff_name
from attn.traces.compare.diff import render_diff as diff_markdown
from attn.traces.figures import peaks_figure
from attn.traces.read.trace import BACKWARD_RANGE, FORWARD_RANGE

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*(?P<kind>profile[\w-]*)\s*(?::(?P<args>[^>]*?))?\s*-->[ \t]*$",
    re.M,
)
# A line pymdownx.snippets would replace with a file (of the checkout, or outside it): only an
# excerpt marker writes one; in anything else it is a set's text that escaped attn.traces.common.markdown.
SNIPPET = re.compile(r"^[ \t]*;*-+8<-+.*$", re.M)
MADE_BY = {
    "benchmark": "benchmark"
}  # the nox session that writes a figure, if not profile_examples
# figure -> the part a phone scrolls to (fractions of its width): the largest sequence lengths,
# where the curves part. A figure not named here opens at its left edge, its axis's labels.
FIGURE_MARKS = {"scaling": (0.6, 1.0), "training": (0.6, 1.0)}
TABLES = {  # figure -> its data, tabled
    "benchmark": lambda rows: benchmark_table(rows, specs.BENCHMARK_BASELINE),
    "decoding": decoding_table,
    "scaling": lambda rows: scaling_table(rows, specs.REFERENCE),
    "dispatch": dispatch_table,
}
OPEN_TABLES = {"dispatch"}  # shown open under the figure: torch's words are the point


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


# --- tabs, one per hardware set -------------------------------------------------------------------


def _tabs(tabs: list[tuple[str, str]]) -> str:
    """A content-tab set; `===!` opens a new set, so it never merges with tabs written around it."""
    return "\n".join(
        f'{"===!" if i == 0 else "==="} "{md.label(title)}"\n\n{textwrap.indent(body.strip(), "    ")}\n'
        for i, (title, body) in enumerate(tabs)
    )


def _not_profiled(page: Page, what: str) -> str:
    return (
        f'!!! note "Not profiled yet"\n\n    No hardware set in `profiles/` has artifacts for {what} '
        f"yet. [Reproduce]({page.link('reproduce.md')}) says how to make them.\n"
    )


def per_set(page: Page, what: str, tab: Callable[..., str | None], *args) -> str:
    """One tab per set that tab(hw, *args) has something for, or a note that no set has `what` yet."""
    tabs = [(hw["title"], text) for hw in page.sets if (text := tab(hw, *args))]
    return _tabs(tabs) or _not_profiled(page, what)


# --- the renderers, one per marker kind -----------------------------------------------------------


def render_variant(page: Page, name: str) -> str:
    """`<!-- profile: name -->`: one tab per hardware set that has the variant."""
    page.variants(name)
    return per_set(page, f"`{name}`", variant_tab, page, name)


def variant_tab(hw: dict, page: Page, name: str) -> str | None:
    """The variant on one set: environment, what ran, its table, pictures, buttons, kernels and
    files; or why it did not run there."""
    summary = hw["summaries"].get(name)
    if summary is None:
        return None
    if not summary["available"]:
        return unavailable_note(hw, summary)
    files = set(hw["manifest"]["variants"][name].get("files", []))
    url = lambda f: page.link(f"profiles/{hw['slug']}/{name}/{f}")  # noqa: E731
    where = f"{name} on {hw['title']}"  # text: each use escapes it
    shown = BACKWARD_RANGE if "backward" in summary else FORWARD_RANGE  # a step: its backward
    text = [f"<small>{environment_line(hw)}</small>", run_line(summary)]
    if "ranks" in summary:  # run on several ranks: theirs, side by side, then each one's
        read = lambda f: (hw["folder"] / name / f).read_text(encoding="utf-8")  # noqa: E731
        return "\n\n".join(text + ranks_text(summary, (files, url, read), where))
    if artifacts.TABLE_MD in files:
        text.append((hw["folder"] / name / artifacts.TABLE_MD).read_text(encoding="utf-8").strip())
    if artifacts.VIEWER in files:
        text.append(viewer_image(summary, where, shown, url(artifacts.VIEWER)))
    elif missing := (summary.get("viewer") or {}).get("missing"):  # why there is no picture
        text.append(f"<small>No trace-viewer picture of this run: {md.text(missing)}.</small>")
    if artifacts.TIMELINE in files:
        alt = f"Timeline of one profiled forward of {md.text(where)}"
        svg = (hw["folder"] / name / artifacts.TIMELINE).read_bytes()
        at = timeline_mark(svg, (summary.get("viewer") or {}).get("selected"))
        text.append(f"![{alt}]({url(artifacts.TIMELINE)}){{ loading=lazy{at} }}")
    if artifacts.TRACE in files:
        text.append(trace_buttons(url(artifacts.TRACE), where, shown))
    if kernels := summary.get("kernels"):
        text.append(kernel_list(kernels, summary.get("kernels_not_listed") or 0))
    return "\n\n".join(text + downloads(files, url))


def render_check(page: Page, name: str) -> str:
    """`<!-- profile-check: name -->`: every claim, as checked on every set, then those unchecked."""
    page.variants(name)
    checked = [(hw, claims) for hw in page.sets if (claims := claims_of(name, hw))]
    text = _tabs([(hw["title"], claim_list(claims)) for hw, claims in checked])
    text += unchecked_note(name, {hw["device_type"] for hw, _ in checked})
    return text or _not_profiled(page, f"`{name}`")


def render_claim(page: Page, name: str, key: str) -> str:
    """`<!-- profile-claim: name KEY -->`: one claim of the variant's spec, with its verdict on
    each set that checked it (a benchmark claim: each set with a benchmark of its device type)."""
    page.variants(name)
    claim = specs.claim(name, key)
    if claim is None:
        keys = ", ".join(c.key for c in specs.spec(name).claims)
        raise page.error(f"{name!r} has no claim {key!r}; its claims: {keys}")
    if isinstance(claim, BenchmarkClaim):  # about a figure's rows (benchmark.json by default)
        return claim_box(name, claim, *figure_verdicts(page, name, claim))
    verdicts = [
        (c.get("holds"), c.get("observed"), hw["title"])
        for hw in page.sets
        for c in claims_of(name, hw)
        if c.get("key") == key
    ]
    waiting = "Not checked yet: no profile set here has run it on such hardware."
    return claim_box(name, claim, verdicts, waiting)


def figure_verdicts(page: Page, name: str, claim: BenchmarkClaim) -> tuple[list[tuple], str]:
    """(holds, observed, set title) of each set of the claim's device type that has its figure,
    as the set's claims.json holds it, and what to say when none has."""
    verdicts = [
        (stored["holds"], stored["observed"], hw["title"])
        for hw in page.sets
        if hw["device_type"] == claim.device_type and has_figure(hw, claim.figure)
        for stored in [stored_verdict(hw, name, claim)]
    ]
    where = {"cpu": "a CPU", "cuda": "a GPU"}[claim.device_type]
    waiting = (
        f"Not measured yet: no profile set here has {claim.figure}.json on {where}. "
        f"`nox -s {MADE_BY.get(claim.figure, 'profile_examples')}` on such a machine writes "
        "it, and the next build checks it."
    )
    return verdicts, waiting


def stored_verdict(hw: dict, name: str, claim: BenchmarkClaim) -> dict:
    """The claim's verdict as the set's claims.json holds it; BrokenSet where the set has the
    claim's rows but no verdict of it (decided when the rows are written, and by recheck)."""
    path = hw["folder"] / artifacts.CLAIMS
    stored = read_json(path, fits=SET_CLAIMS)["variants"] if path.is_file() else {}
    found = stored.get(name, {}).get(claim.key)
    if found is None:
        raise BrokenSet(
            f"profiles hook: {path} holds no verdict of {name}'s claim {claim.key!r} on its "
            f"{claim.figure} rows: `attn-profile recheck` decides it"
        )
    return found


def has_figure(hw: dict, figure: str) -> bool:
    """Whether the set has what a benchmark claim reads: a figure's rows, or a timing pass."""
    if figure == "timing":
        return bool((hw.get("timing") or {}).get("variants"))
    return figure in hw["manifest"].get("figures", [])


def render_first_calls(page: Page, *names: str) -> str:
    """`<!-- profile-first-calls: name... -->`: the compiled variants' first calls, cold and warm,
    one tab per set that timed them."""
    page.variants(*names)
    return per_set(page, "first calls", first_calls_tab, names)


def render_compare(page: Page, *names: str) -> str:
    """`<!-- profile-compare: a b -->`: a table of per-forward numbers per hardware set."""
    page.variants(*names)
    return per_set(page, ", ".join(f"`{n}`" for n in names), compare_tab, names)


def render_speedup(page: Page, a: str, b: str) -> str:
    """`<!-- profile-speedup: A B -->`: A's and B's times from each set's timing pass, A's ÷ B's with
    its interval and verdict (cannot tell where the interval holds 1); with A naive, the clone of
    one score matrix timed in the same rounds."""
    page.variants(a, b)
    return per_set(page, f"a timing pass with `{a}` and `{b}`", speedup_tab, a, b)


def render_diff(page: Page, a: str, b: str) -> str:
    """`<!-- profile-diff: A B -->`: what changed from A to B on each set, as the harness wrote it."""
    page.variants(a, b)
    return per_set(page, f"a diff of `{a}` and `{b}`", diff_tab, a, b)


def diff_tab(hw: dict, a: str, b: str) -> str | None:
    """The set's diff of A and B, drawn from its rows: the stored Markdown could hold anything."""
    if diff_name(a, b) not in hw["manifest"].get("diffs", []):
        return None
    path = hw["folder"] / artifacts.DIFF_DIR / diff_name(a, b)
    try:  # each name as text
        return diff_markdown(read_json(path))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BrokenSet(f"profiles hook: {path} is not a diff ({type(e).__name__}: {e})") from e


def render_env(page: Page) -> str:
    """`<!-- profile-env -->`: one row per hardware set (CUDA and cuDNN only where a set has them)."""
    versions = {"cuda_version": "CUDA", "cudnn_version": "cuDNN"}
    keys = [k for k in versions if any(hw["env"].get(k) for hw in page.sets)]
    head = ["folder", "device", "torch", *(versions[k] for k in keys), "date", "commit"]
    rows = table_head(head, len(head))
    for hw in page.sets:
        env = hw["env"]
        device = md.text(env.get("device_name") or hw["title"])
        if hw["device_type"] == "cpu" and env.get("threads"):
            device += f" ({env['threads']} threads)"
        cells = [
            None if v is None else md.text(v)
            for v in map(env.get, ("torch_version", *keys, "date"))
        ]
        commit = md.code(env["git_commit"]) if env.get("git_commit") else None
        rows.append(table_row([f"`profiles/{hw['slug']}/`", device, *cells, commit]))
    return "\n".join(rows) + "\n" if page.sets else _not_profiled(page, "any variant")


def render_glance(page: Page) -> str:
    """`<!-- profile-glance -->`: every variant of every hardware set, side by side, with its
    speedup over the reference variant (at the reference's shape) and its lesson."""
    return per_set(page, "any variant", glance_tab, page)


def glance_tab(hw: dict, page: Page) -> str | None:
    """The set's variants in chapter order, and its overview figure if it has one."""
    summaries = [hw["summaries"][n] for n in specs.names() if n in hw["summaries"]]
    if not summaries:
        return None
    text = glance_text(hw, summaries)
    if hw["manifest"].get("overview"):
        svg = page.link(f"profiles/{hw['slug']}/{artifacts.OVERVIEW}")
        alt = f"Time per forward of each variant on {md.text(hw['title'])}"
        text.append(f"![{alt}]({svg}){{ loading=lazy }}")
    return "\n\n".join(text)


def render_figure(page: Page, name: str) -> str:
    """`<!-- profile-figure: NAME -->`: that picture of each hardware set that has one, and its data."""
    if name not in artifacts.FIGURES:
        raise page.error(f"unknown figure {name!r}; known figures: {', '.join(artifacts.FIGURES)}")
    return per_set(page, f"the {name} figure", figure_tab, page, name)


def figure_tab(hw: dict, page: Page, name: str) -> str | None:
    """The set's picture, its data as a table (closed) where the figure has one, and the data file."""
    if name not in hw["manifest"].get("figures", []):
        return None
    svg, data = (page.link(f"profiles/{hw['slug']}/{name}.{ext}") for ext in ("svg", "json"))
    text = [
        f"<small>{environment_line(hw)}</small>",
        f"![{name} on {md.text(hw['title'])}]({svg}){{ loading=lazy"
        f"{mark(*FIGURE_MARKS[name]) if name in FIGURE_MARKS else ''} }}",
    ]
    if name in OPEN_TABLES:  # the table is what the page is about; the figure sums it up
        text.append(figure_table(hw, name))
    elif name in TABLES:  # closed: long on a phone (the benchmark's, 5 screens), the figure first
        table = figure_table(hw, name)
        text.append(f'??? abstract "The {name} in numbers"\n\n' + textwrap.indent(table, "    "))
    return "\n\n".join([*text, f"Data: [{name}.json]({data})"])


def render_overhead(page: Page, kind: str) -> str:
    """`<!-- profile-overhead: KIND -->`: each CPU set's overhead.json rows of that kind, tabled."""
    if kind not in OVERHEAD_KINDS:
        raise page.error(f"unknown overhead kind {kind!r}; the kinds: {', '.join(OVERHEAD_KINDS)}")
    try:  # every value shows as text
        return per_set(page, "overhead.json", overhead_tab, kind, page.link)
    except (KeyError, TypeError, ValueError, StopIteration) as e:
        raise BrokenSet(f"profiles hook: an overhead.json row the page cannot show ({e!r})") from e


def render_peaks(page: Page, name: str) -> str:
    """`<!-- profile-peaks: name -->`: each set's peaks.svg (its variants' shares of the measured
    peaks) and what limits the variant there, compute or memory, from its benchmark rows."""
    page.variants(name)
    return per_set(page, "a benchmark", peaks_tab, page, name)


def peaks_tab(hw: dict, page: Page, name: str) -> str | None:
    """The set's picture of the shares, where it has one, and the sentence of what limits the
    variant; nothing where the set's benchmark has no row of the variant."""
    if "benchmark" not in hw["manifest"].get("figures", []):
        return None
    path = hw["folder"] / "benchmark.json"
    rows = read_json(path, list)
    if not any(r.get("variant") == name for r in rows):
        return None
    try:  # every value shows as text
        text, drawn = [md.prose(limit_sentence(rows, name))], bool(peaks_figure.groups(rows))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BrokenSet(f"profiles hook: {path}: a row the page cannot show ({e!r})") from e
    if (hw["folder"] / peaks_figure.FILE).is_file():
        svg = page.link(f"profiles/{hw['slug']}/{peaks_figure.FILE}")
        alt = f"Each variant's share of the measured peaks on {md.text(hw['title'])}"
        text.insert(0, f"![{alt}]({svg}){{ loading=lazy }}")
    elif drawn:  # a set benchmarked with the peaks, before the picture
        later = "`attn-profile recheck` draws it from benchmark.json"
        text.insert(0, f"No picture of the shares in this set yet: {later}.")
    else:
        text.insert(0, "Shares of the measured peaks: not measured in this set.")
    return "\n\n".join(text)


def figure_table(hw: dict, name: str) -> str:
    """The figure's rows as a table; a row of the wrong type fails the build naming the file."""
    path = hw["folder"] / f"{name}.json"
    try:  # every value shows as text
        return TABLES[name](read_json(path, list))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BrokenSet(f"profiles hook: {path}: a row the page cannot show ({e!r})") from e


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
    data = load_public(page.root / artifacts.PUBLIC_DIR / folder)  # checked, or BrokenSet
    if data is None:
        return (
            f'!!! note "Not written yet: {folder}"\n\n    `python -m attn.profiling.public` writes '
            "what this section shows, from the trace in `tests/fixtures/realtraces/`.\n"
        )
    try:
        return public_text.public_diagnosis(page, folder, data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        path = page.root / artifacts.PUBLIC_DIR / folder / artifacts.DIAGNOSIS
        raise BrokenSet(
            f"profiles hook: {path} is not a diagnosis ({type(e).__name__}: {e})"
        ) from e


def render_guess(page: Page, kind: str, *names: str) -> str:
    """`<!-- profile-guess: KIND VARIANT... -->`: a question of docs/hooks/guesses.py the reader
    answers on the page, per set, its answer read from the set's summaries. guess.js hides what
    follows it, up to the next question's section, until the reader answers or skips; then it
    shows it and opens the evidence in it (`??? abstract evidence` blocks)."""
    question = QUESTIONS.get(kind)
    if question is None:
        raise page.error(f"unknown guess {kind!r}; the guesses: {', '.join(QUESTIONS)}")
    if len(names) != question.variants:
        raise page.error(
            f"the guess {kind!r} names {question.variants} variant(s), not {len(names)}"
        )
    page.variants(*names)
    what = (
        f"the {question.figure} figure"
        if question.figure
        else " and ".join(f"`{n}`" for n in names)
    )
    return per_set(page, what, guess_tab, kind, names)


def guess_tab(hw: dict, kind: str, names: tuple[str, ...]) -> str | None:
    """The question's box on one set, if every variant it names has a summary there."""
    question = QUESTIONS[kind]
    if question.figure:  # answered from the set's rows of that figure, where it has them
        if question.figure not in hw["manifest"].get("figures", []):
            return None
        found = read_json(hw["folder"] / f"{question.figure}.json", list)
    else:
        found = [hw["summaries"].get(n) for n in names]
    answer = None if None in found else question.answer(found)
    key = f"guess-{hw['slug']}-{kind}-{'-'.join(names)}"
    return answer and form(question, list(names), answer, key)


def render_excerpt(page: Page, target: str, *words: str) -> str:
    """`<!-- profile-excerpt: PATH:SECTION "title" -->`: the section of a source file in a fence
    titled "PATH (title, excerpt)", included by pymdownx.snippets, then a note linking the whole
    file (docs/hooks/excerpts.py)."""
    try:
        return excerpt(target, words, page.link)
    except ValueError as e:
        raise page.error(f"<!-- profile-excerpt: {target} -->: {e}") from None


def render_install(page: Page) -> str:
    """`<!-- profile-install -->`: how to install the package from what this site offers: the wheel
    it publishes (sources.py), and a checkout of the repository, linked where the site has one."""
    root = Path(__file__).resolve().parents[2]
    wheel = wheel_name(root)
    # A raw link: the wheel is written after the pages, so MkDocs would not find it to check.
    here = page.src_uri.removesuffix(".md")
    if not page.config.get("use_directory_urls", True) or posixpath.basename(here) == "index":
        here = posixpath.dirname(here)
    href = posixpath.relpath(f"dist/{wheel}", here or ".")
    repo = page.config.get("repo_url")
    where = (
        f"[the repository]({repo})"
        if repo
        else "the repository (this build of the site links none)"
    )
    return (
        "This site publishes the package as a wheel, the kernels' sources in it: download "
        f'<a href="{href}" download>{md.code(wheel)}</a>, then `pip install {wheel}`. In a '
        f"checkout of {where}, `pip install -e .` installs it too.\n"
    )


RENDERERS = {  # marker kind -> (how many arguments it takes, None: one or more; its renderer)
    "profile": (1, render_variant),
    "profile-check": (1, render_check),
    "profile-claim": (2, render_claim),
    "profile-compare": (None, render_compare),
    "profile-first-calls": (None, render_first_calls),
    "profile-diff": (2, render_diff),
    "profile-speedup": (2, render_speedup),
    "profile-env": (0, render_env),
    "profile-glance": (0, render_glance),
    "profile-figure": (1, render_figure),
    "profile-peaks": (1, render_peaks),
    "profile-overhead": (1, render_overhead),
    "profile-chapters": (0, render_chapters),
    "profile-public": (1, render_public),
    "profile-guess": (None, render_guess),
    "profile-excerpt": (None, render_excerpt),
    "profile-install": (0, render_install),
}


def expand(markdown: str, src_uri: str, root: Path, config: dict | None = None) -> str:
    """Replace every marker of a page; a marker that cannot be rendered fails the build."""
    page = Page(src_uri, hardware_sets(Path(root)), config or {}, Path(root))

    def replace(m: re.Match) -> str:
        marker = m[0].strip()
        if m["kind"] not in RENDERERS:
            raise page.error(f"unknown marker {marker!r}; the markers: {', '.join(RENDERERS)}")
        try:
            args = shlex.split(m["args"] or "")
        except ValueError as e:  # a quote left open
            raise page.error(f"{marker!r}: {e}") from None
        arity, render = RENDERERS[m["kind"]]
        if len(args) != arity if arity is not None else not args:
            takes = "one or more" if arity is None else arity
            raise page.error(f"{marker!r} takes {takes} argument(s)")
        out = render(page, *args)
        if m["kind"] != "profile-excerpt" and (found := SNIPPET.search(out)):
            raise page.error(f"{marker!r} wrote a snippet include, {found[0].strip()!r}")
        # A marker indented inside an admonition or tab gets its output indented the same way.
        return "\n" + textwrap.indent(out, m["indent"]).rstrip() + "\n"

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


def on_page_content(html, page, config, files):
    """Every picture with its width and height (image_sizes.py): the page keeps their room."""

    def read(path: str) -> bytes | None:
        file = files.get_file_from_path(path)
        return None if file is None else file.content_bytes

    return with_sizes(html, page.url, read)


def on_post_build(config):
    """Publish the offline trace viewer beside the site, for the "Open here" buttons."""
    publish_viewer(Path(config["site_dir"]))
