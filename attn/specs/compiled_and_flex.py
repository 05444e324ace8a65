"""The compiled and Flex chapter's variants (docs/compiled-and-flex.md): under torch.compile."""

from __future__ import annotations

from attn.specs.record import SDPA_CPU_OP, Spec, V
from attn.traces.claims.claim import Claim, both
from attn.traces.claims.trace_checks import (
    absent,
    cold_call_costs_more,
    compile_costs_forwards,
    generated_kernel,
    kernel_matching,
    one_kernel_matching,
    ops_per_forward,
    runs_a_recompilation,
    second_call_cheaper,
)
from attn.traces.read.patterns import (
    FLEX_CPU_KERNEL,
    FLEX_KERNEL,
    FUSED_CPU,
    MASK_BUILD_CPP,
    SDPA_OPS,
    SOFTMAX_MASK_CPP,
    SOFTMAX_MASK_TRITON,
    SOFTMAX_OPS,
)

COMPILED = ("examples/compiled_attention.py",), ("attn/compiled.py", "attn/naive.py")
FIRST_CALL = Claim(  # every compiled and Flex variant's
    "first-call-costs", "cpu",
    "The first call, which compiles (or loads Inductor's cache), costs more than 10 forwards.",
    compile_costs_forwards(10), at_scale=True,
)  # fmt: skip
COLD_FIRST_CALL = Claim(  # the same variants'
    "cold-first-call-costs-more", "cpu",
    "A cold start (the first call on empty compile caches) costs more than twice its rerun's "
    "first call, and more than the first call of a variant compiled after it on the caches it "
    "left (Inductor's setup there, that variant's graph new).",
    cold_call_costs_more(2, later=1),
)  # fmt: skip
TEMPLATE_KERNEL = Claim(  # both Flex variants'
    "gpu-one-template-kernel", "cuda",
    "On a GPU, one generated Triton template kernel (triton_tem_) per forward.",
    one_kernel_matching(FLEX_KERNEL),
)  # fmt: skip
FLEX = ("examples/flex_attention.py",), ("attn/flex.py",)


def generated(name, title, lesson, make, files, flags, focus, **facts) -> Spec:
    """A compiled or FlexAttention variant: its module under torch.compile."""
    (script,), sources = files
    return Spec(
        name, title, lesson, lambda: V.GeneratedVariant(make()), "compiled-and-flex.md",
        (script, *flags), sources, focus, times_first_calls=True, **facts,
    )  # fmt: skip


# fmt: off
SPECS: tuple[Spec, ...] = (
    generated(
        "compiled_naive", "torch.compile: naive attention",
        "masked_fill stays two matmuls around one generated softmax kernel",
        lambda: V.CompiledAttention(V.NaiveAttention()),
        COMPILED, ("--mask", "masked_fill"), SOFTMAX_MASK_CPP,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("runs-a-recompilation", "cpu",
                "Its profiled forwards run in a recompilation: the second number of their "
                "Torch-Compiled Region is 1 or more (0 is the frame's first compilation).",
                runs_a_recompilation),
            Claim("bmm-around-generated-softmax", "cpu",
                "Compile keeps the masked_fill version as two aten::bmm around one generated "
                "softmax-and-mask kernel, and calls no SDPA op.",
                both(
                    ops_per_forward("aten::bmm", 2),
                    generated_kernel(SOFTMAX_MASK_CPP),
                    absent(*SDPA_OPS),
                )),
            Claim("gpu-triton-softmax-kernel", "cuda",
                "On a GPU the generated code is Triton: a kernel fusing softmax and masked_fill.",
                kernel_matching(SOFTMAX_MASK_TRITON)),
        ),
        diff_with=("naive",),
    ),
    generated(
        "compiled_additive", "torch.compile: additive mask",
        "an additive mask is recognised: Inductor calls SDPA's fused kernel",
        lambda: V.CompiledAttention(V.AdditiveMaskAttention()),
        COMPILED, ("--mask", "additive"), SDPA_CPU_OP,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("second-call-is-cheap", "cpu",
                "The second call costs under a tenth of the first: it reuses the compiled code.",
                second_call_cheaper(10), at_scale=True),
            Claim("calls-sdpa", "cpu",
                f"With an additive mask, Inductor's pattern matcher calls SDPA: one {FUSED_CPU} "
                "per forward and no aten::bmm.",
                both(ops_per_forward(FUSED_CPU, 1), absent("aten::bmm"))),
            Claim("mask-built-each-forward", "cpu",
                "The mask reaches SDPA as a tensor: a generated kernel builds it (full, triu) on "
                "every forward.",
                generated_kernel(MASK_BUILD_CPP)),
        ),
    ),
    generated(
        "flex_causal", "FlexAttention: causal",
        "a mask written as a Python function, compiled into one kernel",
        lambda: V.FlexAttention(),
        FLEX, ("--mask", "causal"), FLEX_CPU_KERNEL,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("one-generated-kernel", "cpu",
                "Compiled FlexAttention is one generated kernel per forward, with no aten::bmm or "
                "softmax.",
                both(generated_kernel(FLEX_CPU_KERNEL), absent("aten::bmm", *SOFTMAX_OPS))),
            TEMPLATE_KERNEL,
        ),
    ),
    generated(
        "flex_sliding_window", "FlexAttention: sliding window of 256 keys",
        "tiles outside the window are skipped, not computed and masked",
        lambda: V.FlexAttention(V.sliding_window(256)),
        FLEX, ("--mask", "sliding_window"), FLEX_CPU_KERNEL,
        claims=(
            FIRST_CALL,
            COLD_FIRST_CALL,
            Claim("one-generated-kernel", "cpu",
                "The sliding window compiles to one generated kernel per forward too: the mask is "
                "code.",
                both(generated_kernel(FLEX_CPU_KERNEL), absent("aten::bmm", *SOFTMAX_OPS))),
            TEMPLATE_KERNEL,
        ),
    ),
)
# fmt: on
