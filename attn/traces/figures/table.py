"""The table computed from a trace's ranges (table.md): the profiler's own, from the trace alone."""

from __future__ import annotations

from attn.traces.common.markdown import code
from attn.traces.common.units import time_text
from attn.traces.read.trace import DEVICE_CATEGORIES, EPS_US, RUNTIME_CATEGORIES, Forward

ROWS = 15


def _time(us: float) -> str:
    return time_text(us, 3)


def aggregate(fwds: list[Forward]) -> list[dict]:
    """One row per op or device event name: calls, CPU total and self time, device time; per range.

    An op's device time is that of the device work launched while it ran (its children's included),
    as key_averages() counts it.
    """
    rows: dict[tuple[str, str], dict] = {}

    def row(name: str, kind: str) -> dict:
        return rows.setdefault(
            (name, kind),
            {"name": name, "kind": kind, "calls": 0, "cpu": 0.0, "self_cpu": 0.0, "device": 0.0},
        )

    for f in fwds:  # read from the trace's columns: a range of a million events stays quick
        t, device, cpu = f.trace, f.device_rows.tolist(), f.cpu_rows.tolist()
        device_of_call: dict[int, float] = {}
        for c, d in zip(t.correlation[device].tolist(), t.dur[device].tolist(), strict=True):
            device_of_call[c] = device_of_call.get(c, 0.0) + d
        stack: list[tuple] = []  # (start, end, row) of the ops that enclose the current event
        columns = (t.ts[cpu], t.end[cpu], t.dur[cpu], t.correlation[cpu])
        for i, start, end, dur, corr in zip(cpu, *(c.tolist() for c in columns), strict=True):
            while stack and not (stack[-1][0] - EPS_US <= start and end <= stack[-1][1] + EPS_US):
                stack.pop()
            if stack:  # time spent in a child is not its direct parent's self time
                stack[-1][2]["self_cpu"] -= dur
            if t.cat[i] in RUNTIME_CATEGORIES and corr >= 0:
                for *_, r in stack:  # device work counts for every op that encloses its launch
                    r["device"] += device_of_call.get(corr, 0.0)
            if t.cat[i] == "cpu_op":
                r = row(t.name[i], "op")
                r["calls"] += 1
                r["cpu"] += dur
                r["self_cpu"] += dur
                stack.append((start, end, r))
            else:
                stack.append((start, end, {"self_cpu": 0.0, "device": 0.0}))
        for i, dur in zip(device, t.dur[device].tolist(), strict=True):
            r = row(t.name[i], t.cat[i])
            r["calls"] += 1
            r["device"] += dur
    n = max(len(fwds), 1)
    for r in rows.values():
        for key in ("calls", "cpu", "self_cpu", "device"):
            r[key] /= n
    return list(rows.values())


def markdown_table(fwds: list[Forward], on_device: bool, rows: int = ROWS) -> str:
    """The top rows per range as Markdown: by device time where there is a device, else CPU time."""
    found = aggregate(fwds)
    key = "device" if on_device else "cpu"
    found.sort(key=lambda r: (r[key], r["cpu"]), reverse=True)
    header = ["Name", "Calls", "CPU total", "Self CPU"] + (["Device"] if on_device else [])
    lines = [
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
    ]
    for r in found[:rows]:
        name = code(r["name"]).replace("|", "\\|")  # whatever the name holds, it shows as text
        if r["kind"] in DEVICE_CATEGORIES:
            cells = [f"{name} <small>({r['kind']})</small>", f"{r['calls']:g}", "–", "–"]
        else:
            cells = [name, f"{r['calls']:g}", _time(r["cpu"]), _time(r["self_cpu"])]
        if on_device:
            cells.append(_time(r["device"]) if r["device"] else "–")
        lines.append("| " + " | ".join(cells) + " |")
    per = f"per {code(fwds[0].range.name)} range" if fwds else "per range"
    return "\n".join(lines) + f"\n\n<small>Mean {per}, computed from the trace.</small>\n"
