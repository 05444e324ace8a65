"""diagnose's result as a report: a table of attention, then findings, gaps and lint; as the
terminal shows it (tables drawn in characters, at the console's width) or as Markdown (tables that
wrap to the column of a notebook or a page). Both draw the same parts, made once here."""

from __future__ import annotations

import dataclasses
import re

from rich.console import Console
from rich.table import Table

from attn.traces.common import markdown as md
from attn.traces.common.terminal import shown
from attn.traces.common.units import count_text, time_text
from attn.traces.read.trace import EPS_US

HEADERS = ("implementation", "pass", "compiled", "where", "shapes", "calls", "kernels",
           "time", "share")  # fmt: skip
NOTHING = "–"  # a cell the trace cannot fill
WRAPPED = ("where", "shapes")  # on the terminal, the attention table's columns that wrap
# The titles of the chapters a finding names, as mkdocs.yml's nav gives them (a test keeps the two
# the same): a reader follows "In-place masking", not "inplace.md".
CHAPTERS = {
    "reading-a-profile.md": "Reading a profile", "naive.md": "Naive attention",
    "inplace.md": "In-place masking", "sdpa.md": "SDPA backends",
    "custom-kernels.md": "Custom kernels", "compiled-and-flex.md": "Compiled and Flex attention",
    "decoding.md": "Decoding", "training.md": "Training",
    "context-parallel.md": "Context parallelism",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Grid:
    """A table of the report: its cells are text from the trace, shown as text."""

    title: str
    headers: tuple[str, ...]
    rows: list[list[str]]
    caption: str | None = None
    about: tuple[str, ...] = ()  # the columns the caption is about
    links: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # column: each row's page


@dataclasses.dataclass(frozen=True)
class Line:
    """A sentence of the report: `item` one of a list, `whole` a name cut rather than wrapped on
    the terminal, `quiet` said in passing (dim on the terminal)."""

    text: str
    item: bool = False
    whole: bool = False
    quiet: bool = False


def _time_cell(r: dict) -> str:
    """Time per call: on the device, with its spread over the calls (times move with load; counts
    do not); with no device time (a CPU trace), the host's, labelled as CPU time."""
    if r["device_time_us_per_call"] is None:
        cpu = r.get("cpu_time_us_per_call")  # absent from a diagnosis written before it was kept
        return NOTHING if cpu is None else f"{time_text(cpu)} CPU time"
    lo, hi = r["device_time_us_range"]
    spread = "" if hi - lo <= 0.05 * max(hi, EPS_US) else f" ({time_text(lo)}–{time_text(hi)})"
    return time_text(r["device_time_us_per_call"]) + spread


def _ratio_text(r: dict) -> str:
    ratio = r.get("backward_forward_ratio")
    if not ratio:
        return ""
    spread = f"{ratio['min']:.2f}–{ratio['max']:.2f}"
    how = f", linked by {r['linked_by']}" if r.get("linked_by") else ""
    return f"{ratio['median']:.2f}x the forward's {ratio['of']} ({spread}{how})"


def _preparation_text(r: dict) -> str | None:
    """The work before a call that made its inputs, charged to it, per call."""
    if not r.get("preparation"):
        return None
    parts = [
        f"{p['what']} {count_text(p['ops_per_call'])} op(s)"
        + (
            ""
            if p["device_time_us_per_call"] is None
            else f" {time_text(p['device_time_us_per_call'])}"
        )
        for p in r["preparation"]
    ]
    return "before the call, making its inputs: " + ", ".join(parts) + " per call"


def _work_text(r: dict) -> str | None:
    """What a call's device time is: its attention kernels, then the rest by kind."""
    if r.get("attention_kernel_time_us_per_call") is None:
        return None
    parts = [f"attention kernels {time_text(r['attention_kernel_time_us_per_call'])}"]
    for w in r["other_work"]:
        kernels = count_text(w["kernels_per_call"])
        plural = "" if w["kernels_per_call"] == 1 else "s"
        parts.append(
            f"{w['what']} {time_text(w['device_time_us_per_call'])} ({kernels} kernel{plural})"
        )
    return f"{time_text(r['device_time_us_per_call'])} per call: " + ", ".join(parts)


def _terms_text(r: dict) -> str | None:
    """Eager: how Q.K^T was told, and the extra terms on the score matrix."""
    if "qk_found_by" not in r:
        return None
    if r["extra_terms"] is None:
        return f"Q.K^T and P.V taken by {r['qk_found_by']}"
    terms = ", ".join(
        f"{t['op']}"
        + ("" if t["per_call"] == 1 else f" x{count_text(t['per_call'])}")
        + (
            ""
            if t["device_time_us_per_call"] is None
            else f" {time_text(t['device_time_us_per_call'])}"
        )
        for t in r["extra_terms"]
    )
    return f"extra terms on the scores: {terms or 'none'}"


def _attention_cells(r: dict) -> list[str]:
    share = r["share_of_device_time"]
    return [
        r["implementation"],
        r["pass"],
        "yes" if r["compiled"] else "no",
        r["where"],
        r["shapes"] or NOTHING,
        str(r["calls"]),
        NOTHING if r["kernels_per_call"] is None else count_text(r["kernels_per_call"]),
        _time_cell(r),
        NOTHING if share is None else f"{share:.1%}",
    ]


def _attention(result: dict) -> list[Grid | Line]:
    """The attention table, its share of the trace, and each row's ratio, work and kernels."""
    rows = [_attention_cells(r) for r in result["attention"]]
    parts: list[Grid | Line] = [
        Grid(
            "Attention",
            HEADERS,
            rows,
            "kernels, time (on the device, else CPU time) and share: per call",
            ("kernels", "time", "share"),
        )
    ]
    if result["attention_share_of_device_time"] is not None:
        share = result["attention_share_of_device_time"]
        parts.append(Line(f"Attention takes {share:.1%} of the trace's summed device time."))
    for n, r in enumerate(result["attention"], 1):
        head = f"{n}. {r['implementation']} {r['pass']}"
        for text in (_ratio_text(r), _work_text(r), _preparation_text(r), _terms_text(r)):
            if text:
                parts.append(Line(f"{head}: {text}", item=True))
        parts += [Line(f"{head}: {kernel}", item=True, whole=True) for kernel in r["kernels"]]
    return parts


def _unattributed(result: dict) -> list[Line]:
    """The kernels no attention row explains, each over 1% of the device time."""
    found = result.get("unattributed")
    if found is None or not result["trace"]["device_activity"]:
        return []
    if not found:
        return [Line("Unattributed: no kernel outside the rows above takes 1% of device time.")]
    return [
        Line("Unattributed: kernels outside the rows above, each over 1% of device time:"),
        *(
            Line(
                f"{u['share']:5.1%} {u['calls']:>5} x, under "
                f"{u['launched_by'] or 'no launch recorded'}: {u['name']}",
                item=True,
                whole=True,
            )
            for u in found
        ),
    ]


def _findings(result: dict) -> list[Grid | Line]:
    if result["findings"]:
        rows = [
            [
                f["kind"],
                str(f["count"]),
                chapter_title(f["chapter"]),
                f["advice"] + (f" ({f['detail']})" if f.get("detail") else ""),
            ]
            for f in result["findings"]
        ]
        pages = [f["chapter"] for f in result["findings"]]
        headers = ("finding", "count", "chapter", "advice")
        return [Grid("Findings", headers, rows, links={"chapter": pages})]
    return [Line("Findings: none.")] if result["attention"] else []


def chapter_title(page: str) -> str:
    """A finding's chapter as a reader finds it: its title, and on the terminal its page."""
    return CHAPTERS.get(page, page)


def _not_checked(result: dict) -> list[Line]:
    """One line per reason, however many findings it stops."""
    gaps: dict[str, list[str]] = {}
    for gap in result["not_checked"]:
        gaps.setdefault(gap["why"], []).append(gap["kind"])
    return [
        Line(f"{', '.join(kinds)}: not checked, {why}", quiet=True) for why, kinds in gaps.items()
    ]


def parts(result: dict) -> list[Grid | Line]:
    """The report's tables and sentences in order: attention, what no row explains, then
    findings, gaps and lint."""
    found: list[Grid | Line] = (
        _attention(result) if result["attention"] else [Line("No attention found in this trace.")]
    )
    layout = result.get("layout_kernels") or {}
    if layout.get("kernels"):
        found.append(
            Line(
                f"Layout work, not attention: {layout['kernels']} Inductor pointwise or reduction "
                f"kernel(s) named after attention ops, {time_text(layout['device_time_us'])} in "
                "all."
            )
        )
    found += _unattributed(result) + _findings(result) + _not_checked(result)
    return found + [Line(f"Trace: {line}.") for line in result.get("lint", [])]


def report(result: dict, console: Console) -> None:
    """The report as the terminal shows it."""
    for part in parts(result):
        if isinstance(part, Grid):
            table = Table(title=part.title, caption=part.caption)
            for header in part.headers:
                if part.headers == HEADERS:  # long names fold; numbers stay on one line
                    table.add_column(header, overflow="fold", no_wrap=header not in WRAPPED)
                else:
                    table.add_column(header)
            for n, row in enumerate(part.rows):
                row = list(row)
                for column, pages in part.links.items():  # no link on a terminal: the page said
                    i = part.headers.index(column)
                    row[i] = f"{row[i]} ({pages[n]})" if row[i] != pages[n] else row[i]
                table.add_row(*map(shown, row))
            console.print(table)
        elif part.quiet:
            console.print(f"[dim]{shown(part.text)}[/dim]")
        elif part.whole:
            console.print(f"  {shown(part.text)}", overflow="ellipsis", no_wrap=True)
        else:
            console.print(("  " if part.item else "") + shown(part.text))


def _markdown_table(grid: Grid, site: str | None) -> list[str]:
    """A table and its caption as Markdown, without the columns the trace filled in no row (a CPU
    trace's kernels and device time): Markdown wraps a table to its column, not a terminal's."""
    keep = [i for i, _ in enumerate(grid.headers) if any(row[i] != NOTHING for row in grid.rows)]
    cells = [[md.prose(c).replace("|", "\\|") for c in row] for row in grid.rows]
    for column, pages in grid.links.items():  # a link titled with the chapter, to its page
        i = grid.headers.index(column)
        for row, page in zip(cells, pages, strict=True):
            href = page if site is None else f"{site}{page.removesuffix('.md')}/"
            row[i] = f"[{row[i]}]({md.attribute(href)})"
    rows = [list(grid.headers), ["---"] * len(grid.headers), *cells]
    lines = ["| " + " | ".join(row[i] for i in keep) + " |" for row in rows]
    found = [f"**{grid.title}**\n\n" + "\n".join(lines)]
    if grid.caption and {grid.headers[i] for i in keep} & set(grid.about):
        found.append(md.prose(grid.caption[0].upper() + grid.caption[1:] + "."))
    return found


def markdown(result: dict, site: str | None = None) -> str:
    """The report as Markdown, for a notebook or a page: its tables wrap to their column. A
    chapter links its Markdown page (`inplace.md`, for a page mkdocs renders), or with `site`, the
    site's root as seen from where the report is shown, the page as published (`../../inplace/`
    from a notebook's page, whose output mkdocs does not rewrite)."""
    blocks, items = [], []
    for part in parts(result):
        if isinstance(part, Line) and part.item:
            # A list item that starts "1." would open a numbered list inside it.
            items.append("- " + re.sub(r"^(\d+)\.(?= )", r"\1\\.", md.prose(part.text)))
            continue
        if items:
            blocks, items = [*blocks, "\n".join(items)], []
        if isinstance(part, Grid):
            blocks += _markdown_table(part, site)
        else:
            blocks.append(f"*{md.prose(part.text)}*" if part.quiet else md.prose(part.text))
    return "\n\n".join([*blocks, "\n".join(items)] if items else blocks) + "\n"
