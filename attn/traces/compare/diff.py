"""What changed between two runs: ops, kernels, memcpys and memsets per forward, and peak memory.

python -m attn.traces.compare A B [--fail-on RULES] [--json OUT] [--range NAME] [--all]

A and B are variant folders (`profiles/cpu/naive`, holding trace.json.gz and summary.json), any
two trace files (`.json` or `.json.gz`), or two sets of variant folders (attn.traces.compare.gate, which
also says what --fail-on fails on). Each name the trace runs is a row: its calls and time per
forward on each side, and whether it is new, gone, run more or fewer times per forward, or the
same (the JSON keeps its words: added, removed, changed, same). Times are shown beside the calls but never decide the change: two runs never take the
same time, while a change in calls is a change in what ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from attn.traces.common import artifacts, jsonfile
from attn.traces.common.atomic import write_json
from attn.traces.common.markdown import code, text
from attn.traces.common.terminal import wide_console
from attn.traces.common.units import count_text, time_text
from attn.traces.figures.table import aggregate
from attn.traces.read import patterns
from attn.traces.read.range_counts import per_forward
from attn.traces.read.trace import KERNEL, MEMCPY, MEMSET, TraceFormatError, read_trace

KINDS = {"op": "op", KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
KIND_ORDER = {"memcpy": 0, "memset": 1, "kernel": 2, "op": 3}
CHANGE_ORDER = {"removed": 0, "added": 1, "changed": 2, "same": 3}
CHANGE_WORDS = {"removed": "gone", "added": "new", "same": "same"}  # "changed": more or fewer
TOTALS = (
    "forwards", "cpu_time_us", "device_time_us", "ops_per_forward", "kernels_per_forward",
    "memcpy_per_forward", "memset_per_forward", "peak_memory_bytes",
)  # fmt: skip
COUNTS = ("forwards", "ops_per_forward", "kernels_per_forward", "memcpy_per_forward",
          "memset_per_forward")  # fmt: skip
CALLS_EPS = 1e-9  # calls per forward are means over ranges: floats


def _summary(path: Path) -> dict:
    """A variant's summary; TraceFormatError naming the file when it is not one."""
    try:  # nesting and numbers checked: one line, never a RecursionError
        summary = jsonfile.load(path)
    except jsonfile.BadJson as e:
        raise TraceFormatError(str(e)) from e
    counts = int | float | dict | type(None)  # memcpy is counted by direction
    if not isinstance(summary, dict) or any(not isinstance(summary.get(k), counts) for k in TOTALS):
        raise TraceFormatError(f"{path}: not a summary (rerun the profile, or diff the traces)")
    if summary.get("schema", 1) not in range(1, artifacts.SUMMARY_SCHEMA + 1):  # absent: the first
        raise TraceFormatError(
            f"{path}: schema {summary['schema']!r}, which this version does not read "
            f"(it reads 1 to {artifacts.SUMMARY_SCHEMA}): update attention-profiled"
        )
    return summary


def _side(path: Path, range_name: str | None) -> tuple[dict, list]:
    """(what to show of it, its forwards) for a variant folder or a trace file."""
    path = Path(path)
    summary = None
    if path.is_dir():
        trace_path = path / artifacts.TRACE
        if not trace_path.is_file():
            raise TraceFormatError(f"{path}: no {artifacts.TRACE} (not a variant folder)")
        if (path / artifacts.SUMMARY).is_file():
            summary = _summary(path / artifacts.SUMMARY)
        label = path.name
    else:
        trace_path, label = path, path.name.split(".")[0]
    trace = read_trace(trace_path)
    wanted = range_name or (summary or {}).get("range")
    if not isinstance(wanted, (str, type(None))):
        raise TraceFormatError(
            f"{path / artifacts.SUMMARY}: range is {wanted!r}, not a range's name"
        )
    fwds = trace.forwards(wanted)
    if not fwds:
        raise TraceFormatError(
            f"{path}: the trace holds no {wanted or 'attn_fwd'} range: name the range to compare "
            "with --range NAME (a record_function's name, or an op's: --range aten::baddbmm)"
        )
    measured = per_forward(trace, wanted)
    # Counts come from the trace, as the rows do (an edited summary said 45 -> 1 beside rows the
    # same); a summary's times and peak win, as what the chapter shows (the trace's own are kept
    # for a bare trace).
    totals = {
        key: measured.get(key)
        if key in COUNTS
        else (summary or measured).get(key, measured.get(key))
        for key in TOTALS
    }
    info = {
        "label": (summary or {}).get("variant") or label,
        "source": path.name,
        "hardware": (summary or {}).get("hardware"),
        "device_type": (summary or {}).get("device_type")
        or ("cpu" if measured["kernels_per_forward"] is None else "cuda"),
        "shape": (summary or {}).get("shape"),
        "dtype": (summary or {}).get("dtype"),
        "range": measured["range"],
        **totals,
    }
    return info, fwds


def _by_name(fwds: list) -> dict[tuple[str, str], dict]:
    """{(name, kind): {calls, time_us}} per forward: CPU time for ops, device time for the rest."""
    found = {}
    for r in aggregate(fwds):
        kind = KINDS.get(r["kind"])
        if kind is None:
            continue
        time = r["cpu"] if kind == "op" else r["device"]
        found[(r["name"], kind)] = {"calls": r["calls"], "time_us": time}
    return found


def _change(calls_a: float, calls_b: float) -> str:
    if calls_a <= CALLS_EPS:
        return "added"
    if calls_b <= CALLS_EPS:
        return "removed"
    return "same" if abs(calls_a - calls_b) <= CALLS_EPS else "changed"


def changed_word(r: dict) -> str:
    """A row's change as a reader says it: new, gone, more, fewer or same."""
    if r["change"] != "changed":  # a word of a diff written elsewhere is shown as it is
        return CHANGE_WORDS.get(r["change"], str(r["change"]))
    return "more" if r["calls_b"] > r["calls_a"] else "fewer"


def compare(a: dict, b: dict) -> list[dict]:
    """Rows for every (name, kind) on either side, removed first, then added, changed, same."""
    rows = []
    for name, kind in dict.fromkeys([*a, *b]):
        left = a.get((name, kind), {"calls": 0.0, "time_us": 0.0})
        right = b.get((name, kind), {"calls": 0.0, "time_us": 0.0})
        rows.append({
            "name": name, "kind": kind,
            "calls_a": round(left["calls"], 3), "calls_b": round(right["calls"], 3),
            "time_us_a": round(left["time_us"], 3), "time_us_b": round(right["time_us"], 3),
            "change": _change(left["calls"], right["calls"]),
        })  # fmt: skip
    order = lambda r: (  # noqa: E731
        CHANGE_ORDER[r["change"]], KIND_ORDER[r["kind"]], -max(r["time_us_a"], r["time_us_b"]), r["name"]
    )  # fmt: skip
    return sorted(rows, key=order)


def _bytes(n: float) -> tuple[float, str]:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return n / scale, unit
    return n, "B"


def _peak_pair(a: float | None, b: float | None) -> str:
    """`132.0 -> 132.0 MiB` in one unit when both sides share it, else `256.0 MiB -> 37.0 KiB`."""
    if a is None or b is None:
        show = lambda x: "–" if x is None else "{:.1f} {}".format(*_bytes(x))  # noqa: E731
        return f"{show(a)} -> {show(b)}"
    (va, ua), (vb, ub) = _bytes(a), _bytes(b)
    if ua == ub:
        return f"{va:.1f} -> {vb:.1f} {ua}"
    return f"{va:.1f} {ua} -> {vb:.1f} {ub}"


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


# What the headline names first: device work, then what moves data, then other ops; views and
# empty allocations (bookkeeping that comes and goes with everything else) last. Time only breaks
# ties, so the headline does not change from run to run.
MOVES_DATA = re.compile(patterns.MOVES_DATA)


def name_rank(name: str) -> int:
    """0 for what moves data, 1 for other ops and kernels, 2 for bookkeeping."""
    if MOVES_DATA.search(name):
        return 0
    return 2 if name in patterns.BOOKKEEPING_OPS else 1


def headline(data: dict, most: int = 4) -> str:
    """One line: what is gone and what is new (copies first, views last), and peak memory."""
    gone, new = [], []  # (time it accounts for, words)
    for r in data["rows"]:
        delta = r["calls_b"] - r["calls_a"]
        if r["change"] == "same":
            continue
        words = (
            _short(r["name"])
            if r["change"] != "changed"
            else f"{count_text(abs(delta))} {_short(r['name'])}"
        )
        order = (KIND_ORDER[r["kind"]], name_rank(r["name"]))
        if delta < 0:
            gone.append((order, r["time_us_a"] - r["time_us_b"], words))
        else:
            new.append((order, r["time_us_b"] - r["time_us_a"], words))

    def listed(items: list[tuple[tuple, float, str]], verb: str) -> str | None:
        if not items:
            return None
        shown = [w for _, _, w in sorted(items, key=lambda item: (item[0], -item[1], item[2]))]
        shown = shown[:most]
        more = len(items) - len(shown)
        words = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
        return f"{words}{f' (and {more} more)' if more else ''} {verb}"

    parts = [listed(gone, "gone"), listed(new, "new")]
    parts = [p for p in parts if p] or ["the same ops and kernels per forward"]
    peak_a, peak_b = data["a"].get("peak_memory_bytes"), data["b"].get("peak_memory_bytes")
    if peak_a is not None or peak_b is not None:
        parts.append(f"peak memory {_peak_pair(peak_a, peak_b)}")
    return "; ".join(parts)


def diff(folder_a: Path | str, folder_b: Path | str, range_name: str | None = None) -> dict:
    """Compare two runs (variant folders or trace files): {a, b, notes, rows, headline}."""
    info_a, fwds_a = _side(Path(folder_a), range_name)
    info_b, fwds_b = _side(Path(folder_b), range_name)
    notes = []
    if info_a["hardware"] and info_b["hardware"] and info_a["hardware"] != info_b["hardware"]:
        notes.append(f"different hardware: {info_a['hardware']} and {info_b['hardware']}")
    if info_a["device_type"] != info_b["device_type"]:
        notes.append(f"different devices: {info_a['device_type']} and {info_b['device_type']}")
    for key in ("shape", "dtype"):
        if info_a[key] and info_b[key] and info_a[key] != info_b[key]:
            notes.append(f"different {key}: {info_a[key]} and {info_b[key]}")
    rows = compare(_by_name(fwds_a), _by_name(fwds_b))
    data = {"a": info_a, "b": info_b, "notes": notes, "rows": rows}
    data["headline"] = headline(data)
    return data


def diff_name(a: str, b: str) -> str:
    return f"{a}__{b}.json"


def diffs_of(hardware_folder: Path, pairs: Sequence[tuple[str, str]]) -> list[tuple[Path, dict]]:
    """(where, the diff with its Markdown) for each pair (the specs name them) whose sides both ran."""
    folder = Path(hardware_folder)
    found = []
    for a, b in pairs:
        if artifacts.ran(folder / a) and artifacts.ran(folder / b):
            data = diff(folder / a, folder / b)
            data["markdown"] = render_diff(data)  # so the docs hook shows it without measuring code
            found.append((folder / artifacts.DIFF_DIR / diff_name(a, b), data))
    return found


def write_diffs(hardware_folder: Path, pairs: Sequence[tuple[str, str]]) -> list[Path]:
    """Write `<hardware>/diff/<a>__<b>.json` for each pair whose sides both ran there.

    A pair's earlier diff is removed when a side no longer ran, so no stale diff is shown.
    """
    written = dict(diffs_of(hardware_folder, pairs))
    for a, b in pairs:
        out = Path(hardware_folder) / artifacts.DIFF_DIR / diff_name(a, b)
        if out in written:
            write_json(out, written[out])
        else:
            out.unlink(missing_ok=True)
    return list(written)


# --- Markdown, for the docs hook -----------------------------------------------------------------


def _time(us: float) -> str:
    return time_text(us, 3) if us else "–"


def _cell_name(name: str) -> str:
    return code(_short(name, 70)).replace("|", "\\|")


def render_diff(data: dict, everything: bool = False) -> str:
    """Markdown: the headline, then a table of the rows that changed (every row if `everything`).
    What came from a trace or a summary (labels, names, notes) shows as text."""
    a, b = text(data["a"]["label"]), text(data["b"]["label"])
    lines = [f"**{a} → {b}:** {text(data['headline'])}."]
    lines += [f"<small>Note: {text(n)}.</small>" for n in data.get("notes", [])]
    rows = [r for r in data["rows"] if everything or r["change"] != "same"]
    if rows:
        lines += [
            "",
            "| Name | Kind | Calls per forward | Time per forward | Change |",
            "|---|---|--:|--:|---|",
        ]
        for r in rows:
            calls = f"{count_text(r['calls_a'])} → {count_text(r['calls_b'])}"
            times = f"{_time(r['time_us_a'])} → {_time(r['time_us_b'])}"
            lines.append(
                f"| {_cell_name(r['name'])} | {text(r['kind'])} | {calls} | {times} "
                f"| {text(changed_word(r))} |"
            )
    same = sum(r["change"] == "same" for r in data["rows"])
    if same and not everything:
        lines += [
            "",
            f"<small>{same} more names ran the same number of times on both sides.</small>",
        ]
    lines += ["", f"<small>{_totals_line(data)}</small>"]
    return "\n".join(lines) + "\n"


def _peak_totals(a: dict, b: dict) -> str | None:
    peak_a, peak_b = a.get("peak_memory_bytes"), b.get("peak_memory_bytes")
    if peak_a is None and peak_b is None:
        return None
    return _peak_pair(peak_a, peak_b).replace("->", "→")


def _totals_line(data: dict) -> str:
    a, b = data["a"], data["b"]

    def pair(key: str, fmt) -> str | None:
        if a.get(key) is None and b.get(key) is None:
            return None
        show = lambda x: "–" if x is None else fmt(x)  # noqa: E731
        return f"{show(a.get(key))} → {show(b.get(key))}"

    parts = [
        ("ATen ops", pair("ops_per_forward", count_text)),
        ("kernels", pair("kernels_per_forward", count_text)),
        ("CPU time", pair("cpu_time_us", _time)),
        ("device time", pair("device_time_us", _time)),
        ("peak memory", _peak_totals(a, b)),
    ]
    shown = ", ".join(f"{name} {value}" for name, value in parts if value)
    return (
        f"Per forward (mean of the recorded ranges): {shown}. An op's time includes the ops it "
        "calls; a kernel's, memcpy's or memset's is its device time."
    )


# --- command line --------------------------------------------------------------------------------


def print_diff(data: dict, everything: bool = False) -> None:
    """The Markdown the site shows, rendered for the terminal (its tables as rich tables), on the
    one console every command prints to (160 columns into a pipe)."""
    from rich.markdown import Markdown

    wide_console(stderr=False).print(Markdown(render_diff(data, everything)))
