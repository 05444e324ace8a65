"""Claims: what each variant's trace should show, checked against every run on every hardware.

A claim is a sentence plus a check over the run's evidence. The check returns whether the claim
holds and what was actually observed; a claim that does not hold is a finding, not an error.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from attn.profiling.trace import Forward


@dataclasses.dataclass
class Evidence:
    """What a claim may look at: the run's summary and its recorded forwards."""

    summary: dict
    forwards: list[Forward]

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
        return self.summary.get("kernels") or []


Check = Callable[[Evidence], tuple[bool, str]]


@dataclasses.dataclass(frozen=True)
class Claim:
    text: str
    device_type: str  # "cpu" or "cuda": the hardware the sentence is about
    check: Check


# Building blocks. Each returns (holds, observed).
def op_under(parent: str, child: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        holds = child in ev.under(parent)
        return holds, f"{child} {'found' if holds else 'not found'} under {parent}"

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


def only_scalar_copies(ev: Evidence) -> tuple[bool, str]:
    """Every aten::copy_ copies a 0-dim tensor (a wrapped Python number), not the scores."""
    shapes = [
        e.args.get("Input Dims", [[None]])[0]
        for f in ev.forwards
        for e in f.cpu_events
        if e.name == "aten::copy_"
    ]
    big = [s for s in shapes if s != []]
    per_fwd = len(shapes) // max(len(ev.forwards), 1)
    if big:
        return False, f"aten::copy_ of shape {big[0]}"
    return True, f"{per_fwd} aten::copy_ per forward, each of a 0-dim tensor"


def kernel_count(predicate: Callable[[float], bool], wording: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return False, "no device activity recorded"
        return predicate(n), f"{n:g} kernels per forward ({wording})"

    return check


def kernel_matching(pattern: str, count: int | None = None) -> Check:
    """Some kernel name matches `pattern` (and, with count, that many kernels per forward in all)."""

    def check(ev: Evidence) -> tuple[bool, str]:
        names = ev.kernels()
        hits = [k for k in names if re.search(pattern, k)]
        holds = bool(hits) and (count is None or len(names) == count)
        shown = hits[0] if hits else (names[0] if names else "no kernels")
        return holds, f"{len(names)} kernel(s); {'matching' if hits else 'first'}: {shown[:90]}"

    return check


def memcpy(expected: bool) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        copies = [k for k in ev.kernels() if k.startswith("Memcpy")]
        return bool(copies) == expected, copies[0] if copies else "no Memcpy"

    return check


def launched_with(api: str) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        apis = sorted(
            {
                e.name
                for f in ev.forwards
                for e in f.cpu_events
                if e.cat in ("cuda_runtime", "cuda_driver") and "Launch" in e.name
            }
        )
        return api in apis, f"launch APIs: {', '.join(apis) or 'none'}"

    return check


def both(*checks: Check) -> Check:
    def check(ev: Evidence) -> tuple[bool, str]:
        results = [c(ev) for c in checks]
        return all(h for h, _ in results), "; ".join(o for _, o in results)

    return check


FUSED_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"

CLAIMS: dict[str, list[Claim]] = {
    "naive": [
        Claim(
            "Masking clones the scores: aten::clone under aten::masked_fill.",
            "cpu",
            op_under("aten::masked_fill", "aten::clone"),
        ),
        Claim(
            "6 kernels per forward, one a device-to-device Memcpy (the clone in masked_fill).",
            "cuda",
            both(kernel_count(lambda n: n == 6, "expected 6"), memcpy(True)),
        ),
    ],
    "inplace": [
        Claim(
            "No aten::clone under attn_fwd, and no aten::copy_ of the scores (only of the scale factor).",
            "cpu",
            both(absent("aten::clone"), only_scalar_copies),
        ),
        Claim(
            "5 kernels per forward and no Memcpy.",
            "cuda",
            both(kernel_count(lambda n: n == 5, "expected 5"), memcpy(False)),
        ),
    ],
    "sdpa_math": [
        Claim(
            "Uses aten::_safe_softmax, which guards fully masked rows.",
            "cpu",
            present("aten::_safe_softmax"),
        ),
        Claim(
            "Rebuilds the causal mask on every call: aten::ones, aten::tril, aten::where.",
            "cpu",
            present("aten::ones", "aten::tril", "aten::where"),
        ),
        Claim(
            "Many kernels per forward (the article saw about 20), the mask rebuilt by a tril kernel.",
            "cuda",
            both(kernel_count(lambda n: n >= 10, "expected 10 or more"), kernel_matching("tril")),
        ),
    ],
    "sdpa_efficient": [
        Claim(
            "One fused fmha_cutlassF kernel per forward.",
            "cuda",
            kernel_matching("fmha_cutlassF", count=1),
        ),
    ],
    "sdpa_flash": [
        Claim(
            f"One fused op, {FUSED_CPU}, and no separate softmax.",
            "cpu",
            both(
                present(FUSED_CPU), absent("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
            ),
        ),
        Claim("One flash kernel per forward.", "cuda", kernel_matching("flash", count=1)),
    ],
    "sdpa_cudnn": [
        Claim(
            "One cudnn_generated kernel per forward, launched with cuLaunchKernelEx, and no aten::transpose.",
            "cuda",
            both(
                kernel_matching("cudnn_generated", count=1),
                launched_with("cuLaunchKernelEx"),
                absent("aten::transpose"),
            ),
        ),
    ],
    "custom_cpu": [
        Claim(
            "One op from our library: attn::flash_attention_forward, and no separate softmax.",
            "cpu",
            both(
                present("attn::flash_attention_forward"),
                absent("aten::softmax", "aten::_softmax", "aten::bmm"),
            ),
        ),
    ],
    "custom_cuda": [
        Claim("One kernel per forward: ours.", "cuda", kernel_matching("flash", count=1)),
    ],
    "custom_triton": [
        Claim(
            "One kernel per forward: the Triton one.",
            "cuda",
            kernel_matching("attn|flash|fwd", count=1),
        ),
    ],
}


def claims_for(variant: str, device_type: str | None = None) -> list[Claim]:
    """The variant's claims, all of them or those about one device type."""
    return [c for c in CLAIMS.get(variant, []) if device_type in (None, c.device_type)]


def evaluate(variant: str, device_type: str, evidence: Evidence) -> list[dict]:
    """Check each claim about this device type: [{"text", "holds", "observed"}]."""
    results = []
    for claim in claims_for(variant, device_type):
        holds, observed = claim.check(evidence)
        results.append({"text": claim.text, "holds": bool(holds), "observed": observed})
    return results
