"""diagnose's result for a folder of ranks as the terminal shows it: a row per rank, the imbalance
and the straggler, then each finding with the ranks it was found on."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from attn.traces.common import intervals
from attn.traces.common.units import bytes_text, count_text, time_text
from attn.traces.diagnosis.report import shown
from attn.traces.read.trace import FORWARD_RANGE

HEADERS = ("rank", "attention", "compute", "communication", "waiting", "hidden", "sends")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _row(r: dict) -> list[str]:
    found = [a["implementation"] for a in r["diagnosis"]["attention"]]
    hidden = "–" if r["hidden_share"] is None else f"{r['hidden_share']:.0%}"
    sizes = " and ".join(bytes_text(b) for b in r["bytes_per_send"])
    return [
        str(r["rank"]),
        shown(", ".join(dict.fromkeys(found)) or "none found"),
        time_text(_median(r["compute_us_per_range"])),
        time_text(r["communication_us"]),
        time_text(r["recv_wait_us"]),
        hidden,
        count_text(r["sends_per_range"]) + (f" × {sizes}" if sizes else ""),
    ]


def _what_is_measured(rows: list[dict]) -> str:
    """What compute and communication are, for these ranks' ranges and device."""
    first = rows[0]
    where = "each attn_fwd" if first["range"] == FORWARD_RANGE else f"each {first['range']}"
    compute = (
        "the attention's, as the range is attn_fwd"
        if first["range"] == FORWARD_RANGE
        else "every op (on a GPU, every kernel) in it but communication's"
    )
    comm = "NCCL's kernels" if first["communication_from"] == "NCCL kernels" else "gloo's spans"
    return (
        f"Per range ({where}; compute is the median over ranges): compute is {compute}; "
        f"communication, while {comm} are under way; waiting, while a receive is and nothing "
        "computes; hidden, the share of communication during compute; sends, with their bytes."
    )


def _imbalance(result: dict) -> str:
    imb = result["imbalance"]
    if imb is None:
        return "Imbalance: cannot tell (fewer than two ranks, or no compute to compare)."
    ratio = intervals.ratio_text(imb["value"], imb["low"], imb["high"])
    return (
        f"Imbalance: the slowest rank computes {ratio} the mean of every rank (the median of "
        f"{imb['ranges']} ranges, each against the same range of the others, and their lowest "
        f"and highest). Straggler: rank {imb['straggler']}."
    )


def _findings(rows: list[dict], console: Console) -> None:
    """Each kind of finding once: its count over every rank, and which ranks."""
    found: dict[str, list] = {}
    for r in rows:
        for f in r["diagnosis"]["findings"]:
            entry = found.setdefault(f["kind"], [0, [], f["chapter"], f["advice"]])
            entry[0] += f["count"]
            entry[1].append(str(r["rank"]))
    if not found:
        return
    table = Table("finding", "count", "ranks", "chapter", "advice", title="Findings, every rank")
    for kind, (count, ranks, chapter, advice) in found.items():
        table.add_row(shown(kind), str(count), ", ".join(ranks), shown(chapter), shown(advice))
    console.print(table)


def report_ranks(result: dict, console: Console) -> None:
    """The ranks' table, what it measures, the imbalance and straggler, then the findings."""
    rows = result["ranks"]
    world = f" of a world of {result['world_size']}" if result.get("world_size") else ""
    table = Table(title=f"{len(rows)} ranks{world}: {shown(result['folder'])}")
    for header in HEADERS:
        table.add_column(header, overflow="fold", no_wrap=header not in ("attention", "sends"))
    for r in rows:
        table.add_row(*_row(r))
    console.print(table)
    console.print(shown(_what_is_measured(rows)))  # a step's name is the trace's: anything
    console.print(_imbalance(result))
    _findings(rows, console)
