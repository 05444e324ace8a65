"""Claims: what each variant's trace should show, checked against every run on every hardware.

A claim is a sentence plus a check over the run's evidence. The check returns whether the claim
holds and what was actually observed; a claim that does not hold is a finding, not an error.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

from attn.profiling.trace import Forward, top_level


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
    # True when the verdict needs a run large enough for the score matrix to dominate (times, gaps
    # between ops, fixed-size tile buffers): checked on every run like any claim, but a test's tiny
    # run cannot be expected to show it.
    at_scale: bool = False


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


def copies_of_scores_and_scalar(ev: Evidence) -> tuple[bool | None, str]:
    """aten::copy_ runs twice over: on the scores (under aten::clone) and on a 0-dim scalar (under
    aten::mul, the Python float converted to a tensor)."""
    found = score_shape(ev)
    copies = [e for f in ev.forwards for e in f.cpu_events if e.name == "aten::copy_"]
    if found is None or any("Input Dims" not in e.args for e in copies):
        return None, "input shapes not recorded (the trace was taken without record_shapes)"
    shapes = {json_shape(e.args["Input Dims"][0]) for e in copies}
    parents = {name for name in ("aten::clone", "aten::mul") if "aten::copy_" in ev.under(name)}
    holds = {json_shape(found[0]), "[]"} <= shapes and parents == {"aten::clone", "aten::mul"}
    return holds, (
        f"aten::copy_ of {' and of '.join(sorted(shapes, key=len, reverse=True))}; "
        f"under {', '.join(sorted(parents)) or 'neither aten::clone nor aten::mul'}"
    )


def json_shape(dims: list) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def top_level_ops(*names: str) -> Check:
    """Every forward's own ops (those directly under the range) are exactly these, in this order."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        seen = [[e.name for e in top_level(f)] for f in ev.forwards]
        holds = all(ops == list(names) for ops in seen)
        odd = next((ops for ops in seen if ops != list(names)), seen[0])
        return holds, " → ".join(odd) or "no ops"

    return check


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


# Bytes per element of the dtypes the profiler names in "Input type".
ELEMENT_BYTES = {"double": 8, "float": 4, "c10::BFloat16": 2, "c10::Half": 2}


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def score_shape(ev: Evidence) -> tuple[list[int], str] | None:
    """The [batch, heads, seq_q, seq_k] shape of the score matrix and its dtype's name, from the
    recorded input shapes: the softmax's input, else q and k of the first op given both (a fused
    op). None when shapes were not recorded."""
    events = [e for f in ev.forwards for e in f.cpu_events if e.args.get("Input Dims")]
    for e in events:
        if e.name in SOFTMAX_OPS and len(e.args["Input Dims"][0]) == 4:
            return list(e.args["Input Dims"][0]), (e.args.get("Input type") or [""])[0]
    for e in events:
        dims = e.args["Input Dims"]
        if len(dims) >= 2 and len(dims[0]) == len(dims[1]) == 4 and dims[0][3] == dims[1][3]:
            (b, h, seq_q, _), seq_k = dims[0], dims[1][2]
            return [b, h, seq_q, seq_k], (e.args.get("Input type") or [""])[0]
    return None


def score_matrix_bytes(ev: Evidence) -> tuple[int, str] | None:
    """Bytes of one score matrix and a description of it; None when shapes were not recorded."""
    found = score_shape(ev)
    if found is None or found[1] not in ELEMENT_BYTES:
        return None
    dims, dtype = found
    return math.prod(dims) * ELEMENT_BYTES[dtype], f"{dims} {dtype}"


def on_scores(*names: str) -> Check:
    """Each op named takes the [batch, heads, seq_q, seq_k] scores as its first input."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = score_shape(ev)
        if found is None:
            return None, "input shapes not recorded (the trace was taken without record_shapes)"
        shapes = {
            name: [e.args["Input Dims"][0] for f in ev.forwards for e in f.cpu_events
                   if e.name == name and e.args.get("Input Dims")]
            for name in names
        }  # fmt: skip
        missing = [n for n, dims in shapes.items() if found[0] not in dims]
        seen = "; ".join(f"{n} on {dims[0] if dims else 'nothing'}" for n, dims in shapes.items())
        return not missing, seen

    return check


def never_on_scores(name: str) -> Check:
    """Ops named `name` run, and none takes the [batch, heads, seq_q, seq_k] scores as input."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        found = score_shape(ev)
        if found is None:
            return None, "input shapes not recorded (the trace was taken without record_shapes)"
        dims = [
            e.args["Input Dims"][0]
            for f in ev.forwards
            for e in f.cpu_events
            if e.name == name and e.args.get("Input Dims")
        ]
        shown = ", ".join(str(d) for d in dict.fromkeys(map(tuple, dims))) or "none"
        return bool(dims) and found[0] not in dims, f"{name} inputs: {shown}".replace(
            "(", "["
        ).replace(")", "]")

    return check


def peak_under_one_score_matrix(ev: Evidence) -> tuple[bool | None, str]:
    """The forward's peak memory is less than one score matrix: the scores are never allocated."""
    peak = ev.summary.get("peak_memory_bytes")
    if peak is None:
        return None, "memory not recorded (the trace was taken without profile_memory)"
    found = score_matrix_bytes(ev)
    if found is None:
        return None, "input shapes not recorded (the trace was taken without record_shapes)"
    scores, what = found
    return (
        peak < scores,
        f"peak {_mib(peak)} = {peak / scores:.2f} × one score matrix ({_mib(scores)}: {what})",
    )


def peak_in_score_matrices(expected: int) -> Check:
    """The forward's peak memory holds `expected` score matrices at once (and less than one more)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        peak = ev.summary.get("peak_memory_bytes")
        if peak is None:
            return None, "memory not recorded (the trace was taken without profile_memory)"
        found = score_matrix_bytes(ev)
        if found is None:
            return None, "the softmax's input shape was not recorded (record_shapes)"
        scores, what = found
        ratio = peak / scores
        return (
            math.floor(ratio) == expected,
            f"peak {_mib(peak)} = {ratio:.2f} × one score matrix ({_mib(scores)}: {what})",
        )

    return check


def costs_more(slow: str, fast: str) -> Check:
    """Per forward, the events named `slow` take more CPU time (inclusive) than those named `fast`."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        n = max(len(ev.forwards), 1)
        times = {
            name: sum(e.dur for f in ev.forwards for e in f.cpu_events if e.name == name) / n
            for name in (slow, fast)
        }
        if not times[slow] or not times[fast]:
            missing = [name for name, t in times.items() if not t]
            return None, f"not in the trace: {', '.join(missing)}"
        ratio = times[slow] / times[fast]
        return (
            ratio > 1,
            f"{slow} {_ms(times[slow])}, {fast} {_ms(times[fast])} per forward ({ratio:.1f}×)",
        )

    return check


END = "the end"  # where a gap is: after the range's last op, before the range itself ends


def gaps(forward: Forward) -> dict[str, float]:
    """Time between the range's top-level ops, keyed by where: 'after aten::x' or END."""
    found: dict[str, float] = {}
    previous, end = "the start", forward.range.ts
    for e in top_level(forward):
        where = f"after {previous}"
        found[where] = found.get(where, 0.0) + max(e.ts - end, 0.0)
        previous, end = e.name, e.end
    found[END] = found.get(END, 0.0) + max(forward.range.end - end, 0.0)
    return found


def longest_gaps(*where: str, alone: bool = False) -> Check:
    """In every forward the longest gaps between ops are at `where` (and, with alone, every other
    gap is under a tenth of the shortest of them)."""

    def check(ev: Evidence) -> tuple[bool | None, str]:
        if not ev.forwards:
            return None, "no forward recorded"
        holds = True
        for f in ev.forwards:
            ranked = sorted(gaps(f).items(), key=lambda kv: -kv[1])
            top, rest = ranked[: len(where)], ranked[len(where) :]
            holds &= {w for w, _ in top} == set(where)
            if alone and rest and top:
                holds &= rest[0][1] < 0.1 * top[-1][1]
        n = len(ev.forwards)
        mean: dict[str, float] = {}
        for f in ev.forwards:
            for w, t in gaps(f).items():
                mean[w] = mean.get(w, 0.0) + t / n
        ranked = sorted(mean.items(), key=lambda kv: -kv[1])
        self_us = sum(mean.values())
        total = sum(f.range.dur for f in ev.forwards) / n
        shown = ", ".join(
            f"{_ms(t)} {'at the end' if w == END else w}" for w, t in ranked[: len(where) + 1]
        )
        return holds, (
            f"{_ms(self_us)} per forward in no op ({self_us / total:.0%} of attn_fwd); "
            f"longest gaps: {shown}"
        )

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
            "The clone costs more CPU time than the scale step: aten::clone copies a "
            "[seq_q, seq_k] matrix per head, aten::mul scales q, only [seq_q, head_dim].",
            "cpu",
            costs_more("aten::clone", "aten::mul"),
            at_scale=True,
        ),
        Claim(
            "Peak memory is two score matrices, not three: the unmasked scores are freed as soon "
            "as their masked copy replaces them, before the softmax writes its output.",
            "cpu",
            peak_in_score_matrices(2),
        ),
        Claim(
            "Under aten::matmul: aten::expand and aten::reshape, which only make views, and "
            "aten::bmm, which multiplies.",
            "cpu",
            both(
                op_under("aten::matmul", "aten::expand"),
                op_under("aten::matmul", "aten::reshape"),
                op_under("aten::matmul", "aten::bmm"),
            ),
        ),
        Claim(
            "The two longest gaps between ops inside attn_fwd come after aten::masked_fill and at "
            "its end: where score-sized tensors are freed, which takes time but is no op.",
            "cpu",
            longest_gaps("after aten::masked_fill", END),
            at_scale=True,
        ),
        Claim(
            "The one aten::copy_ row of the table adds up two different copies: the scores, under "
            "aten::clone, and a 0-dim scalar, the scale, under aten::mul.",
            "cpu",
            copies_of_scores_and_scalar,
        ),
        Claim(
            "The forward's own ops follow the code: aten::mul (q by the scale), aten::transpose "
            "(of k), aten::matmul, aten::masked_fill, aten::softmax, aten::matmul.",
            "cpu",
            top_level_ops(
                "aten::mul",
                "aten::transpose",
                "aten::matmul",
                "aten::masked_fill",
                "aten::softmax",
                "aten::matmul",
            ),
        ),
        Claim(
            "5 kernels per forward, plus one device-to-device Memcpy: the clone in masked_fill.",
            "cuda",
            both(kernel_count(5), memcpys("DtoD", 1)),
        ),
        Claim(
            "Peak memory is two score matrices, not three (the scores and the softmax output).",
            "cuda",
            peak_in_score_matrices(2),
        ),
    ],
    "inplace": [
        Claim(
            "No aten::clone under attn_fwd, and no aten::copy_ of the scores (only of the scale factor).",
            "cpu",
            both(absent("aten::clone"), only_scalar_copies),
        ),
        Claim(
            "Peak memory is still two score matrices, as in naive: the scores and the softmax "
            "output. Masking in place saves an allocation and a copy, not the peak.",
            "cpu",
            peak_in_score_matrices(2),
        ),
        Claim(
            "The one long gap between ops inside attn_fwd is at its end, where the scores and the "
            "softmax output are freed: masking in place frees nothing.",
            "cpu",
            longest_gaps(END, alone=True),
            at_scale=True,
        ),
        Claim(
            "5 kernels per forward and no Memcpy.",
            "cuda",
            both(kernel_count(5), memcpys("DtoD", 0)),
        ),
        Claim(
            "Peak memory is still two score matrices, as in naive: the scores and the softmax output.",
            "cuda",
            peak_in_score_matrices(2),
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
            "Scales q and k before the product, never the scores: no aten::mul takes a "
            "[seq_q, seq_k] input.",
            "cpu",
            never_on_scores("aten::mul"),
        ),
        Claim(
            "Makes extra full passes over the [seq_q, seq_k] scores: aten::add_ adds the mask, "
            "aten::isneginf and aten::all look for fully masked rows.",
            "cpu",
            on_scores("aten::add_", "aten::isneginf", "aten::all"),
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
            "Peak memory stays under one score matrix: the [seq_q, seq_k] scores are never "
            "allocated.",
            "cpu",
            peak_under_one_score_matrix,
            at_scale=True,
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
        Claim(
            "Peak memory stays under one score matrix: the [seq_q, seq_k] scores are never "
            "allocated.",
            "cpu",
            peak_under_one_score_matrix,
            at_scale=True,
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


# --- the compiled and Flex chapter ---------------------------------------------------------


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
        seconds = (ev.summary.get("first_calls_seconds") or {}).get("first")
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
        Claim(
            "The mask reaches SDPA as a tensor: a generated kernel builds it (full, triu) on every "
            "forward.",
            "cpu",
            generated_kernel(r"cpp_fused_\w*full_triu"),
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

# --- claims about a hardware set's benchmark.json (rows of `python -m attn.profiling.benchmark`) ----


@dataclasses.dataclass(frozen=True)
class BenchmarkClaim:
    """A sentence about the benchmark rows of one hardware set, and its check over those rows."""

    text: str
    device_type: str
    check: Callable[[list[dict]], tuple[bool | None, str]]


def _span(values: list) -> str:
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]} to {values[-1]}"


def benchmark_shapes(rows: list[dict]) -> str:
    """What the rows measured, in words: 'batch 1 × 8 heads, seq 512 to 4096, head_dim 64, 128'."""
    sizes = sorted({(r.get("batch"), r.get("heads")) for r in rows})
    size = ", ".join(f"batch {b} × {h} heads" for b, h in sizes if b is not None and h is not None)
    dims = ", ".join(str(d) for d in sorted({r["head_dim"] for r in rows}))
    parts = [size] if size else []
    return ", ".join(parts + [f"seq {_span([r['seq'] for r in rows])}", f"head_dim {dims}"])


def ratio_to_flash_below(variant: str, limit: float, is_causal: bool | None = None):
    """At every benchmarked shape (of one masking, if given), variant's time ÷ sdpa_flash's < limit."""

    def check(rows: list[dict]) -> tuple[bool | None, str]:
        mine = [
            r
            for r in rows
            if r.get("variant") == variant
            and r.get("ratio_to_flash") is not None
            and (is_causal is None or r.get("is_causal") == is_causal)
        ]
        if not mine:
            return None, f"no {variant} row with a ratio to sdpa_flash in benchmark.json"
        lo = min(mine, key=lambda r: r["ratio_to_flash"])
        hi = max(mine, key=lambda r: r["ratio_to_flash"])
        where = lambda r: f"seq {r['seq']}, head_dim {r['head_dim']}"  # noqa: E731
        masking = {True: " causal", False: " non-causal", None: ""}[is_causal]
        return hi["ratio_to_flash"] < limit, (
            f"{lo['ratio_to_flash']:.2f}× ({where(lo)}) to {hi['ratio_to_flash']:.2f}× ({where(hi)}) "
            f"over {len(mine)}{masking} shapes: {benchmark_shapes(mine)}"
        )

    return check


def slower_than(variant: str, other: str):
    """At every shape benchmarked with both, variant takes more time than other (same run)."""

    def check(rows: list[dict]) -> tuple[bool | None, str]:
        key = lambda r: (r.get("batch"), r.get("heads"), r["seq"], r["head_dim"], r["is_causal"])  # noqa: E731
        theirs = {key(r): r["time_us"] for r in rows if r.get("variant") == other}
        pairs = [
            (r, r["time_us"] / theirs[key(r)])
            for r in rows
            if r.get("variant") == variant and theirs.get(key(r))
        ]
        if not pairs:
            return None, f"no shape in benchmark.json has both {variant} and {other}"
        lo, hi = min(x for _, x in pairs), max(x for _, x in pairs)
        mine = [r for r, _ in pairs]
        return lo > 1, (
            f"{variant} ÷ {other}: {lo:.2f}× to {hi:.2f}× over {len(pairs)} shapes: "
            f"{benchmark_shapes(mine)}"
        )

    return check


BENCHMARK_CLAIMS: list[BenchmarkClaim] = [
    BenchmarkClaim(
        "custom_cpu takes less time than sdpa_flash (time ÷ sdpa_flash under 1) at every causal "
        "shape benchmarked.",
        "cpu",
        ratio_to_flash_below("custom_cpu", 1.0, is_causal=True),
    ),
    BenchmarkClaim(
        "custom_cpu stays within 1.25× of sdpa_flash's time at every shape benchmarked, causal "
        "or not.",
        "cpu",
        ratio_to_flash_below("custom_cpu", 1.25),
    ),
    BenchmarkClaim(
        "sdpa_math takes more time than the in-place module at every shape benchmarked.",
        "cpu",
        slower_than("sdpa_math", "inplace"),
    ),
    BenchmarkClaim(
        "custom_cuda stays within 2× of sdpa_flash's time at every shape benchmarked.",
        "cuda",
        ratio_to_flash_below("custom_cuda", 2.0),
    ),
    BenchmarkClaim(
        "custom_triton stays within 2× of sdpa_flash's time at every shape benchmarked.",
        "cuda",
        ratio_to_flash_below("custom_triton", 2.0),
    ),
    BenchmarkClaim(
        "sdpa_math takes more time than the in-place module at every shape benchmarked.",
        "cuda",
        slower_than("sdpa_math", "inplace"),
    ),
]


def evaluate_benchmark(rows: list[dict], device_type: str) -> list[dict]:
    """Check each benchmark claim about this device type: [{"text", "holds", "observed"}]."""
    return [
        dict(zip(("text", "holds", "observed"), (c.text, *c.check(rows)), strict=True))
        for c in BENCHMARK_CLAIMS
        if c.device_type == device_type
    ]


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
