"""What the diagnose tests share: diagnose, real traces parsed once for every test module that
reads them, the GPU fixture, and hand-made traces of SDPA on a GPU."""

import functools
import json
import sys
from pathlib import Path

from committed import CPU_SET  # noqa: F401  the committed CPU set, as HEAD holds it

from attn.traces.diagnosis.diagnose import diagnose  # noqa: F401 (the test modules import it from here)
from attn.traces.read.trace import Trace, load_trace

sys.path.insert(0, str(Path(__file__).parent))
import realtrace_count  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests/fixtures/realtraces"


def traces_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))


SINGLE = sorted(p.name for p in REAL.iterdir() if len(traces_in(p)) == 1)  # one trace each
RANKED = sorted(p.name for p in REAL.iterdir() if len(traces_in(p)) > 1)  # a folder of ranks
FIXTURE = ROOT / "tests/fixtures/cuda_naive_trace.json"


def kinds(result: dict) -> dict[str, int]:
    return {f["kind"]: f["count"] for f in result["findings"]}


def implementations(result: dict) -> list[str]:
    return [row["implementation"] for row in result["attention"]]


def real(folder: str) -> dict:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return load_trace(path)


@functools.cache
def traced(folder: str) -> Trace:
    """A real trace parsed once for all the tests that read it (diagnose changes nothing in it)."""
    return Trace(real(folder))


def fixture() -> dict:
    return json.loads(FIXTURE.read_text())


def sdpa_on_gpu(backend_op: str, args: dict) -> dict:
    """One attn_fwd calling SDPA, whose backend op launches one kernel."""
    cpu = {"ph": "X", "pid": 1, "tid": 1}
    return {
        "traceEvents": [
            {**cpu, "cat": "user_annotation", "name": "attn_fwd", "ts": 0, "dur": 100},
            {**cpu, "cat": "cpu_op", "name": "aten::scaled_dot_product_attention", "ts": 10,
             "dur": 50, "args": args},
            {**cpu, "cat": "cpu_op", "name": backend_op, "ts": 11, "dur": 48, "args": args},
            {**cpu, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12, "dur": 2,
             "args": {"correlation": 7}},
            {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "ampere_sgemm_128x64_nn",
             "ts": 40, "dur": 30, "args": {"correlation": 7}},
        ]
    }  # fmt: skip


FP32 = {"Input Dims": [[1, 8, 128, 64]] * 3 + [[128, 128]], "Input type": ["float"] * 4}


@functools.cache
def raw(folder: str) -> dict:
    (path,) = [p for p in (REAL / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return realtrace_count.load(path)


def with_backward(args: dict) -> dict:
    """sdpa_on_gpu's math call, its op numbered 5, and its backward on autograd's own thread: the
    node numbered 5 launches two kernels."""
    trace = sdpa_on_gpu("aten::_scaled_dot_product_attention_math", args | {"Sequence number": 5})
    bwd = {"ph": "X", "pid": 1, "tid": 2}
    trace["traceEvents"] += [
        {**bwd, "cat": "cpu_op", "name": "autograd::engine::evaluate_function: SafeSoftmaxBackward0",
         "ts": 200, "dur": 40, "args": {"Sequence number": 5, "Fwd thread id": 1}},
        {**bwd, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 205, "dur": 2,
         "args": {"correlation": 8}},
        {**bwd, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 210, "dur": 2,
         "args": {"correlation": 9}},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "softmax_backward_kernel",
         "ts": 220, "dur": 45, "args": {"correlation": 8}},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "ampere_sgemm_128x64_nt",
         "ts": 270, "dur": 15, "args": {"correlation": 9}},
    ]  # fmt: skip
    return trace


def op(name: str, ts: float, dur: float, dims=None, types=None, kernels=(), **more) -> dict:
    """One CPU event of a hand-made trace (see made()): its recorded inputs, the device work it
    launches at its end (kernels, or Memcpy/Memset by name), and any other field (cat, runtime)."""
    args = {} if dims is None else {"Input Dims": dims}
    if types is not None:
        args["Input type"] = types
    return {"name": name, "ts": ts, "dur": dur, "args": args, "kernels": list(kernels), **more}


def made(*ops: dict) -> dict:
    """A hand-made GPU trace: the ops on one thread (cat cpu_op unless given), each one's device
    work launched in turn at its end and run one after another on one stream."""
    cpu = {"ph": "X", "pid": 1, "tid": 1}
    events, corr, gpu = [], 0, 10_000.0
    for o in ops:
        events.append({**cpu, "cat": o.get("cat", "cpu_op"), "name": o["name"], "ts": o["ts"],
                       "dur": o["dur"], "args": o["args"]})  # fmt: skip
        for j, (name, dur) in enumerate(o["kernels"]):
            corr += 1
            cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
            runtime = o.get("runtime", "cudaMemcpyAsync" if cat != "kernel" else "cudaLaunchKernel")
            at = o["ts"] + o["dur"] - 0.2 * (len(o["kernels"]) - j)
            events.append({**cpu, "cat": "cuda_runtime", "name": runtime, "ts": at,
                           "dur": o.get("runtime_dur", 0.1), "args": {"correlation": corr}})  # fmt: skip
            events.append({"ph": "X", "pid": 0, "tid": 7, "cat": cat, "name": name, "ts": gpu,
                           "dur": dur, "args": {"correlation": corr}})  # fmt: skip
            gpu += dur + 1
    return {"traceEvents": events}


Q = [1, 8, 128, 64]  # q, k and v of the hand-made calls: [batch, heads, seq, head_dim]
BF16 = ["c10::BFloat16"] * 4
CUTLASS = "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16> >"
COPY = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>"


def sdpa_call(ts: float, mask: list[int] | None = None, before=(), pad: bool = False) -> list:
    """An attention module at `ts` calling SDPA (its memory-efficient backend), with a mask of
    this shape (padded inside SDPA's front op when `pad`), and the ops `before` it in the module."""
    dims = [Q, Q, Q, mask or []]
    front = op("aten::scaled_dot_product_attention", ts + 40, 50, dims, BF16)
    padding = [
        op("aten::pad", ts + 41, 12, [mask, []], BF16[:1]),
        op("aten::constant_pad_nd", ts + 42, 10, [mask, []], BF16[:1], [(FILL, 5), (COPY, 7)]),
    ]
    backend = op("aten::_scaled_dot_product_efficient_attention", ts + 60, 25, dims, BF16,
                 [(CUTLASS, 40)])  # fmt: skip
    module = op("nn.Module: Attention_0", ts, 100, cat="python_function")
    return [module, *before, front, *(padding if pad else []), backend]
