"""Checks on what a run's trace says: which ops ran and under what, in which order, the kernels and
copies they launched, how long they took, and the gaps between them. See attn.traces.claims.claim."""

from __future__ import annotations

import dataclasses
import functools
import re

from attn.traces.claims.claim import Check
from attn.traces.common import intervals
from attn.traces.common.units import time_text
from attn.traces.read.backward import as_forward
from attn.traces.read.patterns import COPY_KERNEL, NUMBERED_COMPILED_REGION
from attn.traces.read.range_counts import top_level
from attn.traces.read.trace import BACKWARD_RANGE, KERNEL, Forward


@dataclasses.dataclass
class Evidence:
    """What a claim may look at: the run's summary and its recorded forwards."""

    summary: dict
    forwards: list[Forward]

    def inputs(self, name: str) -> list[list[int]]:
        """The first input's shape of every event called `name` that recorded shapes."""
        return [
            e.args["Input Dims"][0]
            for f in self.forwards
            for e in f.cpu_events
            if e.name == name and e.args.get("Input Dims")
        ]

    def names(self) -> set[str]:
        """Every CPU event name seen under attn_fwd, in any forward."""
        return {e.name for f in self.forwards for e in f.cpu_events}

    def under(self, parent: str) -> set[str]:
        """Names of the events nested under any event called `parent`."""
        found: set[str] = set()
        for f in self.forwards:
            for p in (e for e in f.cpu_events if e.name == parent):
                found |= {e.name for e in f.cpu_events if e is not p and p.contains(e)}
        return found

    def kernels(self) -> list[str]:
        """The first forward's kernels, in launch order (the summary lists only the first few)."""
        if self.forwards:
            return [e.name for e in self.forwards[0].of_kind(KERNEL)]
        return self.summary.get("kernels") or []

    @functools.cached_property
    def backwards(self) -> list[Forward]:
        """The backward ranges (attn_bwd) of the trace the forwards come from, any thread's ops."""
        return (
            self.forwards[0].trace.forwards(BACKWARD_RANGE, any_thread=True)
            if self.forwards
            else []
        )


# Building blocks. Each returns (holds, observed).
def op_under(parent: str, child: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        holds = child in ev.under(parent)
        return holds, f"{child} {'found' if holds else 'not found'} under {parent}"

    return check


def only_under(parent: str, *allowed: str) -> Check:
    """`parent` runs, and nothing but `allowed` (none: nothing at all) runs under it."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if parent not in ev.names():
            return False, f"no {parent}"
        extra = sorted(ev.under(parent) - set(allowed))
        return not extra, f"under {parent}: {', '.join(sorted(ev.under(parent))) or 'nothing'}"

    return check


def absent(*names: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        seen = sorted(set(names) & ev.names())
        return not seen, f"seen: {', '.join(seen)}" if seen else f"none of {', '.join(names)}"

    return check


def present(*names: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        missing = sorted(set(names) - ev.names())
        return (
            not missing,
            f"missing: {', '.join(missing)}" if missing else f"seen: {', '.join(names)}",
        )

    return check


def top_level_ops(*names: str) -> Check:
    """Every forward's own ops (those directly under the range) are exactly these, in this order."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        seen = [[e.name for e in top_level(f)] for f in ev.forwards]
        holds = all(ops == list(names) for ops in seen)
        odd = next((ops for ops in seen if ops != list(names)), seen[0])
        return holds, " → ".join(odd) or "no ops"

    return check


def kernel_count(expected: int, at_least: bool = False) -> Check:
    """`expected` kernels per forward (or more, with at_least); memcpys and memsets are apart."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        return (n >= expected if at_least else n == expected), f"{n:g} kernels per forward"

    return check


def one_kernel_matching(pattern: str) -> Check:
    """Exactly one kernel per forward, and its name matches `pattern` (a regular expression)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        names = ev.kernels()
        hits = [k for k in names if re.search(pattern, k)]
        shown = (hits or names or ["no kernels"])[0][:90]
        return (n == 1 and len(hits) == 1), f"{n:g} kernel(s) per forward; {shown}"

    return check


def kernel_matching(pattern: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        hits = [k for k in ev.kernels() if re.search(pattern, k)]
        return bool(hits), (hits[0][:90] if hits else f"no kernel matching {pattern}")

    return check


def memcpys(direction: str, expected: int) -> Check:
    """`expected` memcpys per forward in that direction (DtoD, HtoD, DtoH), and no other memcpy."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        counts = ev.summary.get("memcpy_per_forward")
        if counts is None:
            return None, "no device activity recorded"
        others = {d: n for d, n in counts.items() if d != direction and n}
        seen = ", ".join(f"{n:g} {d}" for d, n in counts.items() if n) or "no Memcpy"
        return counts.get(direction, 0) == expected and not others, f"{seen} per forward"

    return check


def launched_with(api: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        apis = sorted({e.name for f in ev.forwards for e in f.runtime_calls if "Launch" in e.name})
        return api in apis, f"launch APIs: {', '.join(apis) or 'none'}"

    return check


def costs_more(slow: str, fast: str) -> Check:
    """Per forward, the events named `slow` take more CPU time (inclusive) than those named `fast`."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = max(len(ev.forwards), 1)
        times = {
            name: sum(e.dur for f in ev.forwards for e in f.cpu_events if e.name == name) / n
            for name in (slow, fast)
        }
        if not times[slow] or not times[fast]:
            missing = [name for name, t in times.items() if not t]
            return None, f"not in the trace: {', '.join(missing)}"
        ratio = times[slow] / times[fast]
        return (
            ratio > 1,
            f"{slow} {time_text(times[slow])}, {fast} {time_text(times[fast])} per forward ({ratio:.1f}×)",
        )

    return check


END = "the end"  # where a gap is: after the range's last op, before the range itself ends


def gaps(forward: Forward) -> dict[str, float]:
    """Time between the range's top-level ops, keyed by where: 'after aten::x' or END."""
    found: dict[str, float] = {}
    previous, end = "the start", forward.range.ts
    for e in top_level(forward):
        where = f"after {previous}"
        found[where] = found.get(where, 0.0) + max(e.ts - end, 0.0)
        previous, end = e.name, e.end
    found[END] = found.get(END, 0.0) + max(forward.range.end - end, 0.0)
    return found


def longest_gaps(*where: str, alone: bool = False) -> Check:
    """In every forward the longest gaps between ops are at `where` (and, with alone, every other
    gap is under a tenth of the shortest of them)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        holds = True
        for f in ev.forwards:
            ranked = sorted(gaps(f).items(), key=lambda kv: -kv[1])
            top, rest = ranked[: len(where)], ranked[len(where) :]
            holds &= {w for w, _ in top} == set(where)
            if alone and rest and top:
                holds &= rest[0][1] < 0.1 * top[-1][1]
        n = len(ev.forwards)
        mean: dict[str, float] = {}
        for f in ev.forwards:
            for w, t in gaps(f).items():
                mean[w] = mean.get(w, 0.0) + t / n
        ranked = sorted(mean.items(), key=lambda kv: -kv[1])
        self_us = sum(mean.values())
        total = sum(f.range.dur for f in ev.forwards) / n
        shown = ", ".join(
            f"{time_text(t)} {'at the end' if w == END else w}" for w, t in ranked[: len(where) + 1]
        )
        return holds, (
            f"{time_text(self_us)} per forward in no op ({self_us / total:.0%} of attn_fwd); "
            f"longest gaps: {shown}"
        )

    return check


def ops_per_forward(name: str, expected: int) -> Check:
    """Exactly `expected` events called `name` in every forward."""

    def check(ev: Evidence) -> tuple[bool, str]:
        counts = sorted({sum(e.name == name for e in f.cpu_events) for f in ev.forwards})
        seen = " or ".join(str(n) for n in counts) or "0"
        return counts == [expected], f"{seen} {name} per forward"

    return check


def generated_kernel(pattern: str) -> Check:
    """A CPU event whose name matches `pattern` (Inductor names its generated kernels this way)."""

    def check(ev: Evidence) -> tuple[bool, str]:
        hits = sorted({n for n in ev.names() if re.search(pattern, n)})
        return bool(hits), hits[0] if hits else f"no event matching {pattern}"

    return check


def runs_a_recompilation(ev: Evidence) -> tuple[bool, str]:
    """The forwards run in a Torch-Compiled Region numbered <frame>/1 or later: a recompilation.
    The frame number counts the functions compiled before in the process, so only the second
    number says anything about this variant."""
    regions = sorted({n for n in ev.names() if re.match(NUMBERED_COMPILED_REGION, n)})
    if not regions:
        return False, "no Torch-Compiled Region"
    holds = all(int(re.match(NUMBERED_COMPILED_REGION, n)[2]) >= 1 for n in regions)
    return holds, ", ".join(regions)


def compile_costs_forwards(at_least: int) -> Check:
    """The first call (tracing, code generation and build, or a load from Inductor's cache) costs
    at least `at_least` profiled forwards."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        seconds = (ev.summary.get("first_calls_seconds") or {}).get("first")
        if seconds is None:
            return None, "the first call was not timed (a run of the example times it)"
        ratio = seconds * 1e6 / ev.summary["cpu_time_us"]
        return ratio >= at_least, f"first call {seconds:.2f} s = {ratio:,.0f} profiled forwards"

    return check


def cold_call_costs_more(factor: float, later: float = 1.0) -> Check:
    """A cold start (the first call on empty compile caches) costs over `factor` times its warm
    rerun's first call; for a variant profiled after another compiled in the same run, over
    `later` times its own first call on the caches that one left (Inductor's setup there, its
    graph new: how much of a cold start is setup varies by graph, hence a lower bar). A set that
    predates the cold run cannot tell."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        cold = (ev.summary.get("cold_first_calls_seconds") or {}).get("first")
        warm = (ev.summary.get("first_calls_seconds") or {}).get("first")
        after = ev.summary.get("first_calls_after") or {}
        if warm is not None and cold is not None:
            ratio = cold / max(warm, 1e-9)
            return ratio > factor, f"first call cold {cold:.2f} s, warm {warm:.2f} s: {ratio:.1f}×"
        if warm is not None and after.get("cold_start_seconds") is not None:
            cold, first = after["cold_start_seconds"], after["cold_start_variant"]
            ratio = cold / max(warm, 1e-9)
            return ratio > later, (
                f"cold start ({first}) {cold:.2f} s, this first call on the caches it left "
                f"{warm:.2f} s: {ratio:.1f}×"
            )
        return None, "cold first call: not measured in this set"

    return check


def second_call_cheaper(factor: int) -> Check:
    """The second call costs under 1/`factor` of the first: the code compiled by the first is reused."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        calls = ev.summary.get("first_calls_seconds") or {}
        if calls.get("second") is None:
            return None, "the first calls were not timed (a run of the example times them)"
        ratio = calls["first"] / max(calls["second"], 1e-9)
        return ratio > factor, f"first call {calls['first']:.2f} s, second {calls['second']:.3f} s"

    return check


def copy_kernels(expected: int) -> Check:
    """Exactly `expected` kernels per forward whose names say they copy."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        hits = [k for k in ev.kernels() if re.search(COPY_KERNEL, k)]
        shown = f": {hits[0][:70]}" if hits else ""
        n = ev.summary["kernels_per_forward"]
        return len(hits) == expected, f"{len(hits)} copy kernel(s) of {n:g} per forward{shown}"

    return check


# --- a training step: the backward ------------------------------------------------------------


def in_backward(check: Check) -> Check:
    """`check` run on the backward ranges (attn_bwd), reading the summary's backward block."""

    def run(ev: Evidence) -> tuple[bool | None, str]:
        block = ev.summary.get("backward")
        if not block or not ev.backwards:
            return None, "no backward recorded (no attn_bwd range)"
        return check(Evidence({**ev.summary, **as_forward(block)}, ev.backwards))

    return run


def backward_over_forward(limit: float, *, at_most: bool = False) -> Check:
    """The backward takes at least `limit` times the forward's time (with at_most, at most that),
    device time where it was measured, else CPU time: the ratio of their means over the profiled
    steps, with the widest ratio the steps' ranges allow; cannot tell where that range holds
    `limit`."""
    verdict = intervals.below if at_most else intervals.above

    def check(ev: Evidence) -> tuple[bool | None, str]:
        block = ev.summary.get("backward") or {}
        key = "device_time_us" if block.get("device_time_us") is not None else "cpu_time_us"
        fwd, bwd = intervals.profiled(ev.summary, key), intervals.profiled(block, key)
        if fwd is None or bwd is None:
            return None, "no backward recorded (no attn_bwd range)"
        value, low, high = intervals.ratio(bwd, fwd)
        where = "device" if key == "device_time_us" else "CPU"
        if not (fwd["spread"] and bwd["spread"]):  # a summary from before the ranges were kept
            return verdict(low, high, limit), (
                f"{where} time per step: backward {time_text(bwd['median_us'])}, forward "
                f"{time_text(fwd['median_us'])} ({value:.1f}×; {intervals.NO_SPREAD})"
            )
        return verdict(low, high, limit), (
            f"{where} time per step: backward {intervals.profiled_text(bwd)}, forward "
            f"{intervals.profiled_text(fwd)}; backward ÷ forward "
            f"{intervals.ratio_text(value, low, high)}, the least and most the times of the "
            f"{fwd['repeats']} profiled steps allow"
        )

    return check
