"""This machine's measured peaks, probed in the run that reports rates as shares of them.

    python -m attn.profiling.peaks                 # this machine's device
    python -m attn.profiling.peaks --device cpu

On a CPU, small probes built with the attn C++ ops (csrc/cpu/peaks_cpu.cpp), on every thread torch
uses: the fp32 FMA peak (independent FMA chains in the widest vector ISA torch runs, AVX-512 or
AVX2), the bf16 peak (AMX's tdpbf16ps where the CPU has AMX, else AVX512-BF16's vdpbf16ps; absent
without either), and the memory bandwidth of a STREAM triad on arrays far larger than the caches.
On a GPU, the tensor-core rate of a large cuBLAS GEMM (torch.mm in bf16, 8192 x 8192 x 8192).
A CPU probe's rate is each thread's work over the CPU time that thread ran, summed over the
threads, and the best of a few runs: what the cores can do, which other work on a shared machine
lowers little (a kernel's wall-clock rate on a busy machine is then a smaller share of it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from attn.profiling.config import default_device
from attn.profiling.environment import is_gpu
from attn.profiling.flags import device as device_flag
from attn.profiling.timing import measure

# The probe of each bf16 path, best first (the order csrc/cpu/peaks_cpu.cpp names them).
BF16_PROBES = {"amx": "amx_bf16", "avx512_bf16": "avx512_bf16"}
GPU_GEMM_N = 8192  # the GPU probe's square bf16 GEMM: large enough for the tensor cores' rate
TRIAD_MIN_BYTES, TRIAD_MAX_BYTES = 256 * 2**20, 2**30  # per array


def _best_rate(run, budget_s: float, repeats: int) -> float:
    """The highest of `repeats` rates `run(iterations)` returns, each run sized to about
    budget_s / repeats seconds by doubling `iterations` from a short first run."""
    iterations, took = 1 << 10, 0.0
    while took < budget_s / repeats / 4:
        iterations *= 2
        start = time.perf_counter()
        run(iterations)
        took = time.perf_counter() - start
    return max(run(iterations) for _ in range(repeats))


def largest_cache_bytes() -> int | None:
    """The size of the CPU's last-level cache as Linux reports it, or None."""
    caches = Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size")
    sizes = []
    for path in caches:
        text = path.read_text().strip()
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=None)


def triad_gbs(array_bytes: int | None = None, repeats: int = 3) -> float:
    """GB/s of STREAM's triad, a = b + s * c, over three fp32 arrays, counted as STREAM counts
    it (12 bytes per element: two read, one written). Each array is four times the last-level
    cache, at least 256 MiB and at most 1 GiB (a shared machine's memory), unless given."""
    from attn.custom_ops import load_ops

    if array_bytes is None:
        array_bytes = min(max(4 * (largest_cache_bytes() or 0), TRIAD_MIN_BYTES), TRIAD_MAX_BYTES)
    n = array_bytes // 4
    a, b, c = torch.zeros(n), torch.full((n,), 1.0), torch.full((n,), 2.0)  # pages touched here
    ops = load_ops()
    return max(ops.cpu_triad(a, b, c, 3.0) for _ in range(repeats)) / 1e9


def cpu_peaks(budget_s: float = 0.5, repeats: int = 5, array_bytes: int | None = None) -> dict:
    """The CPU's peaks on torch's threads: TFLOP/s of FMA chains in fp32 and of bf16 dot products
    (per path, and the best as `bf16_tflops`, its path `bf16_path`), GB/s of the triad."""
    from attn.custom_ops import load_ops

    ops = load_ops()
    probes = set(ops.cpu_peak_probes())
    rate = {
        name: _best_rate(lambda n, name=name: ops.cpu_peak_probe(name, n), budget_s, repeats) / 1e12
        for name in ("fp32_fma", *BF16_PROBES.values())
        if name in probes
    }
    bf16 = {path: rate[probe] for path, probe in BF16_PROBES.items() if probe in rate}
    best = max(bf16, key=bf16.get) if bf16 else None
    return {
        "fp32_fma_tflops": _rounded(rate.get("fp32_fma")),
        "fp32_isa": ops.cpu_fma_isa() or None,
        "bf16_tflops": _rounded(bf16.get(best)),
        "bf16_path": best,
        **{f"{path}_tflops": _rounded(value) for path, value in bf16.items()},
        "triad_gbs": _rounded(triad_gbs(array_bytes)),
        "threads": torch.get_num_threads(),
    }


def gpu_peaks(device: str, budget_s: float = 3.0, n: int = GPU_GEMM_N) -> dict:
    """The GPU's bf16 tensor-core rate: a large square torch.mm (cuBLAS), its fastest quartile."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
    timed = measure({"mm": lambda: torch.mm(a, b, out=out)}, budget_s=budget_s)["mm"]
    return {
        "fp32_fma_tflops": None,
        "bf16_tflops": _rounded(2 * n**3 / timed.low_us / 1e6),
        "bf16_path": "cublas",
        "triad_gbs": None,
    }


def measure_peaks(device: str) -> dict:
    """The peaks of `device`: `gpu_peaks` on a GPU, `cpu_peaks` on a CPU."""
    return gpu_peaks(device) if is_gpu(device) else cpu_peaks()


def peak_of(peaks: dict, dtype: str) -> tuple[str, float] | None:
    """The peak a rate in `dtype` is a share of, as (its name, TFLOP/s), or None: bf16 work on its
    bf16 units (a CPU without any runs bf16 on fp32 FMAs), fp32 work on the fp32 FMA units."""
    if dtype == "bfloat16" and peaks.get("bf16_tflops"):
        return f"bf16_{peaks['bf16_path']}", peaks["bf16_tflops"]
    if peaks.get("fp32_fma_tflops"):
        return "fp32_fma", peaks["fp32_fma_tflops"]
    return None


def _rounded(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.4g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attn.profiling.peaks", description=__doc__)
    parser.add_argument("--device", type=device_flag, default=default_device())
    args = parser.parse_args(argv)
    print(json.dumps(measure_peaks(args.device), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
