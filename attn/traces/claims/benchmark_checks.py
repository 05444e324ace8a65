"""Checks on a hardware set's benchmark rows (benchmark.json, training.json): times as ratios to the
baseline's, one variant against another at the same shapes, saved bytes. Each row keeps its
interval; where an interval holds the limit, that shape cannot tell. A claim over a grid of shapes
holds where every shape holds, fails where one fails for sure, and else cannot tell (None); what it
observed starts with how many shapes went each way, so a reader learns 23 of 24 were slower even
when the 24th cannot tell. See attn.traces.claims.claim."""

from __future__ import annotations

import dataclasses

from attn.traces.claims import roofline
from attn.traces.claims.claim import Check, Claim
from attn.traces.common import intervals
from attn.traces.common.busy import how_busy


@dataclasses.dataclass
class BenchmarkEvidence:
    """What a benchmark claim may look at: the set's benchmark rows, and which variant it is about."""

    variant: str
    rows: list[dict]


@dataclasses.dataclass(frozen=True)
class BenchmarkClaim(Claim):
    """A sentence about the variant's rows in a set's `<figure>.json` (benchmark.json unless said;
    "timing": the set's training steps, profiled and timed, as attn.traces.claims.step_checks pairs them),
    checked when the site is built against each set that has that figure; its check takes a
    BenchmarkEvidence."""

    figure: str = "benchmark"


def _span(values: list) -> str:
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]} to {values[-1]}"


def benchmark_shapes(rows: list[dict]) -> str:
    """What the rows measured, in words: 'batch 1 × 8 heads, seq 512 to 4096, head_dim 64, 128,
    float32 and bfloat16' (dtypes where the rows record them)."""
    sizes = sorted({(r.get("batch"), r.get("heads")) for r in rows})
    size = ", ".join(f"batch {b} × {h} heads" for b, h in sizes if b is not None and h is not None)
    dims = ", ".join(str(d) for d in sorted({r["head_dim"] for r in rows}))
    dtypes = " and ".join(dict.fromkeys(r["dtype"] for r in rows if r.get("dtype")))
    parts = [size] if size else []
    parts += [f"seq {_span([r['seq'] for r in rows])}", f"head_dim {dims}"]
    return ", ".join(parts + ([dtypes] if dtypes else []))


def _where(r: dict) -> str:
    """One benchmarked shape in words: 'seq 2048, head_dim 64', after its dtype where recorded."""
    shape = f"seq {r['seq']}, head_dim {r['head_dim']}"
    return f"{r['dtype']}, {shape}" if r.get("dtype") else shape


def _shape(r: dict) -> str:
    """_where, and the masking where the row records it: one shape of a grid, named apart."""
    masking = {True: ", causal", False: ", full"}.get(r.get("is_causal"), "")
    return _where(r) + masking


def counts(
    verdicts: list[tuple[bool | None, str]], words: dict, named: int = 3, of: str = "shapes"
) -> str:
    """How many of a grid's (verdict, where) went each way, in `words` (a verdict -> a word), the
    shapes that did not hold named (the first `named`): 'slower at 23 of 24 shapes, cannot tell at 1
    (float32, seq 512, head_dim 64, causal)'."""
    held = sum(v is True for v, _ in verdicts)
    parts = [f"{words[True]} at {held} of {len(verdicts)} {of}"]
    for verdict in (False, None):
        where = [w for v, w in verdicts if v is verdict]
        if where:
            more = f" and {len(where) - named} more" if len(where) > named else ""
            parts.append(f"{words[verdict]} at {len(where)} ({'; '.join(where[:named])}{more})")
    return ", ".join(parts)


def _row_time(row: dict) -> dict:
    """A benchmark row's time as intervals reads it: the median `time_us` and its interval (a row
    written before intervals were recorded: the median alone)."""
    t = row["time_us"]
    return {"median_us": t, "low_us": row.get("low_us", t), "high_us": row.get("high_us", t),
            "repeats": row.get("repeats", 1)}  # fmt: skip


def grid_verdict(verdicts: list[bool | None]) -> bool | None:
    """All hold: True; any fails for sure: False; else (an interval holds the limit) cannot tell."""
    if any(v is False for v in verdicts):
        return False
    return True if all(verdicts) else None


def ratio_verdict(row: dict, limit: float = 1.0) -> bool | None:
    """Whether a row's ratio to the baseline is under `limit`: True, False, or None where its
    interval holds `limit` (a row written before intervals were recorded: its ratio alone)."""
    value = row["ratio_to_flash"]
    return intervals.below(row.get("ratio_low", value), row.get("ratio_high", value), limit)


def ratio_to_baseline_below(limit: float, **only) -> Check:
    """At every benchmarked shape (those whose rows have the values `only` gives, such as
    is_causal=True or head_dim=64), the variant's time ÷ the baseline's (`ratio_to_flash`, measured
    in the same run) is under `limit`; cannot tell where a ratio's interval holds `limit`."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        mine = [
            r
            for r in ev.rows
            if r.get("variant") == ev.variant
            and r.get("ratio_to_flash") is not None
            and all(r.get(field) == value for field, value in only.items())
        ]
        if not mine:
            return None, f"no {ev.variant} row with a ratio to the baseline in benchmark.json"
        lo = min(mine, key=lambda r: r["ratio_to_flash"])
        hi = max(mine, key=lambda r: r["ratio_to_flash"])
        masking = {True: " causal", False: " non-causal", None: ""}[only.get("is_causal")]
        verdicts = [(ratio_verdict(r, limit), _shape(r)) for r in mine]
        words = {True: f"under {limit:g}×", False: f"over {limit:g}×", None: "cannot tell"}
        return grid_verdict([v for v, _ in verdicts]), (
            f"{counts(verdicts, words)}; "
            f"{lo['ratio_to_flash']:.2f}× ({_where(lo)}) to {hi['ratio_to_flash']:.2f}× ({_where(hi)}) "
            f"over {len(mine)}{masking} shapes: {benchmark_shapes(mine)}"
        )

    return check


def slower_than(other: str) -> Check:
    """At every shape benchmarked with both, the variant takes more time than `other` (same run);
    cannot tell where their intervals overlap."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        fields = ("batch", "heads", "seq", "head_dim", "is_causal", "dtype")
        key = lambda r: tuple(r.get(f) for f in fields)  # noqa: E731
        theirs = {key(r): r for r in ev.rows if r.get("variant") == other}
        pairs = [
            (r, intervals.ratio(_row_time(r), _row_time(theirs[key(r)])))
            for r in ev.rows
            if r.get("variant") == ev.variant and theirs.get(key(r))
        ]
        if not pairs:
            return None, f"no shape in benchmark.json has both {ev.variant} and {other}"
        lo, hi = min(x[0] for _, x in pairs), max(x[0] for _, x in pairs)
        mine = [r for r, _ in pairs]
        verdicts = [(intervals.above(low, high), _shape(r)) for r, (_, low, high) in pairs]
        words = {True: "slower", False: "faster", None: "cannot tell"}
        return grid_verdict([v for v, _ in verdicts]), (
            f"{counts(verdicts, words)}; {ev.variant} ÷ {other}: {lo:.2f}× to {hi:.2f}× over "
            f"{len(pairs)} shapes: {benchmark_shapes(mine)}"
        )

    return check


def keeps_times(factor: float, other: str, from_seq: int) -> Check:
    """At every length swept from `from_seq` on, the variant saves for the backward at least
    `factor` times the bytes `other` saves (training.json, both measured in one run)."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        key = "saved_for_backward_bytes"
        theirs = {r["seq"]: r[key] for r in ev.rows if r.get("variant") == other}
        ratios = [
            (r["seq"], r[key] / theirs[r["seq"]])
            for r in ev.rows
            if r.get("variant") == ev.variant and r["seq"] >= from_seq and theirs.get(r["seq"])
        ]
        if not ratios:
            return None, f"no length from {from_seq} on has both {ev.variant} and {other}"
        shown = ", ".join(f"{x:.1f}× at seq {seq}" for seq, x in ratios)
        verdicts = [(x >= factor, f"seq {seq}") for seq, x in ratios]
        words = {True: f"at least {factor:g}×", False: f"under {factor:g}×"}
        return min(x for _, x in ratios) >= factor, (
            f"{counts(verdicts, words, of='lengths')}; {ev.variant} ÷ {other}: {shown}"
        )

    return check


def bound_by(roof: str, **only) -> Check:
    """At every benchmarked shape (of the rows with the values `only` gives, such as
    dtype="float32"), `roof` ("compute" or "memory") bounds the variant by the roofline: its
    arithmetic intensity is above the machine's balance (compute) or not (memory), from the peaks
    measured in the same run (attn.traces.claims.roofline). A set without them cannot tell."""
    if roof not in ("compute", "memory"):
        raise ValueError(f"roof {roof!r}: say 'compute' or 'memory'")

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        mine = [r for r in ev.rows if all(r.get(f) == v for f, v in only.items())]
        found = roofline.limits(mine, ev.variant)
        if not found:
            return None, (
                f"not measured in this set: no {ev.variant} row of benchmark.json carries the "
                "peaks and the triad's bandwidth, benchmarked before they were measured"
            )
        return all(lim.bound == roof for lim in found), roofline.observed(found)

    return check


def row_takes_longer(kind: str, name: str, than: str) -> Check:
    """Of the variant's rows of `kind` (overhead.json, timed interleaved), `name` takes more time
    per call than `than`; cannot tell where the interval of their ratio holds 1, or where the rows
    were timed on a busy machine (other work can lengthen one arm's blocks more than another's)."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        found = {
            r.get("name"): r
            for r in ev.rows
            if (r.get("kind"), r.get("variant")) == (kind, ev.variant)
        }
        if name not in found or than not in found:
            return (
                None,
                f"not measured in this set: no {kind} rows {name} and {than} of {ev.variant}",
            )
        value, low, high = intervals.ratio(_row_time(found[name]), _row_time(found[than]))
        said = f"{name} ÷ {than}: {intervals.ratio_text(value, low, high)}"
        if busy := how_busy([found[name].get("load"), found[than].get("load")]):
            return None, f"{said}, timed while {busy}: cannot tell on a busy machine"
        return intervals.above(low, high), said

    return check
