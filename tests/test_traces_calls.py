"""Finding the attention calls (attn.traces.diagnosis.calls): implementations, where they run, kinds of call,
backwards linked to their forwards, on our runs, on hand-made traces for what no run here can make,
and on real traces recorded by others (where another tool's own per-op analysis is the oracle)."""

import csv
import re
import sys
from pathlib import Path

import pytest

from attn import specs
from attn.traces.diagnosis.calls import find_calls
from attn.traces.diagnosis.diagnose import diagnose as diagnose_trace
from attn.traces.diagnosis.findings import FINDINGS
from attn.traces.read import patterns
from attn.traces.read.trace import Trace, load_trace, read_trace

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count  # noqa: E402
from diagnose_cases import (  # noqa: E402
    BF16,
    CPU_SET,
    FP32,
    REAL,
    SINGLE,
    diagnose,
    implementations,
    kinds,
    made,
    op,
    raw,
    real,
    traced,
    with_backward,
)


def test_each_sdpa_variant_is_named_after_its_backend():
    for spec in specs.SPECS:
        if spec.name.startswith("sdpa_"):
            assert patterns.sdpa(spec.name.removeprefix("sdpa_")) == spec.name


def test_without_cpu_ops_the_kernels_still_answer():
    """A trace of kernels alone: attention from kernel names, every finding said unchecked."""
    raw = real("tracelens-h100-bert-small-sdpa-flash")
    kept = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
    raw = {**raw, "traceEvents": [e for e in raw["traceEvents"] if e.get("cat") in kept]}
    result = diagnose(Trace(raw))
    (row,) = result["attention"]
    assert (row["implementation"], row["calls"], row["kernels_per_call"]) == ("sdpa_flash", 4, 1)
    assert result["findings"] == []  # the flash kernels' names say bfloat16: no fp32 finding
    assert {g["kind"] for g in result["not_checked"]} == {f.kind for f in FINDINGS if f.needs_cpu}
    assert all("no CPU ops" in g["why"] for g in result["not_checked"])


# --- real traces recorded by others ---------------------------------------------------------------

REAL_CASES = {  # folder -> [(implementation, pass, compiled, where, calls, kernels per call)]
    "tracelens-h100-bert-small-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-mi300x-bert-small-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: BertSdpaSelfAttention", 4, 1),
    ],
    "tracelens-h100-timesformer-eager-softmax": [  # temporal calls, then spatial: two kinds
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
    ],
    "tracelens-h100-qwen1.5-sdpa-flash": [
        ("sdpa_flash", "forward", False, "nn.Module: Qwen2Attention", 24, 1),
        ("sdpa_flash", "forward", False, "kernels whose launch is not in the trace", 10, 1),
    ],
    "tracelens-mi300x-sglang-decode-graph": [
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 36, 2),
    ],
    "tracelens-mi300-vllm-decode-graph": [  # no shapes: told apart by their kernels
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 12, 1),
        ("paged", "forward", False, "a graph replay (hipGraphLaunch)", 12, 2),
    ],
    "tracelens-mi300x-compiled-sdpa": [("sdpa_flash", "forward", True, "top level", 1, 1)],
    "switchtransformers-a100-eager-mqa-fp32": [
        ("eager", "forward", False, "nn.Module: MultiQueryAttention", 10, 12),
    ],
    "tracelens-mi300x-flux-sage-graph": [  # text encoders eager, the transformer a graph
        ("sdpa_flash", "forward", False, "nn.Module: CLIPAttention", 12, 2),
        ("eager", "forward", False, "nn.Module: T5Attention", 1, 28),  # computes position bias
        ("eager", "forward", False, "nn.Module: T5Attention", 23, 6),
        ("sdpa_flash", "forward", False, "nn.Module: Attention", 1, 1),
        ("quantised", "forward", False, "a graph replay (hipGraphLaunch)", 228, 2),
    ],
    "tracelens-b200-vllm-gptoss-fp8-paged": [  # one shape, two kernels: sliding window, causal
        ("paged", "forward", False, "nn.Module: Attention", 18, 2),
        ("paged", "forward", False, "nn.Module: Attention", 18, 2),
    ],
    "tracelens-h100-owlv2-eager-two-kinds": [  # one module class: image, then text
        ("eager", "forward", False, "nn.Module: Owlv2Attention", 120, 3),
        ("eager", "forward", False, "nn.Module: Owlv2Attention", 60, 5),
    ],
    "tracelens-h100-vit-nsfw-fwd": [
        ("sdpa_flash", "forward", False, "nn.Module: ViTSdpaSelfAttention", 12, 1),
    ],
    "tracelens-mi300x-qwen1.5-0.5b-fwd": [  # the front op also fills (AOTriton); 11 launches lost
        ("sdpa_flash", "forward", False, "nn.Module: Qwen2Attention", 24, 2),
        ("sdpa_flash", "forward", False, "kernels whose launch is not in the trace", 11, 1),
    ],
    "tracelens-mi300x-sglang-qwen3-prefilldecode": [
        ("paged", "forward", False, "nn.Module: RadixAttention", 36, 1),
    ],
    "nanovllm-rtx4080laptop-attn-decode": [  # a CPU-side eager attention ([8, 2, 17] scores, no
        # kernel) beside flash-attn's split-KV decode on the GPU
        ("eager", "forward", False, "nn.Module: Attention", 1, 0),
        ("custom", "forward", False, "nn.Module: Attention", 1, 2),
    ],
    "tracelens-mi300x-vllm-piecewise-prefilldecode": [  # one step's range: vLLM names it
        (
            "paged",
            "forward",
            False,
            "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37"
            "(sq37sk34489sqsq37sqsk34489)",
            24,
            1,
        ),
    ],
    # Held out from issue 54's changes, first diagnosed after them (SOURCE.txt says so):
    "tracelens-mi300x-vit-nsfw-fwd": [
        ("sdpa_flash", "forward", False, "nn.Module: ViTSdpaSelfAttention", 12, 1),
    ],
    "tracelens-mi300x-timesformer-eager": [
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
        ("eager", "forward", False, "nn.Module: TimesformerSelfAttention", 12, 7),
    ],
    "tracelens-mi300x-sd3.5-xdit": [  # two CLIP text encoders, T5, the compiled MMDiT, the VAE
        ("sdpa_flash", "forward", False, "nn.Module: CLIPAttention", 24, 2),
        ("sdpa_flash", "forward", False, "nn.Module: CLIPAttention", 64, 2),
        ("eager", "forward", False, "nn.Module: T5Attention", 2, 28),  # computes position bias
        ("eager", "forward", False, "nn.Module: T5Attention", 46, 6),
        ("sdpa_flash", "forward", True, "execute_diffusion_1_256x256", 152, 1),
        ("sdpa_flash", "forward", False, "nn.Module: Attention", 1, 1),
    ],
    "hta-a100-alexnet-fwd": [],
    "hta-a100-ddp-no-record-shapes": [],
    "kineto-tbplugin-volta-resnet50-torch18-oldformat": [],
}


def test_every_real_trace_has_a_case():
    """Each folder of one trace; a folder of ranks is diagnosed rank by rank (test_traces_folder)."""
    assert set(REAL_CASES) == set(SINGLE)


@pytest.mark.parametrize("folder", sorted(REAL_CASES))
def test_real_traces(folder):
    result = diagnose(traced(folder))
    seen = [
        (r["implementation"], r["pass"], r["compiled"], r["where"], r["calls"],
         r["kernels_per_call"])
        for r in result["attention"]
    ]  # fmt: skip
    assert seen == REAL_CASES[folder]
    if not seen:  # no attention: nothing to find, nothing left unchecked
        assert result["findings"] == result["not_checked"] == []


FLASH = "aten::_scaled_dot_product_flash_attention"
SDPA = "aten::scaled_dot_product_attention"  # SDPA's front op, around its backend op
FUSED = r"flash_fwd_kernel|^attn_fwd$|^fmhaSm100"  # the fused attention kernels, by name


def op_calls(op: str):
    return lambda t: realtrace_count.op_calls(t, op, FUSED)


def eager_calls(module: str):
    return lambda t: realtrace_count.eager_calls(t, f"nn.Module: {module}")


def sdpa_and_compiled(t: dict) -> dict:
    """SDPA's front op's calls, and those of its flash backend op that Inductor made without it."""
    front = realtrace_count.op_calls(t, SDPA, FUSED)
    alone = realtrace_count.op_calls(t, FLASH, FUSED)
    return front | {shapes: kind for shapes, kind in alone.items() if shapes not in front}


INDEPENDENT = {  # folder -> the second count of its calls: {shapes: (calls, kernels, us, attention us)}
    "tracelens-h100-bert-small-sdpa-flash": op_calls(SDPA),
    "tracelens-mi300x-bert-small-sdpa-flash": op_calls(SDPA),
    "tracelens-h100-qwen1.5-sdpa-flash": op_calls(SDPA),
    "tracelens-h100-vit-nsfw-fwd": op_calls(SDPA),
    "tracelens-mi300x-qwen1.5-0.5b-fwd": op_calls(SDPA),
    "tracelens-mi300x-compiled-sdpa": op_calls(FLASH),  # Inductor calls the backend op itself
    "tracelens-h100-timesformer-eager-softmax": eager_calls("TimesformerSelfAttention"),
    "switchtransformers-a100-eager-mqa-fp32": eager_calls("MultiQueryAttention"),
    "tracelens-h100-owlv2-eager-two-kinds": eager_calls("Owlv2Attention"),
    "tracelens-b200-vllm-gptoss-fp8-paged": op_calls("vllm::unified_attention_with_output"),
    "tracelens-mi300x-flux-sage-graph": lambda t: op_calls(SDPA)(t) | eager_calls("T5Attention")(t),
    "tracelens-mi300x-vit-nsfw-fwd": op_calls(SDPA),
    "tracelens-mi300x-timesformer-eager": eager_calls("TimesformerSelfAttention"),
    "tracelens-mi300x-sd3.5-xdit": lambda t: sdpa_and_compiled(t) | eager_calls("T5Attention")(t),
}


@pytest.mark.parametrize("folder", sorted(INDEPENDENT))
def test_each_kind_of_call_equals_an_independent_count(folder):
    """Calls, kernels, device time and the attention kernels' own time of each kind of call (its
    input shapes; kinds that ran other kernels summed back) equal a count written straight from
    the raw JSON (tests/realtrace_count.py), which shares no code: all the device work launched
    inside the call's op (SDPA's front op, a custom op) or eager window (Q.K^T to P.V)."""
    result = diagnose(traced(folder))
    ours: dict[str, list] = {}
    for r in (r for r in result["attention"] if r["shapes"] is not None):
        calls, kernels, us, attention = ours.setdefault(r["shapes"], [0, 0.0, 0.0, 0.0])
        ours[r["shapes"]] = [
            calls + r["calls"],
            kernels + r["calls"] * r["kernels_per_call"],
            us + r["calls"] * r["device_time_us_per_call"],
            attention + r["calls"] * r["attention_kernel_time_us_per_call"],
        ]
    theirs = INDEPENDENT[folder](raw(folder))
    assert ours.keys() == theirs.keys()
    for shapes, (calls, kernels, us, attention) in theirs.items():
        assert ours[shapes][0] == calls, shapes
        assert ours[shapes][1] == pytest.approx(calls * kernels), shapes
        assert ours[shapes][2] == pytest.approx(calls * us), shapes
        assert ours[shapes][3] == pytest.approx(calls * attention), shapes


GRAPH_KERNELS = {  # folder -> {kernels per call: the kernels of that kind, by name}
    "tracelens-mi300-vllm-decode-graph": {
        1: r"^kernel_unified_attention_2d$",
        2: r"^kernel_unified_attention_3d$|^reduce_segments$",
    },
    "tracelens-mi300x-sglang-decode-graph": {2: r"paged_attention_ll4mi_(QKV|reduce)"},
    "tracelens-mi300x-flux-sage-graph": {2: r"^sage_(quant_kernel|fwd)$"},
}


@pytest.mark.parametrize("folder", sorted(GRAPH_KERNELS))
def test_graph_replays_split_by_their_kernels_equal_a_count_by_name(folder):
    """Without shapes, a graph's calls are told apart by which kernels ran: each kind's kernels
    and their time equal those counted by name in the raw JSON."""
    result = diagnose(traced(folder))
    for r in (r for r in result["attention"] if r["where"].startswith("a graph replay")):
        count, us = realtrace_count.kernels_named(
            raw(folder), GRAPH_KERNELS[folder][r["kernels_per_call"]]
        )
        assert r["calls"] * r["kernels_per_call"] == count
        assert r["calls"] * r["device_time_us_per_call"] == pytest.approx(us)
        assert r["attention_kernel_time_us_per_call"] == r["device_time_us_per_call"]
        assert r["other_work"] == []  # a replay's calls are the table's kernels alone


def test_two_kinds_of_call_each_with_its_share():
    """TimeSformer's temporal and spatial calls, told apart by shapes, are as far apart in time as
    a reader sees: the spatial calls take over 10x the temporal ones, and most of the trace."""
    result = diagnose(traced("tracelens-h100-timesformer-eager-softmax"))
    temporal, spatial = result["attention"]
    assert spatial["device_time_us_per_call"] > 10 * temporal["device_time_us_per_call"]
    assert spatial["share_of_device_time"] > 0.5
    total = sum(r["share_of_device_time"] for r in result["attention"])
    assert result["attention_share_of_device_time"] == pytest.approx(total)
    device = realtrace_count.kernels_named(raw("tracelens-h100-timesformer-eager-softmax"), "")
    assert result["trace"]["device_time_us"] >= device[1]  # kernels, memcpy and memset


def oracle(folder: str) -> list[dict]:
    """TraceLens's own per-op analysis of the trace, beside it: its attention rows."""
    (path,) = (REAL / folder).glob("tracelens_*.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    return [r for r in rows if re.search(r"attention", r["name"])]


@pytest.mark.parametrize(
    "folder",
    [
        "tracelens-h100-bert-small-sdpa-flash",
        "tracelens-mi300x-bert-small-sdpa-flash",
        "tracelens-h100-qwen1.5-sdpa-flash",
        "tracelens-mi300x-compiled-sdpa",
        "tracelens-mi300x-sglang-decode-graph",
        "tracelens-mi300-vllm-decode-graph",
    ],
)
def test_calls_and_kernel_time_match_tracelens(folder):
    """Calls and kernel time of the attention equal another tool's, computed its own way (from
    the ops it matched, and for graph replays from the graph's capture)."""
    theirs = oracle(folder)
    result = diagnose(traced(folder))
    where = result["attention"][0]["where"]  # the calls made by the ops (or the one graph)
    ours = [r for r in result["attention"] if r["where"] == where]
    calls = sum(int(r["name_count"]) for r in theirs)
    kernel_us = sum(float(r["Kernel Time (µs)_sum"]) for r in theirs)
    assert sum(r["calls"] for r in ours) == calls
    ours_us = sum(r["calls"] * r["device_time_us_per_call"] for r in ours)
    assert ours_us == pytest.approx(kernel_us, rel=1e-3)


def test_a_quantised_attention_in_a_graph_equals_tracelens_from_the_capture():
    """SageAttention's kernels, whose names say nothing of attention, replayed from a graph: calls
    and kernel time equal TraceLens's ops summary, which attributes them from the graph's capture."""
    folder = "tracelens-mi300x-flux-sage-graph"
    (path,) = (REAL / folder).glob("tracelens_*.csv")
    theirs = list(csv.DictReader(path.open(encoding="utf-8")))
    (ours,) = [
        r for r in diagnose(traced(folder))["attention"] if r["implementation"] == "quantised"
    ]
    assert {int(r["Count"]) for r in theirs} == {ours["calls"]}  # one of each kernel per call
    kernel_us = sum(float(r["total_direct_kernel_time_sum"]) for r in theirs)
    assert ours["calls"] * ours["device_time_us_per_call"] == pytest.approx(kernel_us, rel=1e-3)


def test_one_shape_two_kernels_is_two_kinds_of_call():
    """GPT-OSS alternates sliding-window and full layers: the same shapes, each kind its own
    kernel, as many of each as the raw JSON holds."""
    folder = "tracelens-b200-vllm-gptoss-fp8-paged"
    rows = diagnose(traced(folder))["attention"]
    for r in rows:
        (fmha,) = [k for k in r["kernels"] if k.startswith("fmhaSm100a")]
        count, us = realtrace_count.kernels_named(raw(folder), f"^{re.escape(fmha)}$")
        assert r["calls"] == count
    assert {"Sliding" in k for r in rows for k in r["kernels"] if k.startswith("fmha")} == {
        True,
        False,
    }


# --- backward rows: our training runs, and a hand-made GPU backward --------------------------------

TRAINING = {  # variant -> (implementation, the autograd node its attention's backward runs)
    "train_naive": ("eager", "SoftmaxBackward0"),
    "train_inplace": ("eager", "SoftmaxBackward0"),
    "train_sdpa_math": ("sdpa_math", "SafeSoftmaxBackward0"),
    "train_sdpa_flash": ("sdpa_flash", "ScaledDotProductFlashAttentionForCpuBackward0"),
    "train_custom_cpu_recompute": (
        "custom",
        "GeneratedBackwardFor_attn_flash_attention_forward_defaultBackward",
    ),
    "train_custom_cpu": (
        "custom",
        "GeneratedBackwardFor_attn_flash_attention_forward_lse_defaultBackward",
    ),
}


@pytest.mark.parametrize("variant", sorted(TRAINING))
def test_a_training_step_has_a_backward_row_per_call(variant):
    """Three steps: three forwards in attn_fwd and their three backwards, linked by autograd's
    sequence numbers; the raw JSON holds as many of the attention's backward nodes."""
    # The first committed CPU set that measured it: a set may say it did not (a variant added since).
    paths = [
        s / variant / "trace.json.gz"
        for s in (CPU_SET, CPU_SET.parent / "cpu-intel-xeon-family-6-model-167")
    ]
    path = next((p for p in paths if p.is_file()), None)
    if path is None:
        pytest.skip(f"no committed trace of {variant} on this checkout")
    implementation, node = TRAINING[variant]
    result = diagnose(read_trace(path))
    forward, backward = result["attention"]
    assert (forward["implementation"], forward["pass"], forward["calls"]) == (
        implementation, "forward", 3,
    )  # fmt: skip
    assert (backward["implementation"], backward["pass"], backward["calls"]) == (
        implementation, "backward", 3,
    )  # fmt: skip
    assert backward["linked_to_forward"] == 3
    assert realtrace_count.backward_nodes(realtrace_count.load(path), node) == 3
    ratio = backward["backward_forward_ratio"]
    assert ratio["of"] == "CPU time" and 0 < ratio["min"] <= ratio["median"] <= ratio["max"]


def test_without_sequence_numbers_a_backward_is_not_linked():
    trace = with_backward(FP32)
    for e in trace["traceEvents"]:
        (e.get("args") or {}).pop("Sequence number", None)
    result = diagnose(Trace(trace))
    assert [r["pass"] for r in result["attention"]] == ["forward"]  # its kernels say nothing


def test_sequence_numbers_and_flows_each_say_they_linked():
    """The row and the call say how a backward found its forward: numbers, else flows."""
    by_numbers = diagnose(Trace(with_backward(FP32)))["attention"][1]
    assert (by_numbers["linked_to_forward"], by_numbers["linked_by"]) == (1, "sequence numbers")
    flows = [c for c in find_calls(Trace(flowed_trace())) if c.pass_ == "backward"]
    assert [c.linked_by for c in flows] == ["fwdbwd flows"]


A, B, C = [1, 8, 128, 64], [1, 8, 256, 64], [1, 8, 64, 32]  # q, k and v of three kinds of call
CUTLASS_F = "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)"
CUTLASS_B = "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionKernel)"


def unnumbered_step(*passes: tuple[str, list[int]]) -> dict:
    """SDPA's memory-efficient backend forward ("f") and backward ("b") calls in this order, one
    thread, no sequence numbers and no flows (as where ranges break them): a forward's front op
    takes q, k, v and a mask; a backward op takes the output's gradient, then q, k and v."""
    ops, ts = [], 0.0
    for n, (kind, qkv) in enumerate(passes):
        if kind == "f":
            dims = [qkv, qkv, qkv, []]
            ops += [
                op("aten::scaled_dot_product_attention", ts, 50, dims, BF16),
                op("aten::_scaled_dot_product_efficient_attention", ts + 5, 40, dims, BF16,
                   [(CUTLASS_F, 10 + n)]),
            ]  # fmt: skip
        else:
            node = (
                "autograd::engine::evaluate_function: ScaledDotProductEfficientAttentionBackward0"
            )
            ops += [
                op(node, ts, 60),
                op("aten::_scaled_dot_product_efficient_attention_backward", ts + 5, 50,
                   [qkv, qkv, qkv, qkv, [], qkv], BF16, [(CUTLASS_B, 30 + n)]),
            ]  # fmt: skip
        ts += 100
    return made(*ops)


def links(trace: dict) -> list[int | None]:
    """Each backward's forward, by its place among the forwards (None: not linked)."""
    calls = sorted(find_calls(Trace(trace)), key=lambda c: c.start)
    forwards = [c for c in calls if c.pass_ == "forward"]
    return [
        forwards.index(c.forward) if c.forward else None for c in calls if c.pass_ == "backward"
    ]


def test_without_numbers_backwards_are_linked_by_shapes_in_reverse_order():
    """Two layers of two kinds, then their backwards, the last layer's first."""
    trace = unnumbered_step(("f", A), ("f", B), ("b", B), ("b", A))
    assert links(trace) == [1, 0]
    rows = [r for r in diagnose(Trace(trace))["attention"] if r["pass"] == "backward"]
    assert [(r["calls"], r["linked_to_forward"], r["linked_by"]) for r in rows] == [
        (1, 1, "shapes and order"),
    ] * 2
    assert all(r["backward_forward_ratio"]["median"] > 0 for r in rows)


def test_pipelined_micro_batches_take_their_own_forwards():
    """One pipeline stage, two layers a micro-batch, 1F1B: two forwards ahead, then each
    backward takes the oldest micro-batch still waiting (the last forward would be the wrong
    one), its last layer first."""
    trace = unnumbered_step(
        ("f", A), ("f", B), ("f", A), ("f", B),  # micro-batches 1 and 2
        ("b", B), ("b", A),  # 1's
        ("f", A), ("f", B),  # 3
        ("b", B), ("b", A), ("b", B), ("b", A),  # 2's, then 3's
    )  # fmt: skip
    assert links(trace) == [1, 0, 3, 2, 5, 4]


def test_a_recorded_training_step_without_numbers_or_flows_links_the_same_pairs_by_shapes():
    """Our SDPA flash training set: its three steps' backwards, with sequence numbers and flows
    taken out, find the same forwards by shapes and order as by the numbers."""
    path = CPU_SET / "train_sdpa_flash" / "trace.json.gz"
    if not path.is_file():
        pytest.skip("no committed trace of train_sdpa_flash on this checkout")
    raw = load_trace(path)

    def pairs(trace: Trace) -> list[tuple[float, str]]:
        """Each backward's forward (its start), in the order the backwards ran, and how linked
        (a backward is its autograd node by the numbers, its op by shapes: starts apart)."""
        calls = sorted(find_calls(trace), key=lambda c: c.start)
        return [(c.forward.start, c.linked_by) for c in calls if c.forward is not None]

    numbered = pairs(Trace(raw))
    raw["traceEvents"] = [e for e in raw["traceEvents"] if e.get("cat") != "fwdbwd"]
    for e in raw["traceEvents"]:
        (e.get("args") or {}).pop("Sequence number", None)
    by_shapes = pairs(Trace(raw))
    assert len(numbered) == 3 and {how for _, how in numbered} == {"sequence numbers"}
    assert [f for f, _ in by_shapes] == [f for f, _ in numbered]
    assert {how for _, how in by_shapes} == {"shapes and order"}


def test_a_backward_whose_shapes_no_forward_has_is_not_linked():
    """Order pairs the first backward with the last forward, but its shapes are not that
    forward's: it stays unlinked, and the one that fits is linked; alone, nothing is linked."""
    assert links(unnumbered_step(("f", A), ("f", B), ("b", C), ("b", A))) == [None, 0]
    lone = diagnose(Trace(unnumbered_step(("f", A), ("b", C))))["attention"][1]
    assert (lone["linked_to_forward"], lone["linked_by"]) == (0, None)
    assert lone["backward_forward_ratio"] is None


# --- found by structure: ops the table does not know, kernels tied to their op, layout work ---------


def structure_trace() -> dict:
    """A vendor's quantised attention as an autograd Function (its quantise and attention kernels,
    no name in the table); a kernel named as attention launched on another thread under an op
    whose name says nothing; FlashAttention-3's backward kernels launched outside any op; an Inductor pointwise
    kernel named after SDPA."""
    t1, t2 = {"ph": "X", "pid": 1, "tid": 1}, {"ph": "X", "pid": 1, "tid": 2}
    dev = {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel"}

    def launch(thread, ts, corr):
        return {**thread, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
                "args": {"correlation": corr}}  # fmt: skip

    return {
        "traceEvents": [
            {**t1, "cat": "cpu_op", "name": "QuantizedAttnFunction", "ts": 10, "dur": 20},
            launch(t1, 12, 1),
            launch(t1, 14, 2),
            {**t2, "cat": "cpu_op", "name": "te_ops::fused_fwd", "ts": 40, "dur": 20},
            launch(t2, 45, 3),
            launch(t1, 70, 4),
            launch(t1, 72, 5),
            launch(t1, 74, 6),
            launch(t1, 80, 7),
            {**dev, "name": "quantize_per_token_kernel", "ts": 100, "dur": 5,
             "args": {"correlation": 1}},
            {**dev, "name": "ck_tile::kernel<FmhaFwdFp8>", "ts": 106, "dur": 50,
             "args": {"correlation": 2}},
            {**dev, "name": "void te::fmha_fwd_kernel<bf16>(Params)", "ts": 160, "dur": 30,
             "args": {"correlation": 3}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<128>>()",
             "ts": 200, "dur": 4, "args": {"correlation": 4}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdSm90<128>>()",
             "ts": 205, "dur": 80, "args": {"correlation": 5}},
            {**dev, "name": "void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ>()",
             "ts": 290, "dur": 6, "args": {"correlation": 6}},
            {**dev, "name": "triton_poi_fused__scaled_dot_product_flash_attention_cat_0",
             "ts": 300, "dur": 9, "args": {"correlation": 7}},
        ]
    }  # fmt: skip


def test_attention_is_found_by_structure_and_each_pass_apart():
    result = diagnose(Trace(structure_trace()))
    seen = [
        (r["implementation"], r["pass"], r["where"], r["calls"], r["kernels_per_call"])
        for r in result["attention"]
    ]
    assert seen == [
        ("custom", "forward", "top level", 1, 2),  # the op, with its quantise kernel
        ("unknown", "forward", "te_ops::fused_fwd", 1, 1),  # its op, found through correlation
        ("custom", "backward", "top level", 1, 3),  # FA3's backward: preprocess starts the call
    ]
    assert result["layout_kernels"] == {"kernels": 1, "device_time_us": 9.0}
    # Only FA3's backward, launched outside any op, cannot be checked: the te_ops call can.
    assert {g["why"] for g in result["not_checked"] if "CPU op" in g["why"]} == {
        "for 1 of the 3 calls, no CPU op was recorded around the attention's kernels"
    }
    share = (5 + 50 + 30 + 4 + 80 + 6) / (5 + 50 + 30 + 4 + 80 + 6 + 9)
    assert result["attention_share_of_device_time"] == pytest.approx(share)


def test_kernels_only_are_split_where_their_time_jumps():
    """No CPU ops and no shapes: four flash calls, two at about 10 µs and two at about 100 µs, are
    two kinds of call; calls within the gap stay one kind."""
    dev = {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel"}
    name = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >"
    durs = [10, 104, 11, 100]
    trace = {"traceEvents": [{**dev, "name": name, "ts": 200 * i, "dur": d} for i, d in
                             enumerate(durs)]}  # fmt: skip
    rows = diagnose(Trace(trace))["attention"]
    assert [(r["calls"], r["device_time_us_range"]) for r in rows] == [
        (2, [10.0, 11.0]),
        (2, [100.0, 104.0]),
    ]


# --- many tiny events: one pass over them, not one per event (20k took 12 s, 1M was killed) -------


def _op(name: str, ts: float, tid: int = 1, dur: float = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_tiny_ops_in_one_range_before_the_attention_are_read_in_one_pass():
    """A range of 20,000 tiny ops, a repeat among them, then matmul, softmax, matmul."""
    n = 20_000
    events = [{**_op("attn_fwd", 0, dur=2 * n + 100), "cat": "user_annotation"}]
    events += [_op("aten::add", 1 + 2 * i) for i in range(n)]
    events[n // 2]["name"] = "aten::repeat_interleave"
    events += [_op(name, 2 * n + 10 * j, dur=5) for j, name in enumerate(("aten::mm",
               "aten::softmax", "aten::mm"))]  # fmt: skip
    result = diagnose_trace(Trace({"traceEvents": events}))
    assert [(r["implementation"], r["where"], r["calls"]) for r in result["attention"]] == [
        ("eager", "attn_fwd", 1)
    ]
    assert kinds(result) == {"eager_attention": 1, "repeat_kv": 1}


def ops_on_their_own_threads(threads: int) -> dict:
    """An eager attention on each of `threads` threads, and as many threads with one op."""
    events = [
        _op(name, 10 * t + j, tid=t, dur=0.5)
        for t in range(threads)
        for j, name in enumerate(("aten::mm", "aten::softmax", "aten::mm"))
    ]
    events += [_op("aten::add", 5, tid=threads + t) for t in range(threads)]
    return {"traceEvents": events}


def test_ops_each_on_its_own_thread_are_grouped_in_one_pass():
    """Ten thousand threads: each thread's ops were found by a scan of every op."""
    result = diagnose_trace(Trace(ops_on_their_own_threads(10_000)))
    assert [(r["implementation"], r["calls"]) for r in result["attention"]] == [("eager", 10_000)]


def lines_run(trace: Trace) -> int:
    """Lines of attn/ that diagnose runs on a trace: its work, counted, not timed."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += event == "line"
        return local

    sys.settrace(lambda frame, event, arg: local if "/attn/" in frame.f_code.co_filename else None)
    try:
        diagnose_trace(trace)
    finally:
        sys.settrace(None)
    return count


def test_twice_the_threads_is_twice_the_work():
    """Linear in the threads: on 564811e, 1,000 threads ran 3.7 times the lines of 500."""
    small, large = (lines_run(Trace(ops_on_their_own_threads(n))) for n in (500, 1000))
    assert large < 2.5 * small


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": 3.5, "Input type": 7, "Sequence number": "x"},
        {"Input Dims": [[1, 8, 128, 64], 5, "q"], "Input type": ["float", None, 2]},
        {"Input Dims": [[1, 8, 128, None]] * 3, "Input type": "float"},
    ],
)
def test_odd_recorded_inputs_are_read_as_no_shape_not_a_crash(args):
    result = diagnose(Trace(with_backward(args)))
    assert implementations(result)[0] == "sdpa_math"


@pytest.mark.parametrize("variant", sorted(TRAINING))
def test_fwdbwd_flows_alone_link_the_same_backward(variant):
    """Without sequence numbers, the profiler's fwdbwd flows (forward op -> autograd node) tie
    each backward to its forward: the same rows as through the numbers."""
    path = CPU_SET / variant / "trace.json.gz"
    if not path.is_file():
        pytest.skip(f"no committed trace of {variant} on this checkout")
    raw = load_trace(path)
    both = diagnose(Trace(raw))["attention"]
    assert any(e.get("cat") == "fwdbwd" for e in raw["traceEvents"])
    for e in raw["traceEvents"]:
        (e.get("args") or {}).pop("Sequence number", None)
    flows = diagnose(Trace(raw))["attention"]
    assert [(r["pass"], r["calls"], r.get("linked_to_forward")) for r in flows] == [
        (r["pass"], r["calls"], r.get("linked_to_forward")) for r in both
    ]


def test_kernels_whose_launch_is_missing_equal_a_count_of_the_raw_json():
    """Qwen's trace holds ten flash kernels whose launch it did not record: one call each."""
    folder = "tracelens-h100-qwen1.5-sdpa-flash"
    (row,) = [
        r
        for r in diagnose(traced(folder))["attention"]
        if r["where"] == "kernels whose launch is not in the trace"
    ]
    count, us = realtrace_count.kernels_without_launch(raw(folder), "flash_fwd")
    assert row["calls"] == count == 10
    assert row["calls"] * row["device_time_us_per_call"] == pytest.approx(us)


def flowed_trace() -> dict:
    """A CPU flash forward and a backward node tied by a fwdbwd flow, beside one spelled oddly."""
    cpu = {"ph": "X", "cat": "cpu_op"}
    return {
        "traceEvents": [
            {**cpu, "name": "aten::_scaled_dot_product_flash_attention_for_cpu", "pid": 1,
             "tid": 1, "ts": 0, "dur": 10},
            {**cpu, "name": "autograd::engine::evaluate_function: X", "pid": 1, "tid": 2,
             "ts": 20, "dur": 5},
            {"ph": "s", "cat": "fwdbwd", "id": [1], "pid": [1], "tid": 1, "ts": 0},
            {"ph": "f", "cat": "fwdbwd", "id": [1], "pid": 1, "tid": {"a": 1}, "ts": "soon"},
            {"ph": "s", "cat": "fwdbwd", "id": 2, "pid": 1, "tid": 1, "ts": 0},
            {"ph": "f", "cat": "fwdbwd", "id": 2, "pid": 1, "tid": 2, "ts": 20.0},
        ]
    }  # fmt: skip


def test_a_flow_spelled_oddly_is_passed_over_and_a_good_one_links():
    rows = diagnose(Trace(flowed_trace()))["attention"]
    assert [(r["pass"], r.get("linked_to_forward")) for r in rows] == [
        ("forward", None),
        ("backward", 1),
    ]
    assert rows[1]["backward_forward_ratio"]["median"] == pytest.approx(5 / 10)
