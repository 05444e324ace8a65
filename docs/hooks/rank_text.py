"""What a tab says of a variant run on several ranks, for profiles.py: its ranks side by side, the
imbalance, their figure, and each rank's own table, timeline and trace (closed, one per rank).

It reads a checked summary across ranks (attn.traces.sets.rank_artifacts writes them); every value
shows as text or as a number.
"""

from __future__ import annotations

from collections.abc import Callable

from profile_text import trace_buttons

from attn.traces.claims.figure_tables import table_head, table_row
from attn.traces.common import artifacts, intervals
from attn.traces.common.units import bytes_text, count_text, time_text

HEAD = ["rank", "blocks", "compute", "communication", "waiting", "sends"]


def _small(main: str, under: str | None) -> str:
    """A cell's value, and what qualifies it small beneath (as the site's timed cells do)."""
    return f"{main}<br><small>{under}</small>" if under else main


def rank_row(r: dict) -> str:
    """One rank: its blocks, its compute (median over forwards), and per forward its
    communication (the share hidden under compute beneath), its wait on receives, its sends (the
    bytes of each beneath)."""
    compute = sorted(r["compute_us_per_range"])[len(r["compute_us_per_range"]) // 2]
    hidden = r.get("hidden_share")
    hidden = None if hidden is None else f"{hidden:.0%} hidden"
    sizes = " and ".join(bytes_text(b) for b in r.get("bytes_per_send") or [])
    blocks = None if r.get("blocks") is None else count_text(r["blocks"])
    return table_row([
        f"rank {int(r['rank'])}", blocks, time_text(compute, digits=1),
        _small(time_text(r["communication_us"], digits=1), hidden),
        time_text(r["recv_wait_us"], digits=1),
        _small(count_text(r["sends_per_range"]), f"{sizes} each" if sizes else None),
    ])  # fmt: skip


def imbalance_line(summary: dict) -> str | None:
    """The slowest rank's compute over the mean, with its interval, and which rank that is."""
    imb = summary.get("imbalance")
    if not imb:
        return None
    ratio = intervals.ratio_text(imb["value"], imb["low"], imb["high"])
    return (
        f"**Imbalance:** the slowest rank, rank {int(imb['straggler'])}, computes {ratio} the mean "
        f"of every rank: the median of {int(imb['ranges'])} forwards, and their lowest and "
        "highest, each rank's compute in one forward against the others' in the same forward."
    )


Files = tuple[set[str], Callable[[str], str], Callable[[str], str]]  # listed, url of one, its text


def ranks_text(summary: dict, files: Files, where: str) -> list[str]:
    """The ranks' table, the imbalance, the figure, then each rank's own files, closed."""
    listed, url, _ = files
    ranks = summary["ranks"]
    text = [
        f"**Per rank, per forward** ({len(ranks)} ranks): the blocks it computed, its compute (the "
        "median over forwards), how long communication was under way (and the share of it hidden "
        "under compute), how long it waited on a receive with nothing to compute, its sends (and "
        "the bytes of each).",
        "\n".join([*table_head(HEAD), *map(rank_row, ranks)]),
    ]
    text += [line] if (line := imbalance_line(summary)) else []
    if artifacts.RANKS_FIGURE in listed:
        alt = f"One forward of every rank of {where}, on one time axis"
        text.append(f"![{alt}]({url(artifacts.RANKS_FIGURE)}){{ loading=lazy }}")
    return text + [rank_details(r["rank"], files, where) for r in ranks]


def rank_details(rank: int, files: Files, where: str) -> str:
    """One rank's table, timeline, trace buttons and downloads, in a closed block."""
    files, url, read = files
    mine = lambda f: f"rank{int(rank)}/{f}"  # noqa: E731
    body = []
    if mine(artifacts.TABLE_MD) in files:
        body.append(read(mine(artifacts.TABLE_MD)).strip())
    if mine(artifacts.TIMELINE) in files:
        body.append(
            f"![One forward of rank {rank} of {where}]({url(mine(artifacts.TIMELINE))}){{ loading=lazy }}"
        )
    if mine(artifacts.TRACE) in files:
        body.append(trace_buttons(url(mine(artifacts.TRACE)), f"{where}, rank {rank}", "attn_fwd"))
        links = [
            f"[{f}]({url(mine(f))})"
            for f in (artifacts.TRACE, artifacts.TABLE_TXT)
            if mine(f) in files
        ]
        body.append("Download: " + " · ".join(links))
    inner = "\n\n".join(body).replace("\n", "\n    ")
    return f'??? abstract "Rank {int(rank)}: its table, its timeline and its trace"\n\n    {inner}'
