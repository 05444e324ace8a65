"""Checks on a GPU trace recorded by others and on what diagnose found in it: which attention ran
where, the chain of ops that called it, its kernels and their share of the trace's time, and the
findings it reported. See attn.traces.claims.claim."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from attn.traces.claims.claim import Check
from attn.traces.common.units import count_text, time_text
from attn.traces.read.trace import EPS_US, KERNEL, Trace


@dataclasses.dataclass
class PublicEvidence:
    """What a claim about someone else's trace may look at: diagnose's report, its calls (each with
    the device rows it launched), and the trace."""

    diagnosis: dict
    calls: list
    trace: Trace


def diagnosed(
    implementation: str,
    *,
    where: str,
    compiled: bool = False,
    kernels_per_call: float | None = None,
) -> Check:
    """Every attention diagnose found is this implementation, in a place matching `where` (and
    with this many kernels per call, if given)."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        rows = ev.diagnosis["attention"]
        holds = bool(rows) and all(
            (r["implementation"], r["compiled"]) == (implementation, compiled)
            and re.search(where, r["where"])
            and kernels_per_call in (None, r["kernels_per_call"])
            for r in rows
        )
        seen = "; ".join(
            f"{r['implementation']}{' (compiled)' if r['compiled'] else ''} in {r['where']}: "
            f"{r['calls']} call(s), {count_text(r['kernels_per_call'] or 0)} kernel(s) per call"
            for r in rows
        )
        return holds, seen or "no attention found"

    return check


def op_chain(*names: str) -> Check:
    """An event named names[-1] whose parents are the others, innermost last."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        outer = list(reversed(names[:-1]))
        for i in (i for i, n in enumerate(t.name) if n == names[-1]):
            if [t.name[a] for a in t.ancestors(i)][: len(outer)] == outer:
                return True, " → ".join(names)
        return False, f"no {names[-1]} directly under {' under '.join(outer)}"

    return check


def _kernel_time(trace: Trace, rows) -> float:
    return float(sum(trace.dur[d] for d in rows if trace.cat[d] == KERNEL))


def longest_kernel(pattern: str) -> Check:
    """In the attention call with the most device time, the longest kernel's name matches."""

    def check(ev: PublicEvidence) -> tuple[bool | None, str]:
        t, calls = ev.trace, [c for c in ev.calls if c.device_rows]
        if not calls:
            return None, "no device work recorded for the attention"
        call = max(calls, key=lambda c: _kernel_time(t, c.device_rows))
        longest = max(call.device_rows, key=lambda d: t.dur[d])
        return bool(re.search(pattern, t.name[longest])), (
            f"{t.name[longest][:70]}: {time_text(t.dur[longest])} of the call's "
            f"{time_text(_kernel_time(t, call.device_rows))}"
        )

    return check


def attention_share(low: float, high: float) -> Check:
    """The attention's kernels take between `low` and `high` of all kernel time in the trace."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        total = _kernel_time(t, range(len(t.name)))
        mine = _kernel_time(t, {d for c in ev.calls for d in c.device_rows})
        share = mine / total if total else 0.0
        return low <= share < high, (
            f"{time_text(mine)} of {time_text(total)} of kernel time ({share:.0%})"
        )

    return check


def kernels_launched_under(*patterns: str) -> Check:
    """Every kernel was launched from under an op whose name matches one of the patterns."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        kernels = [d for d, cat in enumerate(t.cat) if cat == KERNEL]
        stray = []
        for d in kernels:
            launcher = t.launcher(d)
            above = [] if launcher is None else [t.name[a] for a in t.ancestors(launcher)]
            if not any(re.search(p, n) for p in patterns for n in above):
                stray.append(t.name[d])
        if stray:
            return False, f"{len(stray)} of {len(kernels)} kernels elsewhere, e.g. {stray[0][:60]}"
        return True, f"all {len(kernels)} kernels"

    return check


def each_op_launches(op: str, device: str) -> Check:
    """Every CPU op named `op` launched device work whose name matches `device` (at least one op);
    observed: how many did, the first one's input shape, and that work's time with its spread."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        t = ev.trace
        ops = [i for i, n in enumerate(t.name) if n == op and t.cat[i] == "cpu_op"]
        if not ops:
            return False, f"no {op}"
        times, name = [], device
        for i in ops:  # the runtime calls inside the op, on its thread, by binary search
            rows = t.thread_rows(i)
            lo, hi = np.searchsorted(t.ts[rows], [t.ts[i] - EPS_US, t.end[i] + EPS_US])
            inside = rows[lo:hi]
            inside = inside[(t.end[inside] <= t.end[i] + EPS_US) & t.is_runtime[inside]]
            found = [d for d in t.launched_by(inside).tolist() if re.search(device, t.name[d])]
            if found:
                times.append(float(t.dur[found].sum()))
                name = t.name[found[0]]
        dims = (t.args[ops[0]].get("Input Dims") or [None])[0]
        spread = f"{time_text(min(times))}–{time_text(max(times))}" if times else "none"
        return len(times) == len(ops), (
            f"{len(times)} of {len(ops)} {op} (first input {dims}) launched {name}: {spread} each"
        )

    return check


def kinds_apart(where: str, most_share: float) -> Check:
    """diagnose splits the calls in `where` into two or more kinds, and the kind with the most
    device time takes at least `most_share` of the trace's device time."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        rows = [r for r in ev.diagnosis["attention"] if re.search(where, r["where"])]
        if not rows or rows[0]["share_of_device_time"] is None:
            return False, f"no device time for the calls in {where}"
        top = max(r["share_of_device_time"] for r in rows)
        seen = "; ".join(
            f"{r['shapes'] or 'no shapes'}: {r['calls']} call(s), "
            f"{time_text(r['device_time_us_per_call'])} each, {r['share_of_device_time']:.0%}"
            for r in rows
        )
        return len(rows) >= 2 and top >= most_share, seen

    return check


def reported_on_every_call(kind: str) -> Check:
    """diagnose reports the finding `kind` once for every forward call it found."""

    def check(ev: PublicEvidence) -> tuple[bool, str]:
        calls = sum(r["calls"] for r in ev.diagnosis["attention"] if r["pass"] == "forward")
        count = next((f["count"] for f in ev.diagnosis["findings"] if f["kind"] == kind), 0)
        return count == calls > 0, f"{kind}: {count} for {calls} forward call(s)"

    return check
