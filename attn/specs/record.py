"""What a spec is made of: the Spec record and V, the variants' classes imported when first made.

The chapter modules beside this one build their entries from these; attn/specs/__init__.py gathers
the entries and holds the lookups.
"""

from __future__ import annotations

import dataclasses
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
