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


def only_scalar_copies(ev: Evidence) -> tuple[bool | None, str]:
    """Every aten::copy_ copies a 0-dim tensor (a wrapped Python number), not the scores."""
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == "aten::copy_"]
    if any("Input Dims" not in e.args for e in copies):
        return None, "input shapes not recorded (the trace was taken without record_shapes)"
    big = [e.args["Input Dims"][0] for e in copies if e.args["Input Dims"][0] != []]
    if big:
        return False, f"aten::copy_ of shape {big[0]}"
    per_fwd = len(copies) // max(len(ev.forwards), 1)
    return True, f"{per_fwd} aten::copy_ per forward, each of a 0-dim tensor"


def kernel_count(expected: int, at_least: bool = False) -> Check:
    """`expected` kernels per forward (or more, with at_least); memcpys and memsets are apart."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        return (n >= expected if at_least else n == expected), f"{n:g} kernels per forward"

    return check


def one_kernel_matching(pattern: str) -> Check:
    """Exactly one kernel per forward, and its name matches `pattern` (a regular expression)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = ev.summary.get("kernels_per_forward")
        if n is None:
            return None, "no device activity recorded"
        names = ev.kernels()
        hits = [k for k in names if re.search(pattern, k)]
        shown = (hits or names or ["no kernels"])[0][:90]
        return (n == 1 and len(hits) == 1), f"{n:g} kernel(s) per forward; {shown}"

    return check


def kernel_matching(pattern: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        hits = [k for k in ev.kernels() if re.search(pattern, k)]
        return bool(hits), (hits[0][:90] if hits else f"no kernel matching {pattern}")

    return check


def memcpys(direction: str, expected: int) -> Check:
    """`expected` memcpys per forward in that direction (DtoD, HtoD, DtoH), and no other memcpy."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        counts = ev.summary.get("memcpy_per_forward")
        if counts is None:
            return None, "no device activity recorded"
        others = {d: n for d, n in counts.items() if d != direction and n}
        seen = ", ".join(f"{n:g} {d}" for d, n in counts.items() if n) or "no Memcpy"
        return counts.get(direction, 0) == expected and not others, f"{seen} per forward"

    return check


def launched_with(api: str) -> Check:
    def check(ev: Evidence) -> tuple[bool | None, str]:
        if ev.summary.get("kernels_per_forward") is None:
            return None, "no device activity recorded"
        apis = sorted({e.name for f in ev.forwards for e in f.runtime_calls if "Launch" in e.name})
        return api in apis, f"launch APIs: {', '.join(apis) or 'none'}"

    return check


def both(*checks: Check) -> Check:
    """All checks hold; None (cannot tell) when one cannot tell and none fails."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        results = [c(ev) for c in checks]
        holds = [h for h, _ in results]
        verdict = False if False in holds else (None if None in holds else True)
        return verdict, "; ".join(dict.fromkeys(o for _, o in results))

    return check


FUSED_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"
SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
# Kernel families, matched on the start of the (demangled) name, so that no other kernel that
# merely contains the word (vLLM's reshape_and_cache_flash_kernel, cuDNN's flash_fprop) counts.
SDPA_FLASH_KERNEL = r"^(void )?pytorch_flash::flash_fwd\w*kernel"
SDPA_EFFICIENT_KERNEL = r"^(void )?fmha_cutlassF"
CUDNN_KERNEL = r"^(void )?cudnn_generated"
OUR_CUDA_KERNEL = r"^(void )?(attn::)?flash_fwd_kernel\b"
OUR_TRITON_KERNEL = r"^_attn_fwd\b"

CLAIMS: dict[str, list[Claim]] = {
    "naive": [
        Claim(
            "Masking clones the scores: aten::clone under aten::masked_fill.",
            "cpu",
            op_under("aten::masked_fill", "aten::clone"),
        ),
        Claim(
            "5 kernels per forward, plus one device-to-device Memcpy: the clone in masked_fill.",
            "cuda",
            both(kernel_count(5), memcpys("DtoD", 1)),
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
            both(kernel_count(5), memcpys("DtoD", 0)),
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
            "10 or more kernels per forward, the mask rebuilt by a tril kernel.",
            "cuda",
            both(kernel_count(10, at_least=True), kernel_matching("tril")),
        ),
    ],
    "sdpa_efficient": [
        Claim(
            "One fused fmha_cutlassF kernel per forward.",
            "cuda",
            one_kernel_matching(SDPA_EFFICIENT_KERNEL),
        ),
    ],
    "sdpa_flash": [
        Claim(
            f"One fused op, {FUSED_CPU}, and no separate softmax.",
            "cpu",
            both(present(FUSED_CPU), absent(*SOFTMAX_OPS)),
        ),
        Claim(
            "One kernel per forward, of FlashAttention's pytorch_flash::flash_fwd family.",
            "cuda",
            one_kernel_matching(SDPA_FLASH_KERNEL),
        ),
    ],
    "sdpa_cudnn": [
        Claim(
            "One cudnn_generated kernel per forward, launched with cuLaunchKernelEx, and no aten::transpose.",
            "cuda",
            both(
                one_kernel_matching(CUDNN_KERNEL),
                launched_with("cuLaunchKernelEx"),
                absent("aten::transpose"),
            ),
        ),
    ],
    "custom_cpu": [
        Claim(
            "One op from our library: attn::flash_attention_forward, and no separate softmax.",
            "cpu",
            both(present("attn::flash_attention_forward"), absent(*SOFTMAX_OPS, "aten::bmm")),
        ),
    ],
    "custom_cuda": [
        Claim(
            "One kernel per forward: our flash_fwd_kernel.",
            "cuda",
            one_kernel_matching(OUR_CUDA_KERNEL),
        ),
    ],
    "custom_triton": [
        Claim(
            "One kernel per forward: the Triton _attn_fwd.",
            "cuda",
            one_kernel_matching(OUR_TRITON_KERNEL),
        ),
    ],
}


def ops_per_forward(name: str, expected: int) -> Check:
    """Exactly `expected` events called `name` in every forward."""

    def check(ev: Evidence) -> tuple[bool, str]:
        counts = sorted({sum(e.name == name for e in f.cpu_events) for f in ev.forwards})
        seen = " or ".join(str(n) for n in counts) or "0"
        return counts == [expected], f"{seen} {name} per forward"

    return check


def generated_kernel(pattern: str) -> Check:
    """A CPU event whose name matches `pattern` (Inductor names its generated kernels this way)."""

    def check(ev: Evidence) -> tuple[bool, str]:
        hits = sorted({n for n in ev.names() if re.search(pattern, n)})
        return bool(hits), hits[0] if hits else f"no event matching {pattern}"

    return check


def compile_costs_forwards(at_least: int) -> Check:
    """The first call (tracing, code generation and build, or a load from Inductor's cache) costs
    at least `at_least` profiled forwards."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        seconds = (ev.summary.get("compile_seconds") or {}).get("first")
        if seconds is None:
            return None, "the first call was not timed (a run of the example times it)"
        ratio = seconds * 1e6 / ev.summary["cpu_time_us"]
        return ratio >= at_least, f"first call {seconds:.2f} s = {ratio:,.0f} profiled forwards"

    return check


SDPA_OPS = (
    FUSED_CPU,
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
)
COMPILED_CLAIMS: dict[str, list[Claim]] = {
    "compiled_naive": [
        Claim(
            "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
            "cpu",
            compile_costs_forwards(10),
        ),
        Claim(
            "Compile keeps the masked_fill version as two aten::bmm around one generated "
            "softmax-and-mask kernel, and calls no SDPA op.",
            "cpu",
            both(
                ops_per_forward("aten::bmm", 2),
                generated_kernel(r"cpp_fused__softmax.*masked_fill"),
                absent(*SDPA_OPS),
            ),
        ),
        Claim(
            "On a GPU the generated code is Triton: a kernel fusing softmax and masked_fill.",
            "cuda",
            kernel_matching(r"^triton_\w*fused_\w*_softmax\w*masked_fill"),
        ),
    ],
    "compiled_additive": [
        Claim(
            "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
            "cpu",
            compile_costs_forwards(10),
        ),
        Claim(
            f"With an additive mask, Inductor's pattern matcher calls SDPA: one {FUSED_CPU} per "
            "forward and no aten::bmm.",
            "cpu",
            both(ops_per_forward(FUSED_CPU, 1), absent("aten::bmm")),
        ),
    ],
    "flex_causal": [
        Claim(
            "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
            "cpu",
            compile_costs_forwards(10),
        ),
        Claim(
            "Compiled FlexAttention is one generated kernel per forward, with no aten::bmm or softmax.",
            "cpu",
            both(generated_kernel(r"^graph_\d+_kernel$"), absent("aten::bmm", *SOFTMAX_OPS)),
        ),
        Claim(
            "On a GPU, one generated Triton template kernel (triton_tem_) per forward.",
            "cuda",
            one_kernel_matching(r"^triton_tem_"),
        ),
    ],
    "flex_sliding_window": [
        Claim(
            "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
            "cpu",
            compile_costs_forwards(10),
        ),
        Claim(
            "The sliding window compiles to one generated kernel per forward too: the mask is code.",
            "cpu",
            both(generated_kernel(r"^graph_\d+_kernel$"), absent("aten::bmm", *SOFTMAX_OPS)),
        ),
        Claim(
            "On a GPU, one generated Triton template kernel (triton_tem_) per forward.",
            "cuda",
            one_kernel_matching(r"^triton_tem_"),
        ),
    ],
}
CLAIMS.update(COMPILED_CLAIMS)

# The decoding chapter's claims live beside their own building blocks (decode_claims.py, which
# imports the ones above: hence the import here, after them).
from attn.profiling.decode_claims import DECODE_CLAIMS  # noqa: E402

CLAIMS.update(DECODE_CLAIMS)


def claims_for(variant: str, device_type: str | None = None) -> list[Claim]:
    """The variant's claims, all of them or those about one device type."""
    return [c for c in CLAIMS.get(variant, []) if device_type in (None, c.device_type)]


def evaluate(variant: str, device_type: str, evidence: Evidence) -> list[dict]:
    """Check each claim about this device type: [{"text", "holds", "observed"}].

    `holds` is True or False, or None when the trace cannot tell (e.g. shapes were not recorded).
    """
    results = []
    for claim in claims_for(variant, device_type):
        holds, observed = claim.check(evidence)
        results.append({"text": claim.text, "holds": holds, "observed": observed})
    return results
