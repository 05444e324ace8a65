"""The timing pass, then every sweep, in one process, each one's wall time on a line of its own.

    python -m attn.profiling.every_sweep --out profiles [--device cuda]

What `nox -s profile_examples` runs after the examples. One process, not six: each would import
torch again (seconds apiece on two cores). Each step is its module's own `main`, so running one alone
(`python -m attn.profiling.benchmark ...`) does the same as here. A step that fails is said and the
others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from attn.profiling.config import default_device
from attn.profiling.flags import device, out_folder
from attn.traces.common.terminal import say

STEPS = (
    "timing_pass",  # the times the site shows: every variant, interleaved
    "scaling",
    "decoding",
    "training",
    "benchmark",
    "dispatch",  # which SDPA backend runs unpinned, and why the others refuse
    "overhead",  # what the profiler and a first-touch copy cost (under 10 s)
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m attn.profiling.every_sweep", description=__doc__)
    p.add_argument("--out", type=out_folder, default="profiles", help="artifact root")
    p.add_argument("--device", type=device, default=default_device(), help="cpu or cuda")
    args = p.parse_args(argv)
    failed = []
    for step in STEPS:
        start = time.perf_counter()
        module = importlib.import_module(f"attn.profiling.{step}")
        status = module.main(["--out", str(args.out), "--device", args.device])
        say(f"{step}: {time.perf_counter() - start:.1f} s" + ("" if status == 0 else ", failed"))
        if status != 0:
            failed.append(step)
    if failed:
        say(f"error: {', '.join(failed)} failed (the earlier artifacts of each are kept)", err=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
