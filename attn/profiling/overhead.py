"""What measuring costs here: a forward under torch.profiler against the same forward alone, and
the clone of a score matrix into fresh memory against the same copy into memory already touched.

    python -m attn.profiling.overhead --out profiles [--set NAME] [--budget 5]

Writes `<out>/<set>/overhead.json` (and `overhead.svg`): rows of kind "profiler", one per way of
running the reference forward at a small shape (alone; inside `torch.profiler.profile` with its
switches off, or with `record_shapes`, `profile_memory` or `with_stack` on; and the profiler started
and stopped around no forward at all), and rows of kind "first_touch", the two copies of one of the
reference's score matrices at the chapter's shape, with the page faults each costs. Each row is a
median per call with its interquartile range; every row of a kind is timed interleaved with the others (attn.profiling.timing),
so the machine's load hits them alike; each carries that load and the machine it was measured on.
`--set` writes into a set made earlier on this CPU model (its environment.json says which). CPU only:
a GPU's caching allocator hands out memory already touched, so first touch is a CPU question.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import attn
from attn import specs
from attn.profiling import sweep as sweeps
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import cpu_model, hardware_slug, stamp
from attn.profiling.flags import seconds
from attn.profiling.quiet import without_profiler_chatter
from attn.profiling.timing import measure
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput
from attn.traces.common.terminal import say
from attn.traces.figures.plot import figure, save
from attn.traces.sets.set_claims import write_claims

STEM = "overhead"
SMALL = ProfileConfig(batch=1, heads=8, seq_q=512, seq_k=512)  # many small ops: the profiler shows
SWITCHES = {  # row name -> torch.profiler.profile's keyword arguments
    "profiler": {},
    "record_shapes": {"record_shapes": True},
    "profile_memory": {"profile_memory": True},
    "with_stack": {"with_stack": True},
}
START_STOP = "start_stop"  # the profiler started and stopped around nothing
BARE_NAME = re.compile(r" \(family \d+, model \d+\)$")  # what environment.cpu_model adds
try:  # the page faults a call costs: getrusage, on Unix
    import resource
except ImportError:  # Windows: the rows say no count (None)
    resource = None


class WrongSet(ValueError):
    """--set names a set this machine's CPU did not make; one line."""


def _profiled(fn: Callable[[], object], switches: dict) -> None:
    with without_profiler_chatter(), profile(activities=[ProfilerActivity.CPU], **switches):
        fn()


def profiler_calls(forward: Callable[[], object]) -> dict[str, Callable[[], object]]:
    """The forward alone, inside a profiler per switch, and a profiler around nothing."""
    calls = {"alone": forward}
    for name, switches in SWITCHES.items():
        calls[name] = lambda switches=switches: _profiled(forward, switches)
    calls[START_STOP] = lambda: _profiled(lambda: None, {})
    return calls


def copy_calls(config: ProfileConfig) -> tuple[dict[str, Callable[[], object]], int]:
    """What masked_fill's clone does to one [batch, heads, seq_q, seq_k] score matrix, twice: a
    clone (memory fresh from the OS each call: a 64 MiB block is mmapped and unmapped, its pages
    faulted in as the copy first writes them) and a copy_ into a buffer whose pages are already in."""
    shape = (config.batch, config.heads, config.seq_q, config.seq_k)
    scores = torch.ones(shape, dtype=config.torch_dtype)
    touched = torch.empty_like(scores).copy_(scores)  # every page written once, kept
    return {"clone": scores.clone, "copy_": lambda: touched.copy_(scores)}, scores.nbytes


def faults_per_call(fn: Callable[[], object], calls: int = 3) -> float | None:
    """The page faults the kernel served per call of fn, warm (getrusage's minor faults: a page
    mapped in as it is first touched), or None where the OS does not count them."""
    if resource is None:
        return None
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def _rows(kind: str, config: ProfileConfig, timed: dict, **extra) -> list[dict]:
    where = {"kind": kind, "variant": specs.REFERENCE, "batch": config.batch,
             "heads": config.heads, "seq": config.seq_q, "head_dim": config.head_dim,
             "dtype": config.dtype, "is_causal": config.is_causal, **extra}  # fmt: skip
    rows = []
    for name, t in timed.items():
        row = t.row()  # median_us as time_us: the name the sweeps' rows give a median
        rows.append({**where, "name": name, "time_us": row.pop("median_us"), **row})
    return rows


def sweep(budget_s: float) -> list[dict]:
    """The profiler rows (three fifths of the budget), then the first-touch rows, on the CPU."""
    q, k, v = SMALL.make_inputs()
    variant = attn.get_variant(specs.REFERENCE)
    forward = lambda: variant.forward(q, k, v, is_causal=SMALL.is_causal)  # noqa: E731
    rows = _rows("profiler", SMALL, measure(profiler_calls(forward), budget_s=0.6 * budget_s))
    chapter = default_config("cpu")
    calls, nbytes = copy_calls(chapter)
    copies = _rows("first_touch", chapter, measure(calls, budget_s=0.4 * budget_s), bytes=nbytes)
    rows += [{**row, "page_faults": faults_per_call(calls[row["name"]])} for row in copies]
    made = {"cpu_model": cpu_model(), "threads": torch.get_num_threads(), **stamp()}
    return [{**row, **made} for row in rows]


def plot(rows: list[dict], title: str, path: Path) -> None:
    """A panel per kind: each row's median as a bar, its interquartile range as a whisker, in ms."""
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    sizes = [sum(r["kind"] == kind for r in rows) for kind in kinds]
    fig, axes = figure(0.9 + 0.28 * sum(sizes), nrows=len(kinds), squeeze=False,
                       gridspec_kw={"height_ratios": sizes})  # fmt: skip
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        mine = [r for r in rows if r["kind"] == kind]
        ms = [r["time_us"] / 1e3 for r in mine]
        spread = [[m - r["low_us"] / 1e3 for m, r in zip(ms, mine, strict=True)],
                  [r["high_us"] / 1e3 - m for m, r in zip(ms, mine, strict=True)]]  # fmt: skip
        ax.barh(range(len(mine)), ms, xerr=spread, color="#4a78b5", capsize=3)
        ax.set_yticks(range(len(mine)), [r["name"] for r in mine])
        ax.invert_yaxis()
        ax.set_title(kind.replace("_", " "), loc="left", fontsize=9)
        ax.set_xlabel("ms per call (median, interquartile range)")
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def target(out: Path, name: str | None) -> Path:
    """The set to write into: this CPU's own, or `name`'s where its environment.json records this
    CPU's model (as lscpu names it, with or without the family and model numbers added since)."""
    if name is None:
        return artifacts.hardware_dir(out, hardware_slug("cpu"))
    folder = artifacts.hardware_dir(out, name)
    path = folder / artifacts.ENVIRONMENT
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("cpu_model")
    except (OSError, ValueError, AttributeError) as e:
        raise WrongSet(f"--set {name}: {path} cannot be read ({e})") from None
    here = cpu_model()
    if recorded not in (here, BARE_NAME.sub("", here)):
        raise WrongSet(
            f"--set {name}: its {artifacts.ENVIRONMENT} records the CPU {recorded!r}, this "
            f"machine is {here!r}: rows go into the set of the CPU that measured them"
        )
    return folder


def main(argv: list[str] | None = None) -> int:
    p = sweeps.parser("attn.profiling.overhead", __doc__)
    p.add_argument("--set", help="a set made on this CPU model (default: this machine's own)")
    p.add_argument("--budget", type=seconds, default=5.0, help="seconds of timing (default 5)")
    args = p.parse_args(argv)
    if torch.device(args.device).type != "cpu":
        print(f"overhead: measured on a CPU only, not on {args.device}: nothing written")
        return 0
    try:
        folder = target(args.out, args.set)
        artifacts.check_figure(folder, STEM)  # before the timing: a folder in the way is said now
    except (WrongSet, RefusedOutput) as e:
        say(f"error: {e}", err=True)
        return 1
    rows = sweeps.stamped(lambda: sweep(args.budget))
    title = f"What measuring costs on {rows[0]['cpu_model']}"
    artifacts.write_figure(folder, STEM, rows, lambda path: plot(rows, title, path))
    write_claims(folder, specs)  # the claims on these rows, decided now and stored in the set
    print(f"overhead: {len(rows)} rows written to {folder}/{STEM}.json and {STEM}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
