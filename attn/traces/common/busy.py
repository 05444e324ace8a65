"""How busy the machine was while a set was made, in words, from the load its stamps hold
(environment.json's and timing.json's `load`, measured by attn.profiling.machine_load): one
wording for the terminal that warns as a run starts and for the page that shows the set."""

from __future__ import annotations


def how_busy(loads: list) -> str | None:
    """What the busy ones of `loads` say, or None where none says busy: other work's largest share
    of the CPU time ('other work used 30% of its 2 cores'), else, for a stamp older than that share,
    the highest load average ('a load average of 9.00 on 2 cores')."""
    busy = [x for x in loads if isinstance(x, dict) and x.get("busy")]
    if not busy:
        return None
    cores = busy[0].get("cpu_count")
    shares = [x["others_share"] for x in busy if isinstance(x.get("others_share"), (int, float))]
    if shares:
        return f"other work used {max(shares):.0%} of its {cores} cores"
    most = max(
        max((x.get("load_avg_before") or [0])[0], (x.get("load_avg_after") or [0])[0]) for x in busy
    )
    return f"a load average of {most:.2f} on {cores} cores"
