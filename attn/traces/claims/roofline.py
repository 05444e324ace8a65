"""What limits a kernel at a benchmarked shape, compute or memory, by the roofline: its arithmetic
intensity (the FLOPs of a forward over the fewest bytes it must move) against the machine's balance
(its measured compute peak over its measured memory bandwidth, attn.profiling.peaks). Above the
balance, memory could feed the units faster than they compute: compute bounds the kernel.

Reads benchmark.json's rows only; a row without the peaks (a set benchmarked before they were
measured) has no verdict.
"""

from __future__ import annotations

from typing import NamedTuple

BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, is_causal: bool) -> float:
    """FLOPs of one forward: two matmuls of 2*s*s*d each per head. A causal run counts the
    triangle, not the square: query i sees keys j <= i, about half of the s*s scores, and the
    kernels skip the rest, so counting the square would double a causal kernel's rate (and could
    put it above the machine's peak)."""
    flops = 4 * batch * heads * seq * seq * head_dim
    return flops / 2 if is_causal else flops


def fewest_bytes(batch: int, heads: int, seq: int, head_dim: int, dtype: str) -> int:
    """The bytes a forward must move at least: q, k and v read once and the output written once,
    each [batch, heads, seq, head_dim] in the dtype (a causal run reads all of k and v too)."""
    if dtype not in BYTES:
        raise ValueError(f"dtype {dtype!r} has no known size; known: {', '.join(BYTES)}")
    return 4 * batch * heads * seq * head_dim * BYTES[dtype]


class Limit(NamedTuple):
    """One row's verdict: its intensity and the balance (FLOP per byte), which bounds it, and the
    share it reaches of the compute peak and of the memory bandwidth."""

    row: dict
    intensity: float
    balance: float
    bound: str  # "compute" or "memory"
    compute_share: float
    memory_share: float


def limit_of(row: dict) -> Limit | None:
    """The row's Limit, or None where the row lacks the compute peak, the triad's bandwidth, or
    the shape and dtype its bytes are counted from."""
    peak, gbs = row.get("peak_tflops"), (row.get("peaks") or {}).get("triad_gbs")
    if not peak or not gbs or row.get("dtype") not in BYTES:
        return None
    if any(row.get(k) is None for k in ("batch", "heads")):
        return None
    shape = (row["batch"], row["heads"], row["seq"], row["head_dim"])
    flops = attention_flops(*shape, row["is_causal"])
    moved = fewest_bytes(*shape, row["dtype"])
    seconds = row["time_us"] / 1e6
    intensity, balance = flops / moved, peak * 1e12 / (gbs * 1e9)
    return Limit(
        row, intensity, balance, "compute" if intensity > balance else "memory",
        flops / seconds / (peak * 1e12), moved / seconds / (gbs * 1e9),
    )  # fmt: skip


def limits(rows: list[dict], variant: str) -> list[Limit]:
    """The verdict of each of the variant's rows that has the peaks, in the rows' order."""
    return [lim for r in rows if r.get("variant") == variant and (lim := limit_of(r))]


def _span(values: list[float], text) -> str:
    lo, hi = min(values), max(values)
    return text(lo) if text(lo) == text(hi) else f"{text(lo)} to {text(hi)}"


def _ratio(x: float) -> str:
    return f"{x:,.3g}" if x < 100 else f"{x:,.0f}"


def _percent(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def observed(found: list[Limit]) -> str:
    """The numbers behind a verdict, per dtype: intensity against balance, how many shapes are
    above it, and the share of the peak that bounds them."""
    parts = []
    for dtype in dict.fromkeys(lim.row["dtype"] for lim in found):
        mine = [lim for lim in found if lim.row["dtype"] == dtype]
        above = sum(lim.bound == "compute" for lim in mine)
        compute = [m.compute_share for m in mine if m.bound == "compute"]
        memory = [m.memory_share for m in mine if m.bound == "memory"]
        reached = [
            f"{_span(compute, _percent)} of the compute peak" if compute else "",
            f"{_span(memory, _percent)} of the triad's bandwidth" if memory else "",
        ]
        if compute and memory:
            reached = [f"{reached[0]} where compute bounds it", f"{reached[1]} where memory does"]
        reached = " and ".join(x for x in reached if x)
        parts.append(
            f"in {dtype}, intensity {_span([m.intensity for m in mine], _ratio)} FLOP/byte "
            f"against a balance of {_ratio(mine[0].balance)}: above it at {above} of {len(mine)} "
            f"shapes, reaching {reached}"
        )
    return "; ".join(parts)


def limit_sentence(rows: list[dict], variant: str) -> str:
    """What limits the variant on this set, in words the data picks: compute, memory, or each at
    some shapes; 'not measured in this set' without the peaks."""
    found = limits(rows, variant)
    if not found:
        measured = any(r.get("peak_tflops") for r in rows if r.get("variant") == variant)
        why = (
            "it measured no memory bandwidth beside the compute peak"
            if measured
            else "its benchmark ran before the machine's peaks and memory bandwidth were measured"
        )
        return f"What limits {variant}, compute or memory: not measured in this set ({why})."
    above, text = sum(lim.bound == "compute" for lim in found), observed(found)
    if above == len(found):
        verdict = f"compute bounds {variant}, not memory"
    elif not above:
        verdict = f"memory bounds {variant}, not compute"
    else:
        verdict = (
            f"compute bounds {variant} at {above} of {len(found)} shapes, memory at the "
            f"other {len(found) - above}"
        )
    return (
        f"By the roofline, {verdict}: its arithmetic intensity (a forward's FLOPs over the fewest "
        "bytes it must move, q, k and v read once and the output written once) against this "
        "machine's balance (its compute peak over the triad's memory bandwidth). "
        f"{text[0].upper()}{text[1:]}."
    )
