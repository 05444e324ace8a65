"""Find the attention in any trace, name its implementation, and point to the chapter that helps.

    python -m attn.profiling diagnose TRACE [--json OUT]

Modules do the work, each over one parsed trace: `calls` finds the attention calls (`eager_scores` tells
eager attention's products apart by data flow) and groups them into kinds of call, `device_work` says what
each call's device work is, `preparation` charges each call the work before it that made its inputs,
`findings` counts what to fix in them (one record per finding, beside
its detector), and `report` prints the result. This module assembles the result: the
trace's facts, its attention, the kernels no call explains (`device_work`), the findings and what went
unchecked, and what in the trace itself misleads (`trace_lint`).
"""

from __future__ import annotations

from pathlib import Path

from attn.traces.diagnosis import device_work, preparation
from attn.traces.diagnosis.call_table import attention_rows, layout_kernels, trace_device_us
from attn.traces.diagnosis.calls import Call, find_calls
from attn.traces.diagnosis.findings import findings
from attn.traces.ranks.folder import imbalance, rank_traces, read_ranks
from attn.traces.read import trace_lint
from attn.traces.read.trace import Trace, device_name_of

# The version of the result's fields (`diagnose --json`): raised when a field changes meaning or goes.
DIAGNOSIS_SCHEMA = 1


def diagnose(trace: Trace) -> dict:
    """The report as data: the trace's facts, its attention, the findings (each with the chapter
    that teaches its fix) and what went unchecked."""
    return diagnosis_of(trace, find_calls(trace))


def diagnosis_of(trace: Trace, calls: list[Call]) -> dict:
    """diagnose's result for calls already found (the public traces' claims read the calls too)."""
    preparation.charge(trace, calls)
    found, unchecked = findings(trace, calls)
    rows = attention_rows(trace, calls)
    shares = [r["share_of_device_time"] for r in rows if r["share_of_device_time"] is not None]
    return {
        "schema": DIAGNOSIS_SCHEMA,
        "trace": {
            "device_name": device_name_of(trace.raw),
            "cpu_ops": "cpu_op" in trace.cat,
            "shapes": any("Input Dims" in a for a in trace.args),
            "device_activity": trace.has_device_activity,
            "device_time_us": trace_device_us(trace) if trace.has_device_activity else None,
        },
        "attention": rows,
        "attention_share_of_device_time": sum(shares) if shares else None,
        "layout_kernels": layout_kernels(trace),
        "unattributed": device_work.unattributed(trace, calls),
        "findings": found,
        "not_checked": unchecked,
        "lint": trace_lint.lint(trace),
    }


def _of_rank(trace: Trace, row: dict) -> dict:
    """In a rank's worker: its diagnosis, beside its row."""
    return {"diagnosis": diagnose(trace)}


def diagnose_ranks(folder: Path, workers: int | None = None) -> dict:
    """A folder of rank traces (attn.traces.ranks.folder): each rank diagnosed in a process of its own,
    with its compute and communication; then the imbalance across the ranks and the straggler."""
    found = rank_traces(folder)
    rows = read_ranks(found, _of_rank, workers)
    worlds = {r["world_size"] for r in rows} - {None}
    return {
        "schema": DIAGNOSIS_SCHEMA,
        "folder": Path(folder).name,
        "ranks_read": len(rows),
        "world_size": worlds.pop() if len(worlds) == 1 else None,
        "imbalance": imbalance(rows),
        "ranks": rows,
    }
