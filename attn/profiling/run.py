"""Profile on this machine into `<out>/<hardware>/`: a variant run here, or an example's own trace.

Either way the trace goes through `analyze.write_artifacts`; a variant that cannot run here gets a
summary that says why. After each run the set's environment, overview and manifest are rewritten.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from attn import specs
from attn.profiling.capture import capture
from attn.profiling.cold_cache import empty_compile_cache
from attn.profiling.config import ProfileConfig
from attn.profiling.environment import (
    device_name,
    environment,
    hardware_slug,
    is_committed,
    is_gpu,
    stamp,
)
from attn.profiling.flags import ProfilingError
from attn.profiling.launch import last_line, run_script
from attn.traces.common import artifacts
from attn.traces.common.atomic import (
    atomic_folder,
    remove_stale_scratch,
    scratch_prefix,
    write_json,
)
from attn.traces.common.terminal import say
from attn.traces.compare.diff import write_diffs
from attn.traces.figures.overview import write_overview
from attn.traces.read.backward import SAVED_KEY
from attn.traces.read.trace import BACKWARD_RANGE, FORWARD_RANGE, read_trace
from attn.traces.sets.analyze import focus, write_artifacts
from attn.traces.sets.rank_artifacts import write_ranked
from attn.traces.sets.set_claims import write_claims
from attn.variant import Variant

_skipped_viewer: list[str] = []  # the one line said when screenshots cannot be taken here
# Variants whose folder held a viewer.png before this run replaced it and holds none after: the
# old picture showed the old trace, so it goes with it, and the run says so in one line at its end.
_removed_viewers: list[str] = []
COMPILE_JSON = Path("compile.json")  # what a compiled example writes: its first calls' seconds
# The compile caches of the profile run open now (see compile_caches), innermost last.
_chains: list[dict] = []


def why_not_here(variant: Variant, config: ProfileConfig, ranks: int = 1) -> str | None:
    """Why the variant cannot run this config (device, dtype, head_dim), or None; a variant whose
    example starts `ranks` processes, why they cannot run on this machine."""
    if ranks > 1:
        return variant.ranks_problem(config.device, ranks)
    reason = variant.why_unavailable(config.device, config.torch_dtype)
    if reason is None and variant.head_dims and config.head_dim not in variant.head_dims:
        dims = " or ".join(str(d) for d in variant.head_dims)
        reason = f"the kernel takes head_dim {dims}, not {config.head_dim}"
    return reason


def base_summary(variant: Variant, config: ProfileConfig) -> dict:
    """What every summary of a run here says about the variant, the machine and the inputs."""
    return {
        "variant": variant.name, "title": variant.title, "lesson": variant.lesson,
        "hardware": hardware_slug(config.device), "device_name": device_name(config.device),
        "device_type": "cuda" if is_gpu(config.device) else "cpu",
        "torch_version": torch.__version__, "dtype": config.dtype, "shape": config.shape(),
        "is_causal": config.is_causal, "stamp": stamp(),
    }  # fmt: skip


def _record_unavailable(folder: Path, base: dict, reason: str) -> None:
    with atomic_folder(artifacts.check_replaceable(folder)) as out:
        write_json(
            out / artifacts.SUMMARY,
            {"schema": artifacts.SUMMARY_SCHEMA, **base, "available": False, "reason": reason},
        )


def profile_variant(
    variant: Variant, config: ProfileConfig, out_root: Path, *, screenshot: bool = False
) -> Path:
    """Profile `variant` here under `config` into `<out>/<hardware>/<variant>/`; returns it."""
    base = base_summary(variant, config)
    folder = artifacts.variant_dir(out_root, base["hardware"], variant.name)
    had_viewer = (folder / artifacts.VIEWER).is_file()
    try:
        reason = why_not_here(variant, config)
        if reason is not None:
            _record_unavailable(folder, base, reason)
            return folder
        try:
            trace, table = capture(variant, config)
        except ValueError as exc:  # the variant refused these inputs: it cannot run them here
            _record_unavailable(folder, base, str(exc))
            return folder
        summary = _analyse(trace, folder, variant, base, table)
        _add_viewer(folder, summary, screenshot, had_viewer)
    except Exception as exc:
        raise ProfilingError(
            f"profiling {variant.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return folder


def _analyse(trace: dict, folder: Path, variant: Variant, base: dict, table: str | None) -> dict:
    """A run's trace into the variant's folder, its claims checked for the device it ran on."""
    return write_artifacts(
        trace, folder, spec=specs.spec(variant.name), base=base, device_type=base["device_type"],
        table_txt=table,
    )  # fmt: skip


def add_viewer_screenshot(folder: Path, summary: dict) -> Path | None:
    """viewer.png: the trace as a trace viewer shows it, one forward (a training step's backward),
    the chapter's event selected.

    Where no browser or viewer files are here, says so once (with how to get them) and skips.
    """
    from attn.profiling import viewer  # a module of its own entry point: imported when used

    try:  # 680 CSS px: the page's column; at twice the pixels, shown at half size or larger
        trace = read_trace(folder / artifacts.TRACE)
        select = focus(summary, trace, specs.spec(summary.get("variant") or ""))
        shown = BACKWARD_RANGE if "backward" in summary else FORWARD_RANGE  # a step: its backward
        facts = viewer.screenshot(
            folder / artifacts.TRACE, folder / artifacts.VIEWER, select=select, range_name=shown,
            width=680, height=560,
        )  # fmt: skip
    except viewer.ViewerUnavailable as e:
        if not _skipped_viewer:
            _skipped_viewer.append(str(e))
            say(f"viewer.png skipped: {e}", err=True)
        note_no_viewer(folder, summary, f"the run that made this set took none: {e}")
        return None
    # Where the marked event is, as fractions of the picture's width: a phone scrolls to it.
    write_json(folder / artifacts.SUMMARY, {**summary, "viewer": {"selected": facts["selected"],
                                                               "mark": facts.get("mark")}})  # fmt: skip
    return folder / artifacts.VIEWER


def note_no_viewer(folder: Path, summary: dict, why: str) -> None:
    """Say in the summary why the variant has no viewer.png, for the page to say it too."""
    write_json(folder / artifacts.SUMMARY, {**summary, "viewer": {"missing": why}})


def _add_viewer(folder: Path, summary: dict, screenshot: bool, had_viewer: bool) -> None:
    """The screenshot (or why there is none), and the variant noted if its old one is gone."""
    if screenshot:
        add_viewer_screenshot(folder, summary)
    else:
        note_no_viewer(
            folder, summary, "the run that made this set took no screenshots (--no-screenshot)"
        )
    if had_viewer and not (folder / artifacts.VIEWER).is_file():
        _removed_viewers.append(folder.name)


def replaced_set_line(out_root: Path, device: str) -> str | None:
    """One line when this run writes into a committed set: it replaces that set's numbers."""
    folder = artifacts.hardware_dir(out_root, hardware_slug(device))
    if not is_committed(folder):
        return None
    return (
        f"{folder}/ is a committed set: this run replaces what it profiles there with this "
        f"machine's numbers (`git checkout {folder}` restores it)"
    )


def removed_viewers_line(out_root: Path, device: str) -> str | None:
    """One line naming the variants whose viewer.png this run removed with the trace it showed."""
    if not _removed_viewers:
        return None
    names = ", ".join(_removed_viewers)
    folder = artifacts.hardware_dir(out_root, hardware_slug(device))
    _removed_viewers.clear()
    restore = (
        f" (`git checkout {folder}` restores the committed set)" if is_committed(folder) else ""
    )
    return (
        f"viewer.png removed for {names}: each showed the trace this run replaced, and this run "
        f"took none{restore}"
    )


def example_flags(config: ProfileConfig) -> list[str]:
    """The flags that make an example run exactly `config` (every value spelled out, but --seq-k
    where it is --seq: the ring example has none)."""
    flags = [
        "--device", config.device, "--batch", str(config.batch), "--heads", str(config.heads),
        "--seq", str(config.seq_q), "--head-dim", str(config.head_dim), "--dtype", config.dtype,
    ]  # fmt: skip
    if config.seq_k != config.seq_q:
        flags += ["--seq-k", str(config.seq_k)]
    if config.kv_heads is not None:  # a decode step: grouped-query K and V heads
        flags += ["--kv-heads", str(config.kv_heads)]
    return flags + ([] if config.is_causal else ["--no-causal"])


def profile_example(
    variant: Variant, script: Sequence[str], config: ProfileConfig, out_root: Path, *,
    screenshot: bool = False,
) -> Path:  # fmt: skip
    """Run an example script (`[path, its own flags...]`) with `config`, then analyse the trace it
    wrote (one per rank, for a variant run on several) into `<out>/<hardware>/<variant>/`. The
    numbers published are those of that very trace. An example that times its first calls runs
    on emptied compile caches: twice (cold, for those times only, then warm) where it is the first
    to compile in this run, once where others compiled before it (see compile_caches)."""
    base = base_summary(variant, config)
    folder = artifacts.variant_dir(out_root, base["hardware"], variant.name)
    spec = specs.spec(variant.name)
    reason = why_not_here(variant, config, spec.ranks if spec else 1)
    if reason is not None:
        _record_unavailable(folder, base, reason)
        return folder
    had_viewer = (folder / artifacts.VIEWER).is_file()
    artifacts.check_replaceable(folder)  # before minutes of work, not after
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(folder.parent)  # what a killed run left
    first = Path("rank0" if spec and spec.ranks > 1 else "") / artifacts.TRACE
    with contextlib.ExitStack() as stack:
        env = None
        if spec and spec.times_first_calls:
            env = _first_calls(stack, variant, script, config, folder, base)
        written = stack.enter_context(_example_run(variant, script, config, folder, first, env))
        if spec and spec.ranks > 1:  # no screenshot: the ranks' figure is its picture
            try:
                _analyse_ranks(written, folder, spec, base)
            except Exception as exc:
                raise ProfilingError(f"analysing {variant.name}'s traces failed: {exc}") from exc
            return folder
        summary = _analyse_written(written, folder, variant, base)
    _add_viewer(folder, summary, screenshot, had_viewer)
    return folder


def _first_calls(
    stack: contextlib.ExitStack, variant: Variant, script: Sequence[str], config: ProfileConfig,
    folder: Path, base: dict,
) -> dict[str, str]:  # fmt: skip
    """The compile caches the profiled run of a compiled example gets (the run's, else its own),
    with its cold run done first where it is the run's first compile; what the summary says of
    them goes into `base`."""
    chain = _chains[-1] if _chains else stack.enter_context(_chain())
    if not chain["ran"]:  # the run's first compile: once cold, then the one profiled, warm
        chain["ran"].append(variant.name)
        with _example_run(variant, script, config, folder, COMPILE_JSON, chain["env"]) as cold:
            base["cold_first_calls_seconds"] = json.loads((cold / COMPILE_JSON).read_text())
        chain["cold_start"] = (variant.name, base["cold_first_calls_seconds"]["first"])
        # A line between the two runs: together they take a minute on a busy machine.
        say(f"{variant.name}: cold start {chain['cold_start'][1]:.1f} s; the warm rerun next")
        return chain["env"]
    name, seconds = chain["cold_start"] or (None, None)  # None: the first one's cold run failed
    base["first_calls_after"] = {
        "variants": list(chain["ran"]), "cold_start_variant": name, "cold_start_seconds": seconds,
    }  # fmt: skip
    chain["ran"].append(variant.name)  # once, profiled, on what the compiles before it left
    return chain["env"]


@contextlib.contextmanager
def compile_caches() -> Iterator[None]:
    """Examples that compile, profiled inside, share one set of compile caches, emptied for the
    run: the first of them runs twice on it, cold, then warm; each later one runs once, on what
    the compiles before it left. Most of a cold start is Inductor's setup on this machine
    (headers built, vector ISAs probed), which every later compile finds cached: measured once,
    not once per variant (a minute less on two cores)."""
    with _chain():
        yield


@contextlib.contextmanager
def _chain() -> Iterator[dict]:
    with empty_compile_cache() as env:
        chain = {"env": env, "ran": [], "cold_start": None}
        _chains.append(chain)
        try:
            yield chain
        finally:
            _chains.remove(chain)


@contextlib.contextmanager
def _example_run(
    variant: Variant, script: Sequence[str], config: ProfileConfig, folder: Path, wanted: Path,
    env: dict[str, str] | None,
) -> Iterator[Path]:  # fmt: skip
    """Run the example with `config` (and `env`) into a scratch folder beside the set; the folder
    it wrote, which must hold `wanted`, until the scratch is removed on exit."""
    # Scratch beside the set, named as atomic's is: a run killed here leaves it for the next to remove.
    with tempfile.TemporaryDirectory(
        prefix=scratch_prefix(variant.name), dir=folder.parent
    ) as scratch:
        log = Path(scratch) / "output.txt"
        argv = [*script, *example_flags(config), "--out", scratch]
        status = run_script(argv, log, preloaded=not is_gpu(config.device), env=env)
        written = Path(scratch) / variant.name
        if status != 0 or not (written / wanted).is_file():
            cache = " on empty compile caches" if env else ""
            raise ProfilingError(
                f"{' '.join(script)}{cache} exited with {status} and no "
                f"{variant.name / wanted}: {last_line(log)}"
            )
        yield written


def _analyse_written(written: Path, folder: Path, variant: Variant, base: dict) -> dict:
    """An example's one trace, with what it wrote beside it (its table, compile times, what
    autograd saved), into the variant's folder."""
    table_path = written / artifacts.TABLE_TXT
    table = table_path.read_text() if table_path.is_file() else None
    if (written / COMPILE_JSON).is_file():  # a compiled example timed its first calls
        base["first_calls_seconds"] = json.loads((written / COMPILE_JSON).read_text())
    trace = read_trace(written / artifacts.TRACE)
    if (written / "saved.json").is_file():  # a training example listed what autograd saved
        trace.raw[SAVED_KEY] = json.loads((written / "saved.json").read_text())
    try:
        return _analyse(trace, folder, variant, base, table)
    except Exception as exc:
        raise ProfilingError(f"analysing {variant.name}'s trace failed: {exc}") from exc


def _analyse_ranks(written: Path, folder: Path, spec, base: dict) -> dict:
    """An example's rank<r>/ traces and tables into the variant's folder: each rank's, then the
    summary across them and the ranks' figure. In this process, one rank after another: a run's
    progress bar has a thread of its own, which a worker must not be forked beside."""
    ranks = artifacts.rank_dirs(written)
    tables = {
        int(r.name[4:]): (r / artifacts.TABLE_TXT).read_text()
        for r in ranks
        if (r / artifacts.TABLE_TXT).is_file()
    }
    traces = [r / artifacts.TRACE for r in ranks]
    return write_ranked(traces, folder, base=base, spec=spec, tables=tables, workers=1)


def finish_set(out_root: Path, device: str, load: dict | None = None) -> Path:
    """Rewrite the set's environment.json (with the run's load), overview.svg and index.json."""
    folder = artifacts.hardware_dir(out_root, hardware_slug(device))
    write_json(folder / artifacts.ENVIRONMENT, environment(device, load))
    write_overview(folder, specs.names(), specs.REFERENCE)
    write_diffs(folder, specs.diff_pairs())
    write_claims(folder, specs)  # the timing claims read the summaries just written
    artifacts.write_manifest(folder)
    return folder
