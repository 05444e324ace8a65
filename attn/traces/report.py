"""diagnose's result as the terminal shows it: a table of attention, then findings, gaps and lint."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from attn.traces.terminal import shown
from attn.traces.trace import EPS_US
from attn.traces.units import count_text, time_text

HEADERS = ("implementation", "pass", "compiled", "where", "shapes", "calls", "kernels",
           "device time", "share")  # fmt: skip


def _time_cell(r: dict) -> str:
    """Time per call with its spread over the calls (times move with load; counts do not)."""
    if r["device_time_us_per_call"] is None:
        return "–"
    lo, hi = r["device_time_us_range"]
    spread = "" if hi - lo <= 0.05 * max(hi, EPS_US) else f" ({time_text(lo)}–{time_text(hi)})"
    return time_text(r["device_time_us_per_call"]) + spread


def _ratio_text(r: dict) -> str:
    ratio = r.get("backward_forward_ratio")
    if not ratio:
        return ""
    spread = f"{ratio['min']:.2f}–{ratio['max']:.2f}"
    return f"{ratio['median']:.2f}x the forward's {ratio['of']} ({spread})"


def _attention_table(rows: list[dict]) -> Table:
    table = Table(title="Attention", caption="kernels, device time and share: per call")
    for header in HEADERS:
        table.add_column(header, overflow="fold", no_wrap=header not in ("where", "shapes"))
    for r in rows:
        share = r["share_of_device_time"]
        table.add_row(
            shown(r["implementation"]),
            r["pass"],
            "yes" if r["compiled"] else "no",
            shown(r["where"]),
            shown(r["shapes"] or "–"),
            str(r["calls"]),
            "–" if r["kernels_per_call"] is None else count_text(r["kernels_per_call"]),
            _time_cell(r),
            "–" if share is None else f"{share:.1%}",
        )
    return table


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


def _attention(result: dict, console: Console) -> None:
    """The attention table, its share of the trace, and each row's ratio, work and kernels."""
    console.print(_attention_table(result["attention"]))
    if result["attention_share_of_device_time"] is not None:
        share = result["attention_share_of_device_time"]
        console.print(f"Attention takes {share:.1%} of the trace's summed device time.")
    for n, r in enumerate(result["attention"], 1):
        head = f"  {n}. {shown(r['implementation'])} {r['pass']}"
        for text in (_ratio_text(r), _work_text(r), _terms_text(r)):
            if text:
                console.print(f"{head}: {shown(text)}")
        for kernel in r["kernels"]:
            console.print(f"{head}: {shown(kernel)}", overflow="ellipsis", no_wrap=True)


def _unattributed(result: dict, console: Console) -> None:
    """The kernels no attention row explains, each over 1% of the device time."""
    found = result.get("unattributed")
    if found is None or not result["trace"]["device_activity"]:
        return
    if not found:
        console.print("Unattributed: no kernel outside the rows above takes 1% of device time.")
        return
    console.print("Unattributed: kernels outside the rows above, each over 1% of device time:")
    for u in found:
        by = shown(u["launched_by"] or "no launch recorded")
        console.print(
            f"  {u['share']:5.1%} {u['calls']:>5} x, under {by}: {shown(u['name'])}",
            overflow="ellipsis",
            no_wrap=True,
        )


def _findings(result: dict, console: Console) -> None:
    if result["findings"]:
        table = Table("finding", "count", "chapter", "advice", title="Findings")
        for f in result["findings"]:
            advice = f["advice"] + (f" ({f['detail']})" if f.get("detail") else "")
            table.add_row(shown(f["kind"]), str(f["count"]), shown(f["chapter"]), shown(advice))
        console.print(table)
    elif result["attention"]:
        console.print("Findings: none.")


def _not_checked(result: dict, console: Console) -> None:
    """One line per reason, however many findings it stops."""
    gaps: dict[str, list[str]] = {}
    for gap in result["not_checked"]:
        gaps.setdefault(gap["why"], []).append(gap["kind"])
    for why, kinds in gaps.items():
        console.print(f"[dim]{shown(', '.join(kinds))}: not checked, {shown(why)}[/dim]")


def report(result: dict, console: Console) -> None:
    """The report as the terminal shows it: a table of attention, what no row explains, then
    findings, gaps and lint."""
    if not result["attention"]:
        console.print("No attention found in this trace.")
    else:
        _attention(result, console)
    layout = result.get("layout_kernels") or {}
    if layout.get("kernels"):
        console.print(
            f"Layout work, not attention: {layout['kernels']} Inductor pointwise or reduction "
            f"kernel(s) named after attention ops, {time_text(layout['device_time_us'])} in all."
        )
    _unattributed(result, console)
    _findings(result, console)
    _not_checked(result, console)
    for line in result.get("lint", []):
        console.print(f"Trace: {shown(line)}.")
