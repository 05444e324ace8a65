"""Reading a dispatch sweep (dispatch.json, written by attn.profiling.dispatch): the backend an
unpinned SDPA call's ops say ran, and the rows as the tables the site shows.

A row: dtype, head_dim, inputs (one of INPUTS), the SDPA ops the unpinned call ran, the backend
they say (an implementation of attn.traces.read.patterns: sdpa_flash, sdpa_math, ...; None, with torch's
`error`, where the call raised) and, per backend pinned, None when it ran or torch's messages when
it refused.
"""

from __future__ import annotations

from attn.traces.claims.figure_tables import table_head, table_row
from attn.traces.common import markdown as md
from attn.traces.read.patterns import row_for

INPUTS = ("none", "is_causal", "bool mask", "float mask", "dropout")  # the kinds of input swept


def backend_of(ops: list[str]) -> str | None:
    """The SDPA implementation the first backend op among `ops` names (sdpa_flash, ...), or None."""
    for op in ops:
        row = row_for(op)
        if row and row.implementation and row.implementation.startswith("sdpa_"):
            return row.implementation
    return None


def short(backend: str | None) -> str:
    """sdpa_flash -> flash; None (no backend op seen) -> a dash."""
    return "–" if backend is None else backend.removeprefix("sdpa_")


def cases_text(rows: list[dict], of: list[dict]) -> str:
    """Which of all the rows `of` are, in words: 'every case', or their inputs, dtypes, head_dims."""
    if len(of) == len(rows):
        return f"every case ({len(of)})"
    parts = []
    for field, name in (("inputs", "inputs"), ("dtype", "dtype"), ("head_dim", "head_dim")):
        mine = list(dict.fromkeys(r[field] for r in of))
        if len(mine) < len({r[field] for r in rows}):
            parts.append(f"{name} {', '.join(str(m) for m in mine)}")
    return f"{'; '.join(parts) or 'some cases'} ({len(of)})"


def refused_text(rows: list[dict], of: list[dict]) -> str:
    """Where a pinned backend was refused: cases_text, and where that is every case, in every
    dtype swept, said as the registry's probe says it ('every case: float32 and bfloat16, 40 of
    40')."""
    if len(of) != len(rows):
        return cases_text(rows, of)
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    return f"every case: {' and '.join(dtypes)}, {len(of)} of {len(rows)}"


def cell(value: object) -> str:
    """Text in a table cell: a pipe in it would end the cell."""
    return md.text(value).replace("|", "\\|")


def ran_cell(rows: list[dict]) -> str | None:
    """The backend these rows ran, or each backend with its head_dims where they differ."""
    by_backend: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: r["head_dim"]):
        by_backend.setdefault(short(r["backend"]), []).append(r["head_dim"])
    if len(by_backend) == 1:
        return cell(next(iter(by_backend)))
    return (
        "<br>".join(f"{cell(b)}: {', '.join(map(str, d))}" for b, d in by_backend.items()) or None
    )


def dispatch_table(rows: list[dict]) -> str:
    """What ran unpinned, by inputs (a row) and dtype (a column), over the head_dims; the op names
    that say it; then each pinned backend's refusals in torch's words, with the cases each came
    from."""
    if not rows:
        return "No case in this set's dispatch.json."
    dims = ", ".join(str(d) for d in sorted({r["head_dim"] for r in rows}))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    lines = [f"Unpinned: the backend that ran at head_dim {dims}, read from the SDPA op under the "
             "call.", ""]  # fmt: skip
    lines += table_head(["inputs", *dtypes], len(dtypes) + 1)
    for inputs in dict.fromkeys(r["inputs"] for r in rows):
        mine = [[r for r in rows if (r["inputs"], r["dtype"]) == (inputs, d)] for d in dtypes]
        lines.append(table_row([cell(inputs), *(ran_cell(of) for of in mine)]))
    ops = {}
    for r in rows:
        for op in r["ops"]:
            if (found := backend_of([op])) is not None:
                ops.setdefault(op, found)
    lines += [
        "",
        "The op names: " + "; ".join(f"{md.code(o)} ({short(b)})" for o, b in ops.items()),
    ]
    raised: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("error"):
            raised.setdefault(r["error"], []).append(r)
    lines += [
        f"\nUnpinned, torch raised in {cell(cases_text(rows, of))}: {cell(e)}"
        for e, of in raised.items()
    ]
    lines += ["", "Pinned with `sdpa_kernel`: each refusal in torch's own words.", ""]
    lines += table_head(["pinned", "refused for", "torch said"], 3)
    said: dict[tuple, list[dict]] = {}
    for r in rows:
        for backend, messages in r["refused"].items():
            if messages:
                said.setdefault((backend, tuple(messages)), []).append(r)
    for (backend, messages), of in said.items():
        words = "<br>".join(cell(m) for m in messages)
        lines.append(table_row([cell(backend), cell(refused_text(rows, of)), words]))
    ran_all = [b for b in rows[0]["refused"] if not any(r["refused"][b] for r in rows)]
    if ran_all:
        lines += ["", f"Never refused here: {', '.join(md.text(b) for b in ran_all)}."]
    return "\n".join(lines)
