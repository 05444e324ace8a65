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


def _attention(result: dict, console: Console) -> None:
    """The attention table, its share of the trace, and each row's ratio and kernels."""
    console.print(_attention_table(result["attention"]))
    if result["attention_share_of_device_time"] is not None:
        share = result["attention_share_of_device_time"]
        console.print(f"Attention takes {share:.1%} of the trace's summed device time.")
    for r in result["attention"]:
        if text := _ratio_text(r):
            console.print(f"  {shown(r['implementation'])} backward: {text}")
        for kernel in r["kernels"]:
            console.print(
                f"  {shown(r['implementation'])} {r['pass']}: {shown(kernel)}",
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
    """The report as the terminal shows it: a table of attention, then findings, gaps and lint."""
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
    _findings(result, console)
    _not_checked(result, console)
    for line in result.get("lint", []):
        console.print(f"Trace: {shown(line)}.")
