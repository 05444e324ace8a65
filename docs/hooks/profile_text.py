"""What a page says about one profile set, for profiles.py's renderers: its environment, what ran,
the per-forward numbers, and the tables that put variants side by side (compare, speedup, glance).

They read checked sets (the dicts of profile_sets.py) and their summaries, and return Markdown (a
tab's text is None where the set has nothing to show); every name read from a set goes through
attn.traces.common.markdown.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from typing import NamedTuple

from attn import specs
from attn.traces.claims import step_checks
from attn.traces.claims.figure_tables import (
    overhead_table,
    profiled_cell,
    ratio_cell,
    table_head,
    table_row,
    timed_cell,
)
from attn.traces.common import artifacts, intervals
from attn.traces.common import markdown as md
from attn.traces.common.busy import how_busy
from attn.traces.common.units import bytes_text, count_text, time_text
from attn.traces.figures.svg import text_width
from attn.traces.figures.timeline import short_name
from attn.traces.read.backward import as_forward

VERDICT = {True: ("✓", "holds"), False: ("✗", "does not hold"), None: ("?", "cannot tell")}
DEVICE_WORDS = {"cuda": "On a GPU", "cpu": "On CPU"}  # in the order the sets are shown


def _fmt(text, value) -> str | None:
    return None if value is None else text(value)


COLUMNS = {  # per-forward number -> how to read it from a summary (None: not measured)
    "CPU time (profiled)": lambda s: _fmt(time_text, s.get("cpu_time_us")),
    "device time (profiled)": lambda s: _fmt(time_text, s.get("device_time_us")),
    "ATen ops": lambda s: _fmt(count_text, s.get("ops_per_forward")),
    "kernels": lambda s: _fmt(count_text, s.get("kernels_per_forward")),
    "peak memory": lambda s: _fmt(bytes_text, s.get("peak_memory_bytes") or None),
}


def _spread(key: str) -> Callable[[dict], str | None]:
    """A profiled time with the range of its steps: '11.04 ms (9.45 ms–14.02 ms)'."""
    return lambda s: _fmt(intervals.profiled_text, intervals.profiled(s, key))


STEP_COLUMNS = COLUMNS | {  # a training step's forward and backward: few steps, their range shown
    "CPU time (profiled)": _spread("cpu_time_us"),
    "device time (profiled)": _spread("device_time_us"),
}


# --- times ----------------------------------------------------------------------------------------


def timed(hw: dict, name: str) -> dict | None:
    """The variant's row of the set's timing pass, if the set has one that timed it."""
    return ((hw.get("timing") or {}).get("variants") or {}).get(name)


def timed_text(t: dict | None) -> str | None:
    """A timed row as '98.15 ms (95.21 ms–101.30 ms)': the median and its interquartile range."""
    if t is None:
        return None
    return f"{time_text(t['median_us'])} ({time_text(t['low_us'])}–{time_text(t['high_us'])})"


def speedup_text(base: dict | None, t: dict | None) -> str | None:
    """base's median ÷ t's, with the interval their interquartile ranges allow; 'cannot tell'
    where that interval holds 1 (neither is faster for sure)."""
    if base is None or t is None:
        return None
    value, low, high = intervals.ratio(base, t)
    return ratio_cell(value, low, high, intervals.above(low, high))


# --- lines about a set ----------------------------------------------------------------------------


def busy_line(hw: dict) -> str | None:
    """One line when the set was made on a busy machine: other work's share of its CPU time (a
    load average above its core count, where a set predates that count)."""
    what = how_busy([hw["env"].get("load"), (hw.get("timing") or {}).get("load")])
    if what is None:
        return None
    return (
        f"**Busy machine:** {what} while this set was made; its times are slower and wider than "
        "on an idle machine."
    )


def environment_line(hw: dict) -> str:
    """Device, torch (and CUDA) version, date and commit of a hardware set, on one line."""
    env = {k: v for k, v in hw["env"].items() if v is not None and v != ""}
    parts = [md.text(env.get("device_name") or hw["title"])]
    if hw["device_type"] == "cpu" and "cpu_model" in env:
        threads = f", {env['threads']} threads" if env.get("threads") else ""
        parts[0] = f"CPU: {md.text(env['cpu_model'])}{threads}"
    parts.append(f"torch {md.text(env.get('torch_version', '?'))}")
    parts += [f"CUDA {md.text(env['cuda_version'])}"] if "cuda_version" in env else []
    parts += [f"cuDNN {md.text(env['cudnn_version'])}"] if env.get("cudnn_version") else []
    parts += [f"profiled {md.text(env['date'])}"] if "date" in env else []
    parts += [f"commit {md.code(env['git_commit'])}"] if "git_commit" in env else []
    line = " · ".join(parts)
    return f"{line}  \n{busy}" if (busy := busy_line(hw)) else line


def setup_line(summary: dict) -> str:
    """What was run: dtype, shape and masking."""
    s = summary.get("shape", {})
    shape = (
        f"batch {s.get('batch')}, heads {s.get('heads')}, "
        f"seq {s.get('seq_q')} (q) × {s.get('seq_k')} (k/v), head_dim {s.get('head_dim')}"
    )
    causal = "causal" if summary.get("is_causal") else "not causal"
    return f"{md.code(summary.get('dtype', '?'))} · {shape} · {causal}"


def run_line(summary: dict) -> str:
    """What was run, and the per-forward numbers (memcpys and memsets apart from kernels)."""
    columns = STEP_COLUMNS if summary.get("backward") else COLUMNS
    parts = [f"{v} {label}" for label, read in columns.items() if (v := read(summary)) is not None]
    memcpy = summary.get("memcpy_per_forward")
    if memcpy is not None:
        copies = ", ".join(f"{count_text(n)} {md.text(d)}" for d, n in memcpy.items() if n) or "0"
        memset = _fmt(count_text, summary.get("memset_per_forward")) or "–"
        parts += [f"{copies} memcpy", f"{memset} memset"]
    text = setup_line(summary) + (f"  \n**Per forward:** {' · '.join(parts)}" if parts else "")
    if backward := summary.get("backward"):  # a training step's
        text += f"  \n**Per backward:** {backward_numbers(backward)}"
    return text


def backward_numbers(backward: dict) -> str:
    """A training step's backward: the forward's numbers, then what it kept and its step's peak."""
    b = as_forward(backward)
    parts = [f"{v} {label}" for label, read in STEP_COLUMNS.items() if (v := read(b)) is not None]
    kept = {
        "saved for it": "saved_for_backward_bytes",
        "peak of the step": "peak_memory_step_bytes",
    }
    parts += [f"{bytes_text(backward[k])} {label}" for label, k in kept.items() if backward.get(k)]
    return " · ".join(parts)


# --- a variant on a set -------------------------------------------------------------------------

DOWNLOADS = {artifacts.TRACE: "", artifacts.TABLE_TXT: " (the profiler's own table)"}


def unavailable_note(hw: dict, summary: dict) -> str:
    """Why the variant did not run on the set, as torch said it: one sentence."""
    reason = (summary.get("reason") or "No reason was recorded.").strip()
    reason = reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")
    return f'!!! note "Not available on {md.label(hw["title"])}"\n\n    {md.prose(reason)}'


def mark(left: float, right: float) -> str:
    """The image attribute that scrolls a phone to a part of a picture (narrow-screens.js): its
    left and right edges as fractions of the picture's width."""
    return f' data-mark="{left:.3f} {right:.3f}"'


def focus(viewer: dict | None) -> str:
    """The mark of the event a screenshot boxes in red, if it boxes one."""
    box = (viewer or {}).get("mark")
    return mark(box["left"], box["right"]) if box else ""


def timeline_mark(svg: bytes, name: str | None) -> str:
    """The mark of the event a timeline labels for its chapter (the one its screenshot selects),
    found by its label: the name, its short form, or the short form cut to fit ('masked…')."""
    if not name:
        return ""
    root = ElementTree.fromstring(svg)  # a set's SVG is checked (set_svg.py) before it is shown
    short = short_name(name)
    try:
        width = float((root.get("viewBox") or "").replace(",", " ").split()[2])
        for text in root.iter("{http://www.w3.org/2000/svg}text"):
            label = (text.text or "").strip()
            cut = label.endswith("…") and len(label) > 1 and short.startswith(label[:-1])
            if label in (name, short) or cut:
                x, half = float(text.get("x", "")), text_width(label) / 2
                return mark(max(0.0, (x - half) / width), min(1.0, (x + half) / width))
    except (IndexError, ValueError, ZeroDivisionError):  # no viewBox, or a label with no place
        pass
    return ""


def viewer_image(summary: dict, where: str, shown: str, src: str) -> str:
    """The trace viewer's screenshot of one range, the event it selects named in its alt text."""
    selected = (summary.get("viewer") or {}).get("selected")
    alt = f"The trace of {md.text(where)} in a trace viewer, one {shown}" + (
        f", {md.text(selected)} selected and boxed in red" if selected else ""
    )
    return f"![{alt}]({src}){{ loading=lazy{focus(summary.get('viewer'))} }}"


def trace_buttons(src: str, where: str, shown: str) -> str:
    """The buttons that open the trace in Perfetto and in the site's own viewer, at that range."""
    return (
        f"[Open in Perfetto]({src}){{ .md-button data-perfetto-trace "
        f'data-perfetto-title="{md.attribute(where)}" }} [Open here]({src}){{ .md-button '
        f'data-trace-viewer data-trace-range="{shown}" }}'
    )


def kernel_list(kernels: list[str], more: int) -> str:
    """The kernels' names, closed: `more` is how many the summary left out."""
    items = "\n".join(f"    - {md.code(k)}" for k in kernels)
    count = f"the first {len(kernels)} of {len(kernels) + more}" if more else len(kernels)
    return f'??? info "Kernel names ({count})"\n\n{items}'


def downloads(files: set[str], url: Callable[[str], str]) -> list[str]:
    """The line of files to download, if the variant has any."""
    links = [f"[{f}]({url(f)}){why}" for f, why in DOWNLOADS.items() if f in files]
    return ["Download: " + " · ".join(links)] if links else []


# --- claims ---------------------------------------------------------------------------------------


def claims_of(name: str, hw: dict) -> list[dict]:
    """The claims as evaluated on a set ([] when the variant did not run there)."""
    summary = hw["summaries"].get(name) or {}
    return (summary.get("claims") or []) if summary.get("available") else []


def claim_list(claims: list[dict]) -> str:
    """A set's checked claims, one line each: the verdict, the sentence, what was observed."""
    return "\n".join(
        f"- {VERDICT[c.get('holds')][0]} **{VERDICT[c.get('holds')][1]}:** {md.prose(c['text'])} "
        f"<small>Observed: {md.prose(c.get('observed') or '–')}</small>"
        for c in claims
    )


def on_hardware(device_type: str, text: str) -> str:
    """The sentence with the hardware it is about in front, unless it already starts with it."""
    words = DEVICE_WORDS[device_type]
    return md.prose(text) if text.startswith(words) else f"{words}: {md.prose(text)}"


def unchecked_note(name: str, profiled: set[str]) -> str:
    """A note listing the variant's claims about hardware that no set here has run, or ""."""
    waiting = [
        f"- {on_hardware(c.device_type, c.text)}"
        for device_type in DEVICE_WORDS
        if device_type not in profiled
        for c in specs.spec(name).trace_claims
        if c.device_type == device_type
    ]
    if not waiting:
        return ""
    return (
        f'\n!!! note "Not checked yet: {name}"\n\n    No profile set here has run these; each '
        "run on such hardware checks them:\n\n" + textwrap.indent("\n".join(waiting), "    ")
    )


def claim_box(name: str, claim, verdicts: list[tuple], waiting: str) -> str:
    """One claim as an admonition: success where every set holds it, warning where one does not,
    a note with `waiting` where none checked it; per set, its verdict and what it observed."""
    kinds = {holds for holds, _, _ in verdicts}
    kind = "note" if not verdicts else "success" if kinds == {True} else "warning"
    lines = [
        f"{VERDICT[holds][0]} **{VERDICT[holds][1]}** on {md.text(title)} "
        f"(observed: {md.prose(seen or '–')})"
        for holds, seen, title in verdicts
    ] or [waiting]
    # A sentence several variants share (each compiled variant's first call) says whose it is.
    shared = sum(any(c.text == claim.text for c in spec.claims) for spec in specs.SPECS) > 1
    title = md.prose(f"{name}: {claim.text}" if shared else claim.text).replace('"', "'")
    return f'!!! {kind} "{title}"\n\n    ' + "  \n    ".join(lines) + "\n"


# --- first calls of compiled variants -------------------------------------------------------------


def first_call_cell(seconds: float, summary: dict) -> str:
    """A first call as '23.10 s = 705 forwards' (forwards of the variant's own profile)."""
    forward = summary["cpu_time_us"]
    return f"{seconds:.2f} s" + (f" = {seconds * 1e6 / forward:,.0f} forwards" if forward else "")


def first_calls_tab(hw: dict, names: tuple[str, ...]) -> str | None:
    """The variants' first calls on one set, one run each: the run's cold start (empty compile
    caches) and its warm rerun, and each later variant's first call on the caches the compiles
    before it left (sets made before then: cold beside warm per variant, or no cold run at all)."""
    timed = [
        (n, s)
        for n in names
        if (s := hw["summaries"].get(n)) and s["available"] and s.get("first_calls_seconds")
    ]
    if not timed:
        return None
    lines = [f"<small>{environment_line(hw)}</small>"]
    if not any(s.get("cold_first_calls_seconds") or s.get("first_calls_after") for _, s in timed):
        lines.append(
            "Cold first call: not measured in this set, which predates the cold run. Its first "
            "calls ran on whatever Inductor's cache held then:"
        )
        head = ["variant", "first call"]
        rows = [[f"`{n}`", first_call_cell(s["first_calls_seconds"]["first"], s)] for n, s in timed]
    else:
        head = ["variant", "cold start", "on the caches of the compiles before", "warm (a rerun)",
                "cold ÷ this"]  # fmt: skip
        rows = [first_calls_row(n, s) for n, s in timed]
    return "\n\n".join([*lines, "\n".join([*table_head(head), *map(table_row, rows)])])


def first_calls_row(name: str, s: dict) -> list[str]:
    """One variant's row of first_calls_tab: its first call in the column of the caches it met."""
    first = s["first_calls_seconds"]["first"]
    cold = (s.get("cold_first_calls_seconds") or {}).get("first")
    if cold is not None:  # the run's cold start, then its warm rerun
        return [f"`{name}`", first_call_cell(cold, s), "–", first_call_cell(first, s),
                f"{cold / max(first, 1e-9):.1f}×"]  # fmt: skip
    after = s.get("first_calls_after")
    if not after:
        return [f"`{name}`", "not measured", "–", first_call_cell(first, s), "–"]
    earlier = ", ".join(f"`{n}`" for n in after["variants"])
    start = after.get("cold_start_seconds")
    ratio = "–" if start is None else f"{start / max(first, 1e-9):.1f}×"
    return [f"`{name}`", "–", f"{first_call_cell(first, s)} (after {earlier})", "–", ratio]


# --- variants side by side ------------------------------------------------------------------------


def compare_tab(hw: dict, names: tuple[str, ...]) -> str | None:
    """The variants' per-forward numbers on one set, the timing pass's time first if it has one."""
    summaries = {n: hw["summaries"][n] for n in names if n in hw["summaries"]}
    if not summaries:
        return None
    ran = [s for s in summaries.values() if s["available"]]
    read = compare_columns(hw, summaries, ran)
    rows = [
        table_row([f"`{n}`", *(cell(n, s) for cell in read.values())])
        if s["available"]
        else f"| `{n}` | not available here |" + " |" * (len(read) - 1)
        for n, s in summaries.items()
    ]
    shapes = {setup_line(s) for s in ran}
    shape = shapes.pop() if len(shapes) == 1 else "rows at different shapes: see each variant's tab"
    table = "\n".join([*table_head(["variant", *read]), *rows])
    return f"<small>{environment_line(hw)}</small>\n\n{shape}. Per forward:\n\n{table}"


def compare_columns(hw: dict, summaries: dict, ran: list[dict]) -> dict:
    """column -> how to read it for (name, summary): the columns some row fills, the time to
    compare by (the timing pass's median and interquartile range) first."""
    columns = [c for c, read in COLUMNS.items() if any(read(s) is not None for s in ran)]
    columns = columns or ["CPU time (profiled)"]
    read = {}
    if any(timed(hw, n) for n in summaries):
        read["time (median, IQR)"] = lambda n, s: timed_cell(timed(hw, n))
    return read | {c: (lambda n, s, c=c: COLUMNS[c](s)) for c in columns}


def speedup_tab(hw: dict, a: str, b: str) -> str | None:
    """A's and B's times from the set's timing pass, A's ÷ B's with its interval and verdict; with
    A the reference, the clone of one score matrix timed in the same rounds."""
    ta, tb = timed(hw, a), timed(hw, b)
    if ta is None or tb is None:
        return None
    value, low, high = intervals.ratio(ta, tb)
    lines = [
        f"<small>{environment_line(hw)}</small>",
        f"Timed interleaved, apart from the profiler: `{a}` {timed_text(ta)}, `{b}` "
        f"{timed_text(tb)} per forward (median and {intervals.INTERVAL}). `{a}` ÷ `{b}`: "
        f"**{intervals.ratio_text(value, low, high)}**. {faster(b, intervals.above(low, high))}",
    ]
    clone = (hw.get("timing") or {}).get("score_clone")
    if clone and a == specs.REFERENCE:
        share = clone["median_us"] / ta["median_us"]
        lines.append(
            f"The clone of one score matrix ({bytes_text(clone['bytes'])}), timed in the same "
            f"rounds: {timed_text(clone)}, {share:.0%} of `{a}`'s median forward."
        )
    return "\n\n".join(lines)


def faster(b: str, above: bool | None) -> str:
    """What a ratio's interval says of B: faster, slower, or cannot tell (it holds 1×)."""
    return {
        True: f"`{b}` is faster: the whole interval is above 1×.",
        False: f"`{b}` is slower: the whole interval is below 1×.",
        None: "Cannot tell which is faster: the interval holds 1×.",
    }[above]


# --- every variant at a glance --------------------------------------------------------------------

STEP_HEAD = ["variant and its lesson", "step (median, IQR)", "forward (profiled, range)",
             "backward (profiled, range)", "saved for backward", "peak of the step"]  # fmt: skip


class Glance(NamedTuple):
    """How one set's glance reads: its count and profiled time columns, whether a timing pass timed
    it (then medians and speedups), and the reference's shape that speedups compare at."""

    hw: dict
    count: str
    times: list[str]
    timed: bool
    common: str | None

    @property
    def time_head(self) -> list[str]:
        """Timed: the median and interquartile range, and the speedup; else the profiler's means,
        labelled as such, and no speedup."""
        return ["time (median, IQR)", "speedup"] if self.timed else self.times


def glance(hw: dict, summaries: list[dict]) -> Glance:
    """How the set's glance reads (GPU: kernels and device time; CPU: ATen ops and CPU time)."""
    gpu, ref = hw["device_type"] == "cuda", specs.REFERENCE
    times = ["CPU time (profiled)", "device time (profiled)"] if gpu else ["CPU time (profiled)"]
    has_timing = bool(timed(hw, ref) or any(timed(hw, s["variant"]) for s in summaries))
    base = hw["summaries"].get(ref) or {}
    ran = [s for s in summaries if s["available"]]
    # Speedups compare rows at the reference's shape; rows at other shapes get a table of their own.
    common = setup_line(base) if base.get("available") else setup_line(ran[0]) if ran else None
    return Glance(hw, "kernels" if gpu else "ATen ops", times, has_timing, common)


def glance_text(hw: dict, summaries: list[dict]) -> list[str]:
    """The set's paragraphs: its environment and shape, how to read the times, then the forwards at
    the reference's shape, those at a shape of their own, and the training steps."""
    g, ref = glance(hw, summaries), specs.REFERENCE
    forwards, other, steps = [], [], []
    for s in summaries:
        if specs.spec(s["variant"]).trains:  # a training step: forward and backward apart
            steps.append(step_row(g, s))
        elif not s["available"] or setup_line(s) == g.common:
            forwards.append(forward_row(g, s))
        else:
            other.append(other_row(g, s))
    text = [f"<small>{environment_line(hw)}</small>"] + ([g.common] if g.common else [])
    text.append(timed_sentence() if g.timed else profiled_sentence())
    head = ["variant and its lesson", g.count, *g.time_head, "peak memory"]
    text.append("\n".join([*table_head(head), *forwards]))
    if other:
        head = ["variant and its lesson", "shape", g.count, g.time_head[0], "peak memory"]
        table = "\n".join([*table_head(head, 2), *other])
        text.append(f"Profiled at a shape of their own (no speedup over {ref}):\n\n{table}")
    if steps:
        text.append(steps_sentence(g.times[-1]) + "\n".join([*table_head(STEP_HEAD), *steps]))
        text += steps_differ(hw)
    return text


def step_rows(hw: dict) -> list[dict]:
    """The set's training steps both profiled and timed, in chapter order (attn.traces.claims.step_checks)."""
    summaries = {n: hw["summaries"][n] for n in specs.names() if n in hw["summaries"]}
    timing = hw.get("timing") or {}
    busy = how_busy([hw["env"].get("load"), timing.get("load")]) is not None
    return step_checks.step_rows(summaries, timing.get("variants") or {}, busy)


def steps_differ(hw: dict) -> list[str]:
    """On a CPU set with a timing pass, why a step's profiled forward plus backward and its timed
    step differ, said as the data says it (the check of train_naive's profiled-over-timed)."""
    rows = step_rows(hw) if hw["device_type"] == "cpu" else []
    if not rows:
        return []
    _, how_many, why = step_checks.verdict(rows)
    return [f"The profiled forward plus backward against the step timed whole: {how_many}; {why}."]


def timed_sentence() -> str:
    """How to read a timed glance: medians, their ranges, speedups that may not tell."""
    ref = specs.REFERENCE
    return (
        f"Per forward, timed apart from the profiler, every variant interleaved in one "
        f"process: the median and, in brackets, the {intervals.INTERVAL} (the middle half "
        f"of the timed repetitions). Speedup: {ref}'s median ÷ the variant's, at {ref}'s "
        "shape, with the lowest and highest ratio the two ranges allow; where that range "
        "holds 1×, the table says it cannot tell which is faster."
    )


def profiled_sentence() -> str:
    """How to read a glance without a timing pass."""
    return (
        "Per forward, as the profiler timed three forwards (no timing pass in this set, so "
        "no spread and no speedup)."
    )


def steps_sentence(time: str) -> str:
    """What the training steps' table shows, `time` being the profiled time it gives."""
    return (
        "Training steps: a whole step timed (median and interquartile range), the "
        f"{time} of its forward and of its backward (the mean of the profiled steps, and the "
        "least and most of them beneath it), what autograd saved for the "
        "backward, and the peak from the start of the forward to the end of the "
        "backward:\n\n"
    )


def lesson_cell(s: dict) -> str:
    """The variant, its lesson under it: one column less keeps the table within a page's width."""
    return f"`{s['variant']}`<br><small>{specs.spec(s['variant']).lesson}</small>"


def forward_row(g: Glance, s: dict) -> str:
    """A forward at the reference's shape: its count, its time (and speedup), its peak memory."""
    if not s["available"]:
        return table_row([lesson_cell(s), "not available here", *[None] * (len(g.time_head) + 1)])
    if g.timed:
        ref, mine = specs.REFERENCE, timed(g.hw, s["variant"])
        speedup = speedup_text(timed(g.hw, ref), mine) if s["variant"] != ref else "1×"
        times = [timed_cell(mine), speedup]
    else:
        times = [COLUMNS[c](s) for c in g.times]
    return table_row([lesson_cell(s), COLUMNS[g.count](s), *times, COLUMNS["peak memory"](s)])


def other_row(g: Glance, s: dict) -> str:
    """A forward at a shape of its own: the shape, and no speedup."""
    shown = timed_cell(timed(g.hw, s["variant"])) if g.timed else COLUMNS[g.times[0]](s)
    cells = [setup_line(s), COLUMNS[g.count](s), shown, COLUMNS["peak memory"](s)]
    return table_row([lesson_cell(s), *cells])


def step_row(g: Glance, s: dict) -> str:
    """A training step: the step timed, forward and backward as profiled (GPU: device time), what
    autograd saved and the step's peak."""
    key = "device_time_us" if g.hw["device_type"] == "cuda" else "cpu_time_us"
    b = s.get("backward") or {}
    cells = [timed_cell(timed(g.hw, s["variant"]))]
    cells += [profiled_cell(intervals.profiled(part, key)) for part in (s, b)]
    kept = ("saved_for_backward_bytes", "peak_memory_step_bytes")
    cells += [_fmt(bytes_text, b.get(k)) for k in kept]
    if not s["available"]:
        cells = ["not available here", *[None] * (len(cells) - 1)]
    return table_row([lesson_cell(s), *cells])


def overhead_tab(hw: dict, kind: str, link: Callable[[str], str]) -> str | None:
    """A CPU set's overhead.json rows of `kind`, tabled, or that the set has none."""
    if hw["device_type"] != "cpu":  # measured on a CPU only (attn.profiling.overhead says why)
        return None
    rows = hw["figure_rows"].get("overhead")
    if rows is None:
        return "Not measured in this set: it predates `python -m attn.profiling.overhead`."
    peaks = [r["peaks"] for r in hw["figure_rows"].get("benchmark", []) if r.get("peaks")]
    triad = peaks[0].get("triad_gbs") if peaks else None
    data = link(f"profiles/{hw['slug']}/overhead.json")
    return f"{overhead_table(rows, kind, triad)}\nData: [overhead.json]({data})"
