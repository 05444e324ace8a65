"""Checks on a hardware set's dispatch rows (dispatch.json): which backend the unpinned call ran, and
which pinned backend refused, over the cases a claim selects. No row selected: cannot tell (None).
See attn.traces.claims.claim and attn.traces.claims.dispatch_tables."""

from __future__ import annotations

from attn.traces.claims.benchmark_checks import BenchmarkEvidence
from attn.traces.claims.claim import Check
from attn.traces.claims.dispatch_tables import cases_text, short


def _selected(rows: list[dict], only: dict) -> list[dict]:
    """The rows whose fields have the values `only` gives (a tuple: any of its values)."""

    def fits(r: dict) -> bool:
        return all(
            r.get(f) in (want if isinstance(want, tuple) else (want,)) for f, want in only.items()
        )

    return [r for r in rows if fits(r)]


def _where(only: dict) -> str:
    return ", ".join(
        f"{f} {' or '.join(map(str, w)) if isinstance(w, tuple) else w}" for f, w in only.items()
    )


def ran(backends: tuple[str, ...], **only) -> Check:
    """Unpinned, every selected case ran one of `backends` (sdpa_flash, ...)."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        mine = _selected(ev.rows, only)
        if not mine:
            return None, f"no case in dispatch.json with {_where(only)}"
        seen = {short(r.get("backend")): [x for x in mine if x.get("backend") == r.get("backend")]
                for r in mine}  # fmt: skip
        shown = "; ".join(f"{b} in {cases_text(mine, of)}" for b, of in seen.items())
        return all(r.get("backend") in backends for r in mine), f"unpinned, ran {shown}"

    return check


def refused(backend: str, **only) -> Check:
    """Pinned to `backend`, torch refused every selected case; observed: its words, each once."""

    def check(ev: BenchmarkEvidence) -> tuple[bool | None, str]:
        mine = _selected(ev.rows, only)
        if not mine:
            return None, f"no case in dispatch.json with {_where(only)}"
        ran_anyway = [r for r in mine if not (r.get("refused") or {}).get(backend)]
        words = dict.fromkeys(m for r in mine for m in (r.get("refused") or {}).get(backend) or [])
        said = f"pinned {backend} refused {len(mine) - len(ran_anyway)} of {len(mine)} cases"
        return not ran_anyway, said + (f", saying: {' / '.join(words)}" if words else "")

    return check
