"""Claims: a sentence, the check that says whether it holds, and how a list of them is evaluated.

A claim is a sentence plus a check over evidence: a run's trace (trace_checks, shape_checks), the
rows of a hardware set's benchmark.json (benchmark_checks) or someone else's trace and what
diagnose found in it (public_checks). The check returns whether the claim holds (True, False, or
None when the evidence cannot tell) and what was observed; a claim that does not hold is a
finding, not an error. The claims themselves live in attn.specs; nothing here names a variant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

# Evidence in, (holds, observed) out: holds is True, False or None (the evidence cannot tell).
Check = Callable[[Any], tuple[bool | None, str]]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A sentence and the check that says whether it holds, keyed by a short name unique within its
    variant: the name a chapter's `<!-- profile-claim: VARIANT KEY -->` marker uses."""

    key: str
    device_type: str  # "cpu" or "cuda": the hardware the sentence is about
    text: str
    check: Check
    # True when the verdict needs a run large enough for the score matrix to dominate (times, gaps
    # between ops, fixed-size tile buffers): checked on every run like any claim, but a test's tiny
    # run cannot be expected to show it.
    at_scale: bool = False


def both(*checks: Check) -> Check:
    """All checks hold; None (cannot tell) when one cannot tell and none fails."""

    def check(ev) -> tuple[bool | None, str]:
        results = [c(ev) for c in checks]
        holds = [h for h, _ in results]
        verdict = False if False in holds else (None if None in holds else True)
        return verdict, "; ".join(dict.fromkeys(o for _, o in results))

    return check


def evaluate(claims: list[Claim], device_type: str, evidence) -> list[dict]:
    """Check each claim about this device type: [{"key", "text", "holds", "observed"}].

    `holds` is True or False, or None when the evidence cannot tell (e.g. shapes were not recorded).
    """
    results = []
    for claim in claims:
        if claim.device_type == device_type:
            holds, observed = claim.check(evidence)
            results.append(
                {"key": claim.key, "text": claim.text, "holds": holds, "observed": observed}
            )
    return results
