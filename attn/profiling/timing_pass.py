"""The timing pass: every variant of a set timed interleaved in one process, apart from the profiler.

    python -m attn.profiling.timing_pass --out profiles [--device cuda] [--budget 30]

Writes `<out>/<hardware>/timing.json`: per variant and shape its `median_us`, `low_us` and `high_us`
(the interquartile range of the timed blocks) and `repeats` (blocks timed), plus the clone of one
score matrix (what out-of-place masking adds to a forward) timed in the same rounds, and the load
average before and after. Counts come from the profiled traces; the times the site shows come from here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

import attn
from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import ProfileConfig, config_for, default_config
from attn.profiling.environment import hardware_slug
from attn.profiling.flags import seconds, wide_console
from attn.profiling.machine_load import busy_line, load_before_a_run, load_now, load_over
from attn.profiling.run import why_not_here
from attn.profiling.timing import PRECISION, measure
from attn.profiling.training import training_step
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput, check_output, replace_file, write_json
from attn.traces.common.intervals import INTERVAL
from attn.traces.common.terminal import say, shown
from attn.traces.figures.overview import write_overview
from attn.traces.sets.set_claims import write_claims

SCORE_CLONE = "score_clone"  # the label of the clone of one score matrix


def groups(base: ProfileConfig, names: list[str]) -> dict[ProfileConfig, list[str]]:
    """The variants that run here, grouped by the config they are profiled with (decode steps apart)."""
    found: dict[ProfileConfig, list[str]] = {}
    for name in names:
        config = config_for(name, base)
        if why_not_here(attn.get_variant(name), config) is None:
            found.setdefault(config, []).append(name)
    return found


def calls_for(config: ProfileConfig, names: list[str]) -> dict[str, Callable[[], object]]:
    """A zero-argument call per variant: its forward, or for a variant that trains, a training step
    (forward, loss, backward), as it is profiled."""
    q, k, v = config.make_inputs()
    grads = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    calls = {}
    for name in names:
        variant = attn.get_variant(name)
        if variant.trains:
            calls[name] = lambda variant=variant: _step(variant, *grads, config.is_causal)
        else:
            calls[name] = lambda variant=variant: variant.forward(
                q, k, v, is_causal=config.is_causal
            )
    return calls


def _step(variant, q, k, v, is_causal: bool) -> None:
    with torch.enable_grad():
        training_step(variant, q, k, v, is_causal=is_causal)


def score_clone(config: ProfileConfig) -> tuple[Callable[[], object], int]:
    """The copy the reference variant's out-of-place masked_fill makes: a clone of one
    [batch, heads, seq_q, seq_k] score matrix."""
    shape = (config.batch, config.heads, config.seq_q, config.seq_k)
    scores = torch.zeros(shape, device=config.device, dtype=config.torch_dtype)
    return scores.clone, scores.nbytes


def every(seconds: float, say: Callable[[str], None]) -> Callable[[str], None]:
    """say(), at most once per `seconds`: a line a minute or more often, not one per round."""
    last = [-seconds]

    def maybe(text: str) -> None:
        if time.monotonic() - last[0] >= seconds:
            last[0] = time.monotonic()
            say(f"timing: {text}")

    return maybe


def run(
    base: ProfileConfig,
    names: list[str],
    budget_s: float,
    say: Callable[[str], None],
    failed: list[str] | None = None,
) -> dict:
    """Time every group of variants (their calls interleaved), each within its share of the budget.
    A variant that fails (its compile, its first call) is said in one line, appended to `failed`
    and left out; the others are timed."""

    def fails(name: str, exc: Exception) -> None:
        why = next((line for line in str(exc).splitlines() if line.strip()), "")
        say(shown(f"timing: {name} failed and is left out ({type(exc).__name__}: {why})"))
        if failed is not None:
            failed.append(name)

    before = load_now()
    found = groups(base, names)
    rows, extras = [], {}
    for config, group in found.items():
        say(f"timing {len(group)} variant(s) at {config.shape()}: {', '.join(group)}")
        calls = calls_for(config, group)
        if specs.REFERENCE in group:  # in the same rounds as the forwards it belongs to
            calls[SCORE_CLONE], nbytes = score_clone(config)
        timed = measure(
            calls, budget_s=budget_s / len(found), progress=every(20.0, say), failed=fails
        )
        if SCORE_CLONE in timed:
            extras[SCORE_CLONE] = {"bytes": nbytes, **timed.pop(SCORE_CLONE).row()}
        for name, t in timed.items():
            rows.append({
                "variant": name, "what": "training step" if specs.spec(name).trains else "forward",
                "dtype": config.dtype, "shape": config.shape(), "is_causal": config.is_causal,
                **t.row(),
            })  # fmt: skip
    return {
        "interval": INTERVAL, "precision": PRECISION, "budget_s": budget_s,
        "threads": torch.get_num_threads(), "rows": rows, **extras,
        "load": load_over(before, load_now()),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = sweeps.parser("attn.profiling.timing_pass", __doc__)
    p.add_argument(
        "--budget", type=seconds, default=30, help="seconds of timing, all groups (default 30)"
    )
    args = p.parse_args(argv)
    dev = args.device
    console = wide_console()
    folder = artifacts.hardware_dir(args.out, hardware_slug(dev))
    try:  # what the end writes, checked before minutes of timing
        check_set(folder)
    except (RefusedOutput, artifacts.BrokenSet) as e:
        say(f"error: {e}", err=True)
        return 1
    if busy := busy_line(load_before_a_run()):
        console.print(busy)
    failed: list[str] = []
    result = run(default_config(dev), specs.names(), args.budget, console.print, failed)
    try:
        if result["rows"]:
            write_set(folder, result)
            print(f"timing: {len(result['rows'])} variants timed into {folder / artifacts.TIMING}")
    except (RefusedOutput, artifacts.BrokenSet, OSError) as e:  # changed since the check: said
        say(f"error: {e}", err=True)
        return 1
    if failed:
        say(f"error: {', '.join(failed)} failed (said above): not in {artifacts.TIMING}", err=True)
    return 1 if failed else 0


def check_set(folder: Path) -> None:
    """RefusedOutput or BrokenSet, naming the file, when the set cannot be rewritten: timing.json,
    overview.svg or index.json not a file that can be replaced, or a summary the overview and the
    index read that is not JSON (a cut one left timing.json new and the overview old)."""
    for name in (artifacts.TIMING, artifacts.OVERVIEW, artifacts.MANIFEST):
        check_output(folder / name)
    if folder.is_dir():
        artifacts.summaries_of(folder)


def write_set(folder: Path, result: dict) -> None:
    """timing.json, then the overview (its bars: these medians, their ranges), the claims and the
    index; if one cannot be written, the files before are put back: the set changes whole or not
    at all."""
    folder.mkdir(parents=True, exist_ok=True)
    names = (artifacts.TIMING, artifacts.OVERVIEW, artifacts.MANIFEST, artifacts.CLAIMS)
    paths = [folder / name for name in names]
    before = {p: p.read_bytes() for p in paths if p.is_file()}
    try:
        write_json(paths[0], result)
        write_overview(folder, specs.names(), specs.REFERENCE)
        if paths[2].is_file():  # a set made by a profile run: the timing claims read its steps
            write_claims(folder, specs)
            artifacts.write_manifest(folder)
    except BaseException:
        for path in paths:
            if path in before:
                replace_file(path, lambda p, data=before[path]: p.write_bytes(data))
            else:
                path.unlink(missing_ok=True)
        raise


if __name__ == "__main__":
    sys.exit(main())
