"""What a `<!-- profile-public: FOLDER -->` marker shows of a trace recorded by others: its source
and license, what diagnose finds in it, one attention call in the trace viewer, and its claims, all
read from the diagnosis.json its public-trace run wrote. Each value in it shows as text.

The renderers take the page (profiles.Page): its links, its site's nav, its profiles root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profile_text import VERDICT, focus

from attn.traces.claims.figure_tables import table_head, table_row
from attn.traces.common import artifacts
from attn.traces.common import markdown as md
from attn.traces.common.units import count_text, time_text

if TYPE_CHECKING:  # the hook's page; imported at run time it would be a circle
    from profiles import Page


def public_diagnosis(page: Page, folder: str, data: dict) -> str:
    """What render_public shows of a diagnosis.json; every value in it shows as text."""
    src = data["source"]
    repo = md.text(src["repository"].removeprefix("https://github.com/"))
    text = [public_source(folder, src, repo), public_attention(data["attention"])]
    if data.get("attention_share_of_device_time"):
        text.append(
            f"Attention takes {data['attention_share_of_device_time']:.0%} of the trace's device "
            "time (its kernels, copies and fills, summed)."
        )
    if data.get("unattributed"):
        text.append(public_unattributed(data["unattributed"]))
    text.append(public_findings(page, data))
    if (page.root / artifacts.PUBLIC_DIR / folder / artifacts.VIEWER).is_file():
        text.append(public_viewer(page, folder, data))
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


def public_source(folder: str, src: dict, repo: str) -> str:
    """Who recorded the trace, on what, where it is from, its license, and our copy of it (the
    repository, commit and path are checked as addresses: attn.traces.common.set_schema.DIAGNOSIS)."""
    commit, path = src["commit"], src["path"]
    url = f"{src['repository']}/blob/{commit}/{path}"
    return (
        f"<small>Recorded by others on an **{md.text(src['GPU'])}** · torch: "
        f"{md.text(src['torch'])} · [{md.code(path.rsplit('/', 1)[-1])}]({url}) from "
        f"[{repo}]({src['repository']}) at commit {md.code(commit[:8])}, "
        f"{md.text(src['license'])} license. A copy is kept as test data in "
        f"`tests/fixtures/realtraces/{folder}/`, with its SOURCE.txt and LICENSE.</small>"
    )


def public_attention(calls: list[dict]) -> str:
    """What diagnose finds, in four columns to fit a page's column: pass and compiled under the
    name, the shapes under where, one call's cost with its spread and share."""
    rows = []
    for r in calls:
        k, t = r["kernels_per_call"], r["device_time_us_per_call"]
        cost = None if k is None else f"{count_text(k)} kernel{'' if k == 1 else 's'}"
        if t is not None:
            lo, hi = r["device_time_us_range"]
            spread = f" ({time_text(lo)}–{time_text(hi)})" if hi > 1.05 * lo else ""
            share = f"{r['share_of_device_time']:.0%} of device time"
            own = r.get("attention_kernel_time_us_per_call")
            own = f"attention kernels {time_text(own)}" if r.get("other_work") else None
            cost = " · ".join(x for x in (cost, time_text(t) + spread, own, share) if x)
        notes = [r["pass"]] + (["compiled"] if r["compiled"] else [])
        name = f"{md.code(r['implementation'])}<br><small>{md.text(', '.join(notes))}</small>"
        shapes = f"<br><small>{md.text(r['shapes'])}</small>" if r.get("shapes") else ""
        rows.append(table_row([name, md.text(r["where"]) + shapes, count_text(r["calls"]), cost]))
    head = table_head(["implementation", "where", "calls", "per call"], 2)
    return "**What `diagnose` finds:**\n\n" + "\n".join([*head, *rows])


def public_unattributed(kernels: list[dict], shown: int = 3) -> str:
    """The largest kernels no attention row holds (each over 1% of device time): what the rest
    of the trace is, and what diagnose did not explain."""
    short = lambda name: name if len(name) <= 60 else f"{name[:44]}…{name[-15:]}"  # noqa: E731
    items = [
        f"{k['share']:.0%} {md.code(short(k['name']))} ({count_text(k['calls'])} "
        f"call{'' if k['calls'] == 1 else 's'}"
        + (f", under {md.code(k['launched_by'])})" if k.get("launched_by") else ")")
        for k in kernels[:shown]
    ]
    more = f", and {len(kernels) - shown} more" if len(kernels) > shown else ""
    return (
        "Outside the attention, the kernels with the most device time (each over 1%, which no row "
        f"above explains): {'; '.join(items)}{more}."
    )


def public_findings(page: Page, data: dict) -> str:
    """Each finding with its advice and the chapter about it, what was not checked (one line per
    reason), and what is wrong with the trace itself."""
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
    unchecked: dict[str, list[str]] = {}
    for gap in data["not_checked"]:
        unchecked.setdefault(md.prose(gap["why"]), []).append(md.code(gap["kind"]))
    found += [f"- Not checked, {', '.join(k)}: {why}." for why, k in unchecked.items()]
    found += [f"- The trace itself: {md.prose(line)}." for line in data.get("lint", [])]
    return "\n".join(found)


def public_viewer(page: Page, folder: str, data: dict) -> str:
    """The screenshot of one attention call in the trace viewer, and what it marks and selects."""
    src, shot = data["source"], data["screenshot"]
    here = f"profiles/{artifacts.PUBLIC_DIR}/{folder}"
    alt = f"One attention call of the {md.text(src['GPU'])} trace in a trace viewer"
    return (
        f"![{alt}]({page.link(f'{here}/{artifacts.VIEWER}')}){{ loading=lazy"
        f"{focus(data.get('viewer'))} }}\n\n<small>"
        f"{md.text(shot.get('band', 'One attention call').capitalize())} in the trace viewer "
        f"(where: {md.text(shot['where'])}), marked by the band on the diagnose track; selected "
        f"and boxed in red: {md.code(shot['select'][:80])}. Python's stack frames are left out "
        "of the picture.</small>"
    )
