"""Attention by name: the one table of op and kernel names that say which implementation ran.

`diagnose` and the specs' kernel claims read it. A row's pattern is searched in an event's name: a
CPU op (SDPA's backend ops, custom ops), a kernel Inductor generated (named on the CPU side too),
or a GPU kernel. The first row that matches wins, so rows that only look like attention (a KV-cache
write, Inductor's layout kernels named after the ops fused into them) come before the broad ones,
and backward rows before the forward rows of their family. A GPU kernel that matches no row but
whose name mentions attention is reported as unknown, never guessed.
"""

from __future__ import annotations

import dataclasses
import functools
import re

sdpa = "sdpa_{}".format  # SDPA's implementations are named after its backends: sdpa_flash, ...

# Kernel families are matched on the start of the (demangled) name, so that no other kernel that
# merely contains the word (vLLM's reshape_and_cache_flash_kernel, cuDNN's flash_fprop) counts.
FLASH_KERNEL = r"^(void )?pytorch_flash::flash_fwd\w*kernel"
CUTLASS_KERNEL = r"^(void )?fmha_cutlassF"
CUDNN_KERNEL = r"^(void )?cudnn_generated\w*sdpa"
FLEX_KERNEL = r"^triton_tem_fused(\w*_flex_\w+|_\d+)$"  # Inductor's template; older names no origin
FLEX_CPU_KERNEL = r"^graph_\d+_kernel$"  # the same template in C++, on a CPU
OUR_CUDA_KERNEL = r"^(void )?(attn::)?flash_fwd_kernel\b"
OUR_TRITON_KERNEL = r"^_attn_fwd\b"
OUR_CPU_BACKWARD = "attn::flash_attention_backward"  # the C++ op's fused backward
# The backwards of our CUDA and Triton kernels: the delta (preprocess) kernel starts a call.
# Its kernels sit in an anonymous namespace, which a demangled name may spell out.
OUR_CUDA_BACKWARD_KERNEL = (
    r"^(void )?(attn::|\(anonymous namespace\)::)?flash_bwd_(delta|dkdv|dq)_kernel\b"
)
OUR_TRITON_BACKWARD_KERNEL = r"^_attn_bwd_(preprocess|dkdv|dq)$"
TUTORIAL_KERNEL = r"^_attn_fwd\w*$|^_fwd_kernel\w*$"  # Triton's tutorial names its kernel so
# Inductor's generated code, and the ranges it runs in: a call inside them was compiled.
GENERATED = r"^(graph_\d+_)?(cpp|triton)_\w+|" + FLEX_CPU_KERNEL
ANY_COMPILED_REGION = r"^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph)"
# The eager pattern: a product, a softmax, a product. Generated softmaxes count (compiled eager).
MHA_FASTPATH = "aten::_native_multi_head_attention"  # nn.MultiheadAttention in inference
MHA_NEED_WEIGHTS = 10  # need_weights among its concrete inputs (its schema's 11th argument)
# Its in- and out-projections, and the bias and scale it folds into q, k and v: not attention's work.
MHA_PROJECTIONS = r"^aten::(mm|addmm|linear|_transform_bias_rescale_qkv)$"
PROJECTIONS = "projections"
BADDBMM = "aten::baddbmm"  # a product whose first input is added: its output is the last two's
EINSUM = "aten::einsum"  # a product its equation spells
MATMUL_OPS = ("aten::matmul", "aten::bmm", "aten::mm", BADDBMM, EINSUM)
SOFTMAX = r"^aten::(_safe_)?_?softmax$|^(graph_\d+_)?(cpp|triton)_\w*fused_\w*(?<!log)_softmax"
REPEAT_OPS = ("aten::repeat_interleave", "aten::repeat")
# A device synchronize: the CPU waits for the GPU (cudaStreamWaitEvent is GPU-side, not this).
SYNCHRONIZE = r"(cuda|hip)\w*Synchronize"
ATTENTION_WORDS = r"(?i)attn|attention|fmha|flash|sdpa|paged|\bmha"
# Inductor's pointwise and reduction kernels (Triton's, and C++ on a CPU) are named after the ops
# fused into them: one that lays out SDPA's inputs or builds its mask says
# "scaled_dot_product_flash_attention" without being attention.
LAYOUT_KERNEL = r"^(graph_\d+_)?(triton_(poi|red|per)|cpp)_"
# An autograd node as the backward records it (its "Sequence number" ties it to its forward).
AUTOGRAD_NODE = "autograd::engine::evaluate_function: "

# The names the claims (attn.specs) and their checks match, and diff, timeline and markdown with
# them. ATen's namespace, and ATen's ops by what they do:
ATEN = "aten::"  # an op in ATen's namespace: what the table of ops counts
FUSED_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"  # SDPA's one fused op on a CPU
FUSED_CPU_BACKWARD = f"{FUSED_CPU}_backward"
SDPA_OPS = (
    FUSED_CPU,
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
)
SDPA_BACKEND_OP = r"^aten::_scaled_dot_product"  # any of SDPA's backend ops
SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")  # SOFTMAX's eager ops
CLONE, COPY = "aten::clone", "aten::copy_"  # the ops that copy a tensor's data
MUL = "aten::mul"  # q times the scale: a Python float, converted to a 0-dim tensor under it
REPEAT_INTERLEAVE = "aten::repeat_interleave"  # copies each KV head to its query heads (GQA)
# What moves data, for diff's headline, and ATen's bookkeeping (views, empty allocations).
MOVES_DATA = r"(?i)copy|clone|memcpy|memset|repeat|contiguous|\bcat\b|stack"
BOOKKEEPING_OPS = frozenset(
    ATEN + name
    for name in (
        "as_strided alias detach empty empty_like empty_strided expand flatten lift_fresh permute "
        "reshape _reshape_alias resolve_conj resolve_neg select slice squeeze t transpose "
        "unsqueeze _unsafe_view view"
    ).split()
)
OP_NAME = r"\b(?:aten|attn)::\w+"  # an op's name inside a sentence (markdown shows it as code)
# Device work by name: a copy kernel (the elementwise direct_copy a clone or copy_ launches), a
# device-to-device Memcpy, a kernel that builds a causal mask (tril), one that names softmax in any
# case (cunn_SoftMaxForward too).
COPY_KERNEL = r"(?i)copy"
MEMCPY_DTOD = r"^Memcpy DtoD"
TRIL_KERNEL = r"tril"
SOFTMAX_KERNEL = r"(?i)softmax"
FLASH_BACKWARD_KERNEL = r"^(void )?pytorch_flash::flash_bwd"  # any of FlashAttention's backward
AOTRITON_KERNEL = r"^attn_fwd$"  # SDPA's flash backend on ROCm
PAGED_ROCM_KERNEL = r"^(void )?paged_attention_ll4mi_QKV"  # vLLM's paged attention on ROCm
# Inductor's generated code, by what it fused: any Triton kernel, its template kernels (Flex's,
# forward and backward), softmax with masked_fill (C++ on a CPU, Triton on a GPU), and the
# additive causal mask built (full, triu).
INDUCTOR_TRITON = r"^triton_"
INDUCTOR_TEMPLATE = r"^triton_tem_"
SOFTMAX_MASK_CPP = r"cpp_fused__softmax\w*masked_fill"
SOFTMAX_MASK_TRITON = r"^triton_\w*fused_\w*_softmax\w*masked_fill"
MASK_BUILD_CPP = r"cpp_fused_\w*full_triu"
# Communication between ranks (torch.distributed). gloo's and NCCL's process groups record each
# operation as a user_annotation span ("gloo:send", "nccl:all_reduce") from its start until it is
# done; the c10d:: ops are the calls that start them. On a GPU, NCCL's work is its own kernels
# (ncclKernel_ before NCCL 2.19, ncclDevKernel_ after), on a stream of their own.
COMM_SPAN = r"^(gloo|nccl):"
SEND_SPAN = r"^(gloo|nccl):send$"
RECV_SPAN = r"^(gloo|nccl):recv$"
COMM_OP = r"^c10d::"
NCCL_KERNEL = r"^(void )?nccl(Dev)?Kernel_"
NCCL_RECV_KERNEL = r"^(void )?nccl(Dev)?Kernel_(SendRecv|Recv)"  # a point-to-point receive
# attn/ring.py's block_attention takes one row maximum per K/V block: one of these per block.
RING_BLOCK_OP = "aten::amax"
# ANY_COMPILED_REGION is any range compiled code runs in; this is only Dynamo's own, numbered
# <frame>/<compile>: its second number says which compilation of the frame runs.
NUMBERED_COMPILED_REGION = r"^Torch-Compiled Region: (\d+)/(\d+)$"


def exactly(name: str) -> str:
    """A pattern that matches `name` whole, and no longer name."""
    return f"^{re.escape(name)}$"


@dataclasses.dataclass(frozen=True)
class Row:
    pattern: str
    implementation: str | None  # None: not attention, though the name may say so
    what: str  # the family, in words
    helper: bool = False  # finishes a call another kernel started (a split-KV reduce)
    backward: bool = False  # the gradient of attention, not its forward


# fmt: off
ROWS: tuple[Row, ...] = (
    # Names that mention attention but are not attention.
    Row(LAYOUT_KERNEL, None, "Inductor's pointwise or reduction kernel: layout work around attention"),
    Row(r"(?i)reshape_and_cache|store_kvcache|concat_and_cache|kv_indices|rotary|rope", None,
        "a KV-cache write or a position encoding"),
    # Backward: SDPA's backend ops and kernels, FlashAttention-2/3's, Flex's template, AOTriton's.
    Row(r"^aten::_scaled_dot_product_flash_attention(_for_cpu)?_backward$", sdpa("flash"), "SDPA's flash backend, backward", backward=True),
    Row(r"^aten::_scaled_dot_product_efficient_attention_backward$", sdpa("efficient"), "SDPA's memory-efficient backend, backward", backward=True),
    Row(r"^aten::_scaled_dot_product_cudnn_attention_backward$", sdpa("cudnn"), "SDPA's cuDNN backend, backward", backward=True),
    # A backward of FlashAttention is three kernels: the first starts a call, the others finish it.
    Row(r"^(void )?pytorch_flash::flash_bwd_dot_do_o", sdpa("flash"), "FlashAttention-2 in PyTorch, backward", backward=True),
    Row(FLASH_BACKWARD_KERNEL, sdpa("flash"), "FlashAttention-2 in PyTorch, backward", helper=True, backward=True),
    Row(r"^(void )?fmha_cutlassB", sdpa("efficient"), "xformers' fused CUTLASS kernel, backward", backward=True),
    Row(r"^(void )?cudnn_generated\w*sdpa\w*bprop", sdpa("cudnn"), "a kernel cuDNN generated for SDPA, backward", backward=True),
    Row(r"^bwd_preprocess\w*$", sdpa("flash"), "AOTriton's kernels, backward (ROCm)", backward=True),
    Row(r"^bwd_kernel\w*$", sdpa("flash"), "AOTriton's kernels, backward (ROCm)", helper=True, backward=True),
    Row(r"^triton_tem_fused\w*_flex_attention_backward", "flex", "FlexAttention's Triton template, backward", backward=True),
    Row(r"FlashAttnBwdPreprocess|^(void )?flash::flash_bwd_dot_do_o|^flash_attn\w*::\w*backward", "custom", "the flash-attn package, backward", backward=True),
    Row(r"FlashAttnBwd|^(void )?flash::\w*bwd", "custom", "the flash-attn package, backward", helper=True, backward=True),
    Row(r"^attn::\w*backward", "custom", "this project's custom op, backward", backward=True),
    Row(r"(?i)^(void )?\w+::\w*(attention|attn)\w*_(backward|bwd)", "custom", "a custom op, backward", backward=True),
    # This project's CUDA and Triton backwards, before the tutorial's names they share a prefix with.
    Row(OUR_CUDA_BACKWARD_KERNEL.replace("(delta|dkdv|dq)", "delta"), "custom", "this project's CUDA kernel, backward", backward=True),
    Row(OUR_CUDA_BACKWARD_KERNEL, "custom", "this project's CUDA kernel, backward", helper=True, backward=True),
    Row(r"^_attn_bwd_preprocess$", "custom", "this project's Triton kernel, backward", backward=True),
    Row(OUR_TRITON_BACKWARD_KERNEL, "custom", "this project's Triton kernel, backward", helper=True, backward=True),
    # Triton's fused-attention tutorial and what derives from it: a preprocess starts the call.
    Row(r"^_(attn_)?bwd_preprocess\w*$", "custom", "a Triton attention kernel from Triton's tutorial, backward", backward=True),
    Row(r"^_attn_bwd\w*$|^_bwd_kernel\w*$", "custom", "a Triton attention kernel from Triton's tutorial, backward", helper=True, backward=True),
    Row(r"FmhaBwd\w*Kernel|^(void )?\w*fmha_(v\d_)?bwd", "custom", "a fused multi-head attention kernel, backward (AMD's composable kernel, aiter)", backward=True),
    # SDPA's backend ops say which backend ran, on any device.
    Row(exactly(MHA_FASTPATH), "mha_fastpath", "nn.MultiheadAttention's fast path: the projections, the scores and the output in one op"),
    Row(r"^aten::_scaled_dot_product_flash_attention(_for_cpu)?$", sdpa("flash"), "SDPA's flash backend"),
    Row(r"^aten::_scaled_dot_product_efficient_attention$", sdpa("efficient"), "SDPA's memory-efficient backend"),
    Row(r"^aten::_scaled_dot_product_cudnn_attention$", sdpa("cudnn"), "SDPA's cuDNN backend"),
    Row(r"^aten::_scaled_dot_product_attention_math(_for_mps)?$", sdpa("math"), "SDPA's math backend"),
    Row(r"(?i)backward|_bwd\b", None, "a backward of something else"),
    # SDPA's kernels.
    Row(r"^(void )?pytorch_flash::flash_fwd_splitkv_combine", sdpa("flash"), "FlashAttention-2 in PyTorch, split-KV combine", helper=True),
    Row(FLASH_KERNEL, sdpa("flash"), "FlashAttention-2 as built into PyTorch"),
    Row(CUTLASS_KERNEL, sdpa("efficient"), "xformers' fused CUTLASS kernel"),
    Row(CUDNN_KERNEL, sdpa("cudnn"), "a kernel cuDNN generated for SDPA (or for TransformerEngine, cuDNN's frontend)"),
    Row(AOTRITON_KERNEL, sdpa("flash"), "AOTriton's kernel: SDPA's flash backend on ROCm"),
    # FlexAttention, compiled by Inductor.
    Row(FLEX_KERNEL, "flex", "FlexAttention's Triton template kernel"),
    Row(FLEX_CPU_KERNEL, "flex", "FlexAttention's C++ template kernel"),
    # This project's own ops and kernels.
    Row(r"^attn::", "custom", "this project's custom op"),
    Row(OUR_CUDA_KERNEL, "custom", "this project's CUDA kernel"),
    Row(OUR_TRITON_KERNEL, "custom", "this project's Triton kernel"),
    # Serving engines: paged KV caches, decode kernels (vLLM, SGLang, FlashInfer, AMD's).
    Row(r"^(void )?(vllm::)?paged_attention_v2_reduce", "paged", "vLLM's paged attention, its reduce", helper=True),
    Row(r"^(void )?(vllm::)?paged_attention_v[12]_kernel", "paged", "vLLM's paged attention"),
    Row(r"^(void )?paged_attention_ll4mi_reduce", "paged", "vLLM's ROCm paged attention, its reduce", helper=True),
    Row(PAGED_ROCM_KERNEL, "paged", "vLLM's ROCm paged attention (AMD)"),
    Row(r"^kernel_unified_attention_[23]d$", "paged", "vLLM's Triton unified attention"),
    Row(r"^reduce_segments$", "paged", "vLLM's Triton unified attention, its reduce", helper=True),
    Row(r"^_fwd_kernel_stage2$", "paged", "Triton decode attention, its reduce", helper=True),
    Row(r"^_fwd_(grouped_)?kernel_stage1$", "paged", "Triton decode attention (SGLang, vLLM)"),
    Row(r"MergeStates", "paged", "FlashInfer merging split-KV partial results", helper=True),
    Row(r"(Batch|Single)(Decode|Prefill)With\w*KVCache|BatchMLAPagedAttention|BatchPOD\w*KVCache", "paged", "FlashInfer's attention"),
    Row(r"^fmhaSm\d+\w*PagedKv", "paged", "TensorRT-LLM's paged attention (through FlashInfer)"),
    Row(r"PagedKVCache", "paged", "a paged-KV attention kernel (AMD's composable kernel)"),
    Row(r"^(vllm|sglang\w*)::\w*attention", "paged", "a serving engine's attention op"),
    # Quantised attention: SageAttention (AMD's aiter, Triton) quantises Q and K, then attends.
    Row(r"^sage_quant", "quantised", "SageAttention's quantise, which starts a call"),
    Row(r"^sage_fwd", "quantised", "SageAttention's quantised attention", helper=True),
    # Triton's fused-attention tutorial, and the kernels derived from it that keep its names
    # (LightLLM's, vLLM's prefix prefill, SGLang's extend, xformers' split-K decode): their names
    # say neither flash nor attention. The decode kernels' stages are matched above them, as paged.
    Row(r"^_splitK_reduce\w*$", "custom", "xformers' Triton split-K attention, its reduce", helper=True),
    Row(TUTORIAL_KERNEL, "custom", "a Triton attention kernel derived from Triton's fused-attention tutorial"),
    # FlashAttention's own package, and anyone else's attention op.
    Row(r"^(void )?flash::flash_fwd_splitkv_combine", "custom", "the flash-attn package, split-KV combine", helper=True),
    Row(r"^(void )?flash::|FlashAttnFwdSm\d+", "custom", "the flash-attn package's kernels"),
    # Vendors' fused attention: TransformerEngine's, TensorRT's fmha_v2, AMD's composable kernel
    # and aiter, xformers' own ops.
    Row(r"(?i)fused_attn", "custom", "TransformerEngine's fused attention"),
    Row(r"^(void )?(fmha_v2_|fused_multihead_attention)|^fmhaSm\d+\w*Kernel", "custom", "TensorRT's fused multi-head attention (fmha_v2, TensorRT-LLM)"),
    Row(r"Fmha(Fwd|BatchPrefill)\w*Kernel|^(void )?\w*fmha_(v\d_)?fwd", "custom", "a fused multi-head attention kernel (AMD's composable kernel, aiter)"),
    Row(r"^(?!aten::)\w+::\w*(attention|attn)", "custom", "a custom op"),
)
# fmt: on


@functools.cache
def _compiled() -> list[tuple[re.Pattern, Row]]:
    return [(re.compile(r.pattern), r) for r in ROWS]


@functools.cache
def row_for(name: str) -> Row | None:
    """The first row whose pattern is found in `name`, or None."""
    return next((row for pattern, row in _compiled() if pattern.search(name)), None)


@functools.cache  # a trace names the same kernel thousands of times
def says_attention(kernel: str) -> bool:
    """The kernel's own name (not its template arguments) mentions attention."""
    own = re.split(r"[<(]", kernel.removeprefix("void "), maxsplit=1)[0]
    return re.search(ATTENTION_WORDS, own) is not None


# Names the diagnose findings look for (and the calls they read: modules, graph replays).
MODULE = "nn.Module: "  # a module's range, its class name after: "nn.Module: BertSelfAttention_3"
MODULE_NUMBER = r"_\d+$"  # the instance number the profiler appends to a module's name
ATTENTION_MODULE = r"(?i)atten|attn"  # a module named as attention is a call's scope first
NOT_NAMED_OPS = ("aten::", "nn.Module", AUTOGRAD_NODE)  # never taken for attention by name alone
BACKWARD_WORDS = r"(?i)backward|_bwd"  # an op named as attention that is a backward
GRAPH_LAUNCH = "GraphLaunch"  # cudaGraphLaunch, hipGraphLaunch: kernels replayed from a graph
COPY_OPS = (
    CLONE,
    COPY,
)  # an op copies memory if one of these runs under it (copy_ launches its work)
CONTIGUOUS = "aten::contiguous"
MASKED_FILL = "aten::masked_fill"  # out of place: masked_fill_ is the in-place one
# Ops on the scores that must write a new tensor, or have a finding of their own.
NOT_NEW_SCORES = (MASKED_FILL, "aten::dropout", "aten::softmax", "aten::_softmax")
# Ops whose input may share the scores' last two dims without being a mask: views, projections.
NOT_MASK_WORK = BOOKKEEPING_OPS | {"aten::linear", "aten::addmm", *MATMUL_OPS}
EXPAND = "aten::expand"  # made contiguous after, a repeat of K and V
MATMUL = "aten::matmul"  # broadcasts K and V over the heads, and copies them to do it
MASK_OPS = ("aten::tril", "aten::triu")  # a causal mask, built

# A call's device work, besides its attention kernels. SDPA's front op runs around its backend op:
# it converts and pads an attention mask there (the memory-efficient kernel takes a last dimension
# that is a multiple of MASK_ALIGNMENT, so SDPA pads any other, in every call).
SDPA_FRONT = "aten::scaled_dot_product_attention"
MASK_ALIGNMENT = 16
PAD_OPS = r"^aten::(constant_pad_nd|pad|_pad_enum|_pad_circular|(reflection|replication)_pad\w*)$"
# The rest of a call's device work, by what launched it (the op outermost in the call first, then
# the ops inside it, then the kernel's own name): the first kind whose pattern is found wins.
OTHER_WORK: tuple[tuple[str, str], ...] = (
    ("padding", PAD_OPS),
    ("KV-cache writes", r"(?i)reshape_and_cache|store_kvcache|concat_and_cache"),
    (
        "mask work",
        r"^aten::(tril|triu|masked_fill_?|where|logical_\w+|bitwise_\w+|eq|ne|lt|gt|le|ge"
        r"|arange)$|^(?!aten::)(?i:.*(tril|triu|masked_fill|bitwise|logical_))",
    ),
    (
        "fills",
        r"^aten::(fill_|zero_|zeros(_like)?|ones(_like)?|full(_like)?|new_\w+|empty\w*)$"
        r"|^(?!aten::)(?i:.*fill)|^Memset",
    ),
    (
        "copies",
        r"^aten::(copy_|clone|contiguous|_to_copy|to|type_as|cat|stack|repeat\w*|index_select"
        r"|gather)$|^(?!aten::)(?i:.*(copy|catarray))|^Memcpy",
    ),
)
SCORE_TERMS = "score terms"  # eager: ops on the score matrix between Q.K^T and P.V
# Ops that take a tensor only for its dtype and device (new_ones(size)): not work on its data.
NEW_FROM_OPTIONS = r"^aten::new_"
# Ops that make a tensor of a size they are given (recorded among the concrete inputs, with the
# dtype as a number: c10::ScalarType's, spelled here as "Input type" spells it).
FACTORY_OPS = r"^aten::(zeros|ones|full|empty|rand\w*|new_(zeros|ones|full|empty))$"
SCALAR_TYPES = {"3": "int", "4": "long int", "5": "c10::Half", "6": "float", "7": "double",
                "11": "bool", "15": "c10::BFloat16"}  # fmt: skip
CAST_OPS = ("aten::to", "aten::_to_copy")  # autocast casts an op's inputs with these, under it
AUTOCAST_OPS = (*MATMUL_OPS, "aten::linear", "aten::addmm", SDPA_FRONT)  # cast to lower precision
MAYBE_NO_OP = ("aten::to", "aten::type_as", CONTIGUOUS)  # return their input when nothing to do
# A call's dtype where shapes were not recorded: the first dtype its attention kernel's name says.
KERNEL_DTYPES: tuple[tuple[str, str], ...] = (
    ("bfloat16", r"bf16|bfloat16"),
    ("float16", r"fp16|f16|half"),
    ("float8", r"fp8|float8|e4m3|e5m2"),
    ("float32", r"fp32|f32|float32|\bfloat\b|sgemm"),
)
# Runtime calls that block the CPU until the device is done: a synchronize, and a copy to or from
# pageable host memory (an .item(), a .cpu(), a tensor built on the CPU and sent every call).
HOST_COPY = r"^(cuda|hip)Memcpy(Async|WithStream)?$|^cuMemcpy"
BLOCKING_MEMCPY = r"DtoH|Pageable"
