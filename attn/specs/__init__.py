"""One spec per variant: every fact about it, in one place, in chapter order.

Everything that lists variants reads these specs: the registry (`attn.variants()`), the examples that
`nox -s profile_examples` runs, the diffs, the screenshots, the sweeps, the sources the site
publishes and the tests' parametrisation. Each chapter's entries live in a module of their own,
named after its page (attn/specs/sdpa.py for docs/sdpa.md), each entry under its variant's name
written out; this module holds the Spec they are made of and the lookups. Adding a variant with a
chapter is its module, its example, its chapter, its entry in its chapter's module here and its nav
line in mkdocs.yml.

A claim is keyed by a short name unique within its variant; a chapter shows it with
`<!-- profile-claim: VARIANT KEY -->`. Claims are data built from the checks in attn.traces (logic),
and every op or kernel name they match by pattern comes from attn.traces.patterns.
"""

from __future__ import annotations

import functools

from attn.specs import (
    compiled_and_flex,
    context_parallel,
    custom_kernels,
    decoding,
    inplace,
    naive,
    sdpa,
    training,
)

# Read as attn.specs.COLD_FIRST_CALL, attn.specs.PUBLIC and attn.specs.public(folder).
from attn.specs.compiled_and_flex import COLD_FIRST_CALL  # noqa: F401
from attn.specs.public_traces import PUBLIC, PublicTrace, public  # noqa: F401

# Spec and V are what the chapters' entries are made of (attn/specs/record.py); read here as
# attn.specs.Spec and attn.specs.V too.
from attn.specs.record import SDPA_CPU_OP, Spec, V  # noqa: F401
from attn.traces.claims.claim import Claim

REFERENCE = "naive"  # speedups on the site are over this one
BENCHMARK_BASELINE = "sdpa_flash"  # the benchmark reports times as multiples of this one's

SPECS: tuple[Spec, ...] = (
    *naive.SPECS,
    *inplace.SPECS,
    *sdpa.SPECS,
    *custom_kernels.SPECS,
    *compiled_and_flex.SPECS,
    *decoding.SPECS,
    *training.SPECS,
    *context_parallel.SPECS,
)


@functools.cache
def _by_name() -> dict[str, Spec]:
    found: dict[str, Spec] = {}
    for s in SPECS:
        keys = [c.key for c in s.claims]
        if s.name in found or len(keys) != len(set(keys)):
            raise ValueError(f"spec {s.name!r}: its name or one of its claim keys is not unique")
        found[s.name] = s
    return found


def names() -> list[str]:
    """Every variant's name, in chapter order."""
    return list(_by_name())


def spec(name: str) -> Spec | None:
    """The spec of a variant; None for a variant that has none (one a reader wrote)."""
    return _by_name().get(name)


def in_sweep(sweep: str) -> list[str]:
    """The variants a sweep ("scaling", "benchmark", "decoding") includes, in chapter order."""
    return [s.name for s in SPECS if sweep in s.sweeps]


def diff_pairs() -> list[tuple[str, str]]:
    """(before, after) of every diff the chapters show."""
    return [(s.name, other) for s in SPECS for other in s.diff_with]


def claim(variant: str, key: str) -> Claim | None:
    """A variant's claim by its key; None for a variant or a key that has none."""
    found = spec(variant)
    return next((c for c in found.claims if c.key == key), None) if found else None
