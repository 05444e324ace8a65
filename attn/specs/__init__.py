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

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from attn.traces.claims.benchmark_checks import BenchmarkClaim
from attn.traces.claims.claim import Claim
from attn.traces.claims.rank_checks import RankClaim
from attn.traces.read.patterns import FUSED_CPU, exactly

if TYPE_CHECKING:
    from attn.variant import Variant


class _Lazy:
    """The variants' classes, each imported when a variant is first made: the specs themselves are
    data (names, claims, chapters) that the trace commands read where torch is not installed."""

    def __init__(self, **homes: str) -> None:
        self._homes = homes

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self._homes[name]), name)


V = _Lazy(
    AdditiveMaskAttention="attn.compiled",
    CompiledAttention="attn.compiled",
    CustomCpuVariant="attn.custom_cpu",
    CustomCudaVariant="attn.custom_cuda",
    CustomTritonVariant="attn.custom_triton",
    EnableGqaAttention="attn.decode",
    RepeatKVAttention="attn.decode",
    FlexAttention="attn.flex",
    backward_problem="attn.flex",
    sliding_window="attn.flex",
    InPlaceAttention="attn.inplace",
    NaiveAttention="attn.naive",
    ScoresScaledAttention="attn.naive",
    RingVariant="attn.registry",
    SdpaAttention="attn.sdpa",
    Variant="attn.variant",
    reference_attention="attn.reference",
    DecodeVariant="attn.registry",
    GeneratedVariant="attn.registry",
    ModuleVariant="attn.registry",
    SdpaVariant="attn.registry",
    TrainingVariant="attn.registry",
)

SDPA_CPU_OP = exactly(FUSED_CPU)  # the SDPA chapter's, the compiled one's and decoding's


@dataclasses.dataclass(frozen=True)
class Spec:
    """Everything the project knows about one variant."""

    name: str
    title: str
    lesson: str  # the one line the at-a-glance table says about it
    make: Callable[[], Variant]  # the variant object, without its name (the registry adds it)
    chapter: str  # the page in docs/ that teaches it
    example: tuple[str, ...]  # the script that profiles it, then that script's own flags
    # Files its chapter excerpts besides the example, published whole with the site.
    sources: tuple[str, ...] = ()
    focus: str | None = None  # the CPU event its trace-viewer screenshot selects (a regex)
    gpu_focus: str | None = None  # the same on a GPU; by default its first kernel
    claims: tuple[Claim, ...] = ()
    diff_with: tuple[str, ...] = ()  # variants whose runs are diffed against its (it -> them)
    # "scaling" (seq), "benchmark" (beside the baseline), "decoding", "training" (saved bytes, seq)
    sweeps: tuple[str, ...] = ()
    ratio: bool = False  # in the benchmark, its time ÷ the baseline's is reported and claimed
    holds_scores: bool = False  # materialises the [batch, heads, seq, seq] scores
    inputs: str = "square"  # "square": q, k, v alike; "decode": new tokens against a GQA KV cache
    trains: bool = False  # profiled as a training step: attn_fwd, a loss, attn_bwd
    # Its example times its first calls (compile.json): run once more before, on empty caches.
    times_first_calls: bool = False

    @property
    def trace_claims(self) -> list[Claim]:
        """The claims checked on the variant's own trace."""
        return [c for c in self.claims if not isinstance(c, BenchmarkClaim | RankClaim)]

    @property
    def rank_claims(self) -> list[RankClaim]:
        """The claims checked across the ranks of a variant run on several (its summary's rows)."""
        return [c for c in self.claims if isinstance(c, RankClaim)]

    @property
    def ranks(self) -> int:
        """How many ranks its example starts (its `--world N`), each writing a rank<r>/ folder of
        its own; 1 for an example that runs in one process."""
        flags = self.example[1:]
        return int(flags[flags.index("--world") + 1]) if "--world" in flags else 1


REFERENCE = "naive"  # speedups on the site are over this one
BENCHMARK_BASELINE = "sdpa_flash"  # the benchmark reports times as multiples of this one's


# The chapters' entries are made of Spec and V above, so their modules are imported once those exist.
from attn.specs import (  # noqa: E402
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
from attn.specs.compiled_and_flex import COLD_FIRST_CALL  # noqa: E402, F401
from attn.specs.public_traces import PUBLIC, PublicTrace, public  # noqa: E402, F401

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
