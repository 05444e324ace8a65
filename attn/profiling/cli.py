"""attn-profile (or python -m attn.profiling): record, analyse, compare and re-check profiles.

run      [--variants NAME...] [shape flags]      profile variants here into OUT/<hardware>/
example  [VARIANT...] [shape flags]              run variants' examples, analyse their traces
analyze  TRACE... [--range NAME] [--variant NAME] --out DIR
                                                 any Kineto trace -> summary, tables, timeline
                                                 (a folder of rank traces: each rank's, compared)
diff     A B [--fail-on RULES] [--json OUT]      what changed between two runs or sets; a CI gate
diagnose TRACE [--json OUT]                      find the attention in any trace, and what to fix
                                                 (a folder of rank traces: every rank's, compared)
recheck  [ROOT] [--check]                        re-evaluate claims on committed traces

Only run and example import torch (and only when they run): analyze, diff, diagnose and recheck
read traces with attn.traces and the specs' data, on machines where torch is not installed.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

import attn
from attn import specs
from attn.profiling.flags import (
    DTYPE_NAMES,
    ProfilingError,
    device,
    out_folder,
    positive,
    variant_name,
    wide_console,
)
from attn.traces.common import artifacts
from attn.traces.common.atomic import RefusedOutput, check_output, staged_set, write_json
from attn.traces.common.terminal import say, shown
from attn.traces.compare import gate
from attn.traces.diagnosis import diagnose
from attn.traces.diagnosis.rank_report import report_ranks
from attn.traces.diagnosis.report import (
    report as print_diagnosis,  # cli's own report() prints folders
)
from attn.traces.read.trace import Trace, TraceFormatError, device_name_of, read_trace

if TYPE_CHECKING:
    from rich.progress import Progress

    from attn.profiling.config import ProfileConfig

CHECKOUT = Path(attn.__file__).resolve().parents[1]  # where examples/ is, in a checkout


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every entry point shares: where to write, on what device, which shape."""
    parser.add_argument(
        "--out", type=out_folder, default=Path("profiles"), help="artifact root (default: profiles)"
    )
    parser.add_argument(
        "--device", type=device, help="cpu or cuda (default: cuda where torch sees a GPU, else cpu)"
    )
    shape = parser.add_argument_group(
        "shape (defaults: the article's on CUDA, 2 x 8 x 1024 x 64 on CPU)"
    )
    shape.add_argument("--batch", type=positive, help="batch size")
    shape.add_argument("--heads", type=positive, help="attention heads")
    shape.add_argument("--seq", type=positive, help="query (and key) sequence length")
    shape.add_argument("--seq-k", type=positive, help="key/value sequence length (default: --seq)")
    shape.add_argument("--head-dim", type=positive, help="size of each head")
    shape.add_argument("--dtype", choices=sorted(DTYPE_NAMES), help="input dtype")
    shape.add_argument("--no-causal", action="store_true", help="attend to every key")
    parser.add_argument(
        "--no-screenshot", action="store_true", help="skip viewer.png (the trace-viewer picture)"
    )


def config_from(args: argparse.Namespace) -> ProfileConfig:
    """The device's default config with the flags the user gave laid over it."""
    from attn.profiling.config import ProfileConfig, default_config, default_device

    args.device = args.device or default_device()
    base = default_config(args.device)
    seq = base.seq_q if args.seq is None else args.seq
    given = {
        "batch": args.batch,
        "heads": args.heads,
        "seq_q": seq,
        "seq_k": seq if args.seq_k is None else args.seq_k,
        "head_dim": args.head_dim,
        "dtype": args.dtype,
        "is_causal": not args.no_causal,
    }
    return ProfileConfig(**{**base.__dict__, **{k: v for k, v in given.items() if v is not None}})


def progress_bar(console: Console) -> Progress:
    """A bar that shows while work goes on and vanishes after (shown only on a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    return Progress(*columns, TimeElapsedColumn(), console=console, transient=True)


def run(names: Sequence[str], profile, config: ProfileConfig, out: Path, console: Console) -> int:
    """`profile(variant, its config, out)` for each named variant under a progress bar, then the
    set's files and a report; a variant that fails is reported and the others still run."""
    from attn.profiling.environment import hardware_slug
    from attn.profiling.machine_load import busy_line, load_before_a_run
    from attn.profiling.run import removed_viewers_line, replaced_set_line

    if replaced := replaced_set_line(out, config.device):
        console.print(shown(replaced))
    if busy := busy_line(load_before_a_run()):
        console.print(busy)
    set_folder = artifacts.hardware_dir(out, hardware_slug(config.device))
    # Into a copy of the set beside it, swapped in only when the run is whole: an interrupted or
    # failed run leaves every committed file as it was (a SIGINT at 120 s had changed 40).
    with staged_set(set_folder) as staged:
        folders, failed = _profile_all(names, profile, config, staged, console)
    folders = [set_folder / f.name for f in folders]
    report(folders, console)
    if removed := removed_viewers_line(out, config.device):
        say(removed, err=True)
    for line in failed:
        say(f"error: {line}", err=True)
    return 1 if failed else 0


def _profile_all(names, profile, config: ProfileConfig, out: Path, console: Console):
    """(the folders written, the failures) of profiling each variant into out, then the set's
    files (environment, overview, diffs, manifest)."""
    from attn.profiling import viewer  # its own entry point too: imported when used
    from attn.profiling.config import config_for
    from attn.profiling.machine_load import adopting_orphans, load_now, load_over
    from attn.profiling.run import finish_set

    folders, failed = [], []
    with adopting_orphans():  # a browser's renderers outlive it: their CPU time is the run's
        before = load_now()
        with progress_bar(console) as progress, viewer.session():  # one browser for every shot
            for i, name in enumerate(progress.track(names, description="profiling")):
                stop_if_asked()
                progress.update(progress.tasks[0].id, description=f"profiling {name}")
                start = time.perf_counter()
                try:  # a decode step for the decoding variants
                    folders.append(profile(attn.get_variant(name), config_for(name, config), out))
                except ProfilingError as exc:
                    failed.append(str(exc))
                # A line per variant, in a log too: a long run never goes a minute without one.
                console.print(
                    f"profiled {name} ({i + 1}/{len(names)}, {time.perf_counter() - start:.1f} s)"
                )
        load = load_over(before, load_now())
    finish_set(out, config.device, load)
    return folders, failed


def report(folders: Sequence[Path], console: Console) -> None:
    """One row per variant: times and counts from its summary; then where the artifacts are."""
    columns = ("CPU µs", "device µs", "ATen ops", "kernels", "memcpy", "memset")
    table = Table("variant", *(f"{c}/fwd" for c in columns))
    fmt = lambda x: "-" if x is None else f"{x:,.1f}"  # noqa: E731
    unavailable = []
    for folder in folders:
        s = artifacts.read_summary(folder / artifacts.SUMMARY)
        if not s["available"]:
            table.add_row(shown(s["variant"]), "[dim]not available[/dim]")
            unavailable.append(shown(f"{s['variant']}: {s['reason']}"))
            continue
        memcpy = s.get("memcpy_per_forward")
        table.add_row(
            shown(s["variant"]),
            fmt(s["cpu_time_us"]),
            fmt(s["device_time_us"]),
            fmt(s["ops_per_forward"]),
            fmt(s["kernels_per_forward"]),
            "-" if memcpy is None else (", ".join(f"{n:g} {d}" for d, n in memcpy.items()) or "0"),
            fmt(s.get("memset_per_forward")),
        )
    console.print(table)
    for line in unavailable:
        console.print(f"[dim]{line}[/dim]")
    if folders:
        console.print(shown(f"artifacts in {folders[0].parent}/"))


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from attn.profiling.config import check_all_fit
    from attn.profiling.run import profile_variant

    config = config_from(args)
    check_all_fit(args.variants, config)

    shot = not args.no_screenshot
    profile = lambda variant, config, out: profile_variant(variant, config, out, screenshot=shot)  # noqa: E731
    return run(args.variants, profile, config, args.out, console)


def cmd_example(args: argparse.Namespace, console: Console) -> int:
    """Run each variant's example script (its spec names it and its flags), analyse each trace."""
    from attn.profiling.config import check_all_fit
    from attn.profiling.run import compile_caches, profile_example

    names, config = args.variants or specs.names(), config_from(args)
    check_all_fit(names, config)  # the script would grow until the kernel ended it, unsaid

    def profile(variant, config, out: Path):
        path, *flags = specs.spec(variant.name).example
        if not (CHECKOUT / path).is_file():
            raise ProfilingError(f"{path} is not here: the examples live in the repository")
        script = [str(CHECKOUT / path), *flags]
        return profile_example(variant, script, config, out, screenshot=not args.no_screenshot)

    with compile_caches():  # the compiled examples' caches: one cold start for the whole run
        return run(names, profile, config, args.out, console)


def output_names(traces: Sequence[Path], variant: str | None) -> list[str]:
    """A folder name per trace, each its own: its name before the first dot, with its folder's
    name in front where two would share one (every example writes trace.json.gz), then numbered
    past every name already given or taken."""
    if variant:
        return [variant]
    names = [p.name.split(".")[0] or "trace" for p in traces]
    names = [
        f"{p.resolve().parent.name}-{n}" if names.count(n) > 1 else n
        for p, n in zip(traces, names, strict=True)
    ]
    given: list[str] = []
    for n in names:
        number, name = 1, n
        while names.count(n) > 1 and (name == n or name in names) or name in given:
            name, number = f"{n}-{number}", number + 1
        given.append(name)
    return given


def check_analyze_output(traces: Sequence[Path], folders: Sequence[Path]) -> None:
    """Refused before any reading: a folder that holds an input trace or what analyze cannot
    write again (a run's table.txt and viewer.png)."""
    for folder in folders:
        for trace in traces:
            if folder.resolve() in trace.resolve().parents:
                raise artifacts.RefusedFolder(
                    f"{folder} holds {trace}, the trace read, which attn.profiling did not "
                    "write: it would be lost; give --out another folder"
                )
        artifacts.check_replaceable(folder, writes=artifacts.ANALYZED_FILES)


def read_kept(path: Path) -> Trace:
    """A trace read, then frozen out of the cyclic collector with all else alive (the trace read
    before handed back to it): its collections would walk the million objects again and again
    for no cycle (JSON holds none), and the one at exit free them one by one. `main` hands them
    back when called from Python rather than as the process's own command."""
    gc.unfreeze()
    trace = read_trace(path)
    gc.freeze()
    return trace


def analyze_rank_folders(paths: Sequence[Path], folders: Sequence[Path], spec, console) -> None:
    """Each folder of rank traces among the paths, its ranks read in parallel, into its folder.
    Before any progress bar: a bar's thread must not be there when the workers are forked."""
    from attn.traces.ranks.folder import rank_traces
    from attn.traces.sets.rank_artifacts import write_ranked

    for path, folder in zip(paths, folders, strict=True):
        if path.is_dir():
            console.print(shown(f"reading the ranks of {path} in parallel"))
            base = {"variant": folder.name, "source": path.name}
            write_ranked(rank_traces(path), folder, base=base, spec=spec)


def cmd_analyze(args: argparse.Namespace, console: Console) -> int:
    from attn.traces.sets.analyze import ANALYSIS_STEPS, write_artifacts

    if args.variant and len(args.traces) > 1:
        raise SystemExit("error: --variant names one variant: give one trace with it")
    names = output_names(args.traces, args.variant)
    check_analyze_output(args.traces, [args.out / name for name in names])
    folders = []
    spec = specs.spec(args.variant or "")
    analyze_rank_folders(args.traces, [args.out / n for n in names], spec, console)
    with progress_bar(console) as bar:  # a trace of a whole training step takes a while
        for path, name in zip(args.traces, names, strict=True):
            if path.is_dir():
                folders.append(args.out / name)
                continue
            task = bar.add_task(f"reading {path.name}", total=1 + len(ANALYSIS_STEPS))
            trace = read_kept(path)
            base = {"variant": name, "source": path.name, "device_name": device_name_of(trace.raw)}
            folder = args.out / name
            step = lambda what, task=task, path=path: bar.update(  # noqa: E731
                task, advance=1, description=f"{what} {path.name}"
            )
            try:
                write_artifacts(
                    trace, folder, spec=spec, base=base, range_name=args.range, progress=step,
                )  # fmt: skip
            except TraceFormatError as e:
                raise TraceFormatError(f"{path}: {e}") from e
            bar.remove_task(task)
            folders.append(folder)
    report(folders, console)
    for folder in folders:
        summary = artifacts.read_summary(folder / artifacts.SUMMARY)
        console.print(
            shown(f"{folder.name}: {summary['forwards']} range(s) named {summary['range']}")
        )
        for problem in summary.get("problems", []):
            console.print(shown(f"  cannot tell: {problem}"))
        for claim in summary.get("claims", []):
            verdict = {True: "holds", False: "does not hold", None: "cannot tell"}[claim["holds"]]
            console.print(shown(f"  {verdict}: {claim['text']} ({claim['observed']})"))
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    """The attention in a trace and what to fix, on the terminal (stdout) and, with --json, in a
    file; for a folder of rank traces, every rank's, and the ranks compared."""
    if args.json is not None:  # before the reading: a bad output is said at once
        check_output(args.json, (args.trace,))
    if args.trace.is_dir():
        result = diagnose.diagnose_ranks(args.trace)
        show = report_ranks
    else:
        result = diagnose.diagnose(read_kept(args.trace))
        show = print_diagnosis
    if args.json is not None:
        write_json(args.json, result)
    show(result, wide_console(stderr=False))  # stdout, 160 columns into a pipe or a log
    return 0


def cmd_recheck(args: argparse.Namespace, console: Console) -> int:
    from attn.traces.sets.recheck import recheck

    changed = recheck(args.root, specs, write=not args.check)
    for row in changed:
        # soft_wrap: a path stays on one line however narrow the console, to be copied whole
        console.print(
            shown(f"{'differs' if args.check else 'rewritten'}: {row['path']}"), soft_wrap=True
        )
        for before, after in zip(row["before"] or [], row["after"] or [], strict=False):
            if before != after:
                console.print(shown(f"  was: {before}"))
                console.print(shown(f"  now: {after}"))
    sets = len(artifacts.hardware_dirs(args.root))
    console.print(
        shown(f"rechecked {sets} hardware set(s) under {args.root}: {len(changed)} file(s) differ")
    )
    return 1 if (args.check and changed) else 0


EXAMPLES = {  # each subcommand's --help ends with these; tests/test_profiling_cli.py runs them
    "run": """\
  %(prog)s --variants naive inplace --device cpu --seq 256 --no-screenshot
      profile two variants in this process into profiles/<hardware>/, at a shorter sequence""",
    "example": """\
  %(prog)s inplace --device cpu --seq 256 --no-screenshot
      run examples/inplace_attention.py as a reader would; analyse its trace into
      profiles/<hardware>/inplace/""",
    "analyze": """\
  %(prog)s runs/naive/trace.json.gz --variant naive --out analysed
      the trace examples/naive_attention.py wrote: summary, tables, timeline, naive's claims
  %(prog)s runs/naive/trace.json.gz --range "ProfilerStep#*" --out analysed
      counted per profiler step, as for a trace without attn_fwd ranges
  %(prog)s job-traces --out analysed
      a folder of traces, one per rank: each rank's into analysed/job-traces/rank<r>/, then the
      ranks side by side (summary.json) and on one time axis (ranks.svg)""",
    "diagnose": """\
  %(prog)s runs/naive/trace.json.gz --json diagnosis.json
      its attention, the implementation, what to fix; the same as JSON in diagnosis.json
  %(prog)s job-traces
      a folder of traces, one per rank (ours: rank<r>/trace.json.gz), each read in a process of
      its own: per rank its compute and communication, then the imbalance and the straggler""",
    "recheck": """\
  %(prog)s profiles --check
      measure the committed traces again, change nothing: exit 1 if any file differs (CI)
  %(prog)s profiles
      mend what differs: summaries, claims, diffs, each set's manifest and overview""",
}


def program() -> str:
    """How this command was called: `attn-profile` where installed as one, else the module."""
    return (
        "attn-profile" if Path(sys.argv[0]).stem == "attn-profile" else "python -m attn.profiling"
    )


def parser() -> argparse.ArgumentParser:  # builds without torch: defaults come when a run starts
    """The command line: one subcommand each for run, example, analyze, diff, diagnose, recheck."""
    p = argparse.ArgumentParser(
        prog=program(), description=__doc__.splitlines()[0],
        epilog="Each command's --help has examples; analyze, diff, diagnose and recheck need no torch.",
    )  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    for add in (add_run, add_example, add_analyze, add_diff, add_diagnose, add_recheck):
        add(sub)
    return p


def command(
    sub: argparse._SubParsersAction, name: str, help: str, **kwargs
) -> argparse.ArgumentParser:
    """A subcommand described by its help, its --help ending in its EXAMPLES unless told."""
    examples = kwargs.pop("epilog", None) or f"examples:\n{EXAMPLES[name]}\n"
    return sub.add_parser(
        name, help=help, description=kwargs.pop("description", f"{help[0].upper()}{help[1:]}."),
        epilog=examples, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs,
    )  # fmt: skip


def add_run(sub: argparse._SubParsersAction) -> None:
    """`run`: the variants by name, every one by default."""
    names = specs.names()
    run_p = command(sub, "run", "profile variants on this machine")
    add_run_arguments(run_p)
    run_p.add_argument(
        "--variants", nargs="+", type=variant_name, default=names, metavar="NAME",
        help=f"variants to profile (default: all): {', '.join(names)}",
    )  # fmt: skip


def add_example(sub: argparse._SubParsersAction) -> None:
    """`example`: the variants whose example scripts run."""
    ex_p = command(
        sub, "example", "run variants' example scripts (from a checkout), analyse their traces"
    )
    add_run_arguments(ex_p)
    ex_p.add_argument(
        "variants", nargs="*", type=variant_name, metavar="VARIANT",
        help="whose examples to run (default: every variant's)",
    )  # fmt: skip


def add_analyze(sub: argparse._SubParsersAction) -> None:
    """`analyze`: traces or folders of ranks, the range, whose claims, where to write."""
    an_p = command(
        sub, "analyze", "analyse any Kineto trace (.json or .json.gz), or a folder of ranks"
    )
    an_p.add_argument(
        "traces", nargs="+", type=Path, metavar="TRACE", help="traces, or folders of rank traces"
    )
    an_p.add_argument(
        "--range",
        help="range name (a trailing * matches a prefix); default attn_fwd, else ProfilerStep#N",
    )
    an_p.add_argument(
        "--variant", type=variant_name, metavar="NAME", help="check this variant's claims"
    )
    an_p.add_argument("--out", type=out_folder, required=True, help="writes OUT/<name>/")


def add_diff(sub: argparse._SubParsersAction) -> None:
    """`diff`: its arguments, description and examples are the gate's."""
    diff_p = command(
        sub, "diff", "what changed between two runs or sets; with --fail-on, a CI gate",
        description=gate.DESCRIPTION, epilog=gate.EXAMPLES,
    )  # fmt: skip
    gate.add_arguments(diff_p)


def add_diagnose(sub: argparse._SubParsersAction) -> None:
    """`diagnose`: one trace or folder of ranks, and where to write the JSON."""
    dg_p = command(
        sub, "diagnose", "find the attention in any trace: its implementation and what to fix"
    )
    dg_p.add_argument(
        "trace", type=Path, metavar="TRACE", help="a trace, anyone's, or a folder of rank traces"
    )
    dg_p.add_argument("--json", type=Path, metavar="OUT", help="also write the report as JSON")


def add_recheck(sub: argparse._SubParsersAction) -> None:
    """`recheck`: the folder of sets, and --check to change nothing."""
    re_p = command(sub, "recheck", "measure the committed traces again; mend what differs")
    re_p.add_argument(
        "root", nargs="?", type=Path, default=Path("profiles"),
        help="the folder of hardware sets (default: profiles)",
    )  # fmt: skip
    re_p.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any file differs"
    )


_stop_asked = threading.Event()


def _stop(signum, frame) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: scratch is removed, the last set stays."""
    _stop_asked.set()
    raise KeyboardInterrupt


def stop_if_asked() -> None:
    """Raise KeyboardInterrupt if a stop was asked. One that landed inside a callback whose
    exceptions Python ignores (a weakref's, in a garbage collection) would otherwise be lost."""
    if _stop_asked.is_set():
        raise KeyboardInterrupt


def _unraisable(args) -> None:
    """A stop swallowed inside such a callback is taken up by the next stop_if_asked, not printed
    as an ignored exception; anything else is printed as Python does."""
    if not (
        args.exc_type and issubclass(args.exc_type, KeyboardInterrupt) and _stop_asked.is_set()
    ):
        sys.__unraisablehook__(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv`, else the process's own (then what it read stays frozen: see
    `read_kept`); returns the exit status."""
    try:
        return _with_signals(argv)
    finally:
        if argv is not None:  # called from Python, which goes on: the traces read are its again
            gc.unfreeze()


def _with_signals(argv: Sequence[str] | None) -> int:
    signals = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    _stop_asked.clear()
    before = {s: signal.signal(s, _stop) for s in signals}
    sys.unraisablehook, unraisable = _unraisable, sys.unraisablehook
    try:
        return _main(argv)
    finally:
        sys.unraisablehook = unraisable
        for s, handler in before.items():
            signal.signal(s, handler)


def _main(argv: Sequence[str] | None) -> int:
    p = parser()
    args = p.parse_args(argv)
    console = wide_console()
    try:
        if args.command == "run":
            return cmd_run(args, console)
        if args.command == "example":
            return cmd_example(args, console)
        if args.command == "analyze":
            return cmd_analyze(args, console)
        if args.command == "diff":  # 2 on bad input: 1 is a regression
            return gate.run(args)
        if args.command == "diagnose":
            return cmd_diagnose(args)
        return cmd_recheck(args, console)
    except (
        ProfilingError,
        TraceFormatError,
        artifacts.RefusedFolder,
        artifacts.BrokenSet,
        RefusedOutput,
        OSError,
    ) as exc:
        say(f"error: {exc}", err=True)  # one line, whatever the terminal's width (a full
        return 1  # disk too: what was being written is left out, the previous artifacts stay)
    except KeyboardInterrupt:
        console.print("interrupted: the previous artifacts are left as they were")
        return 130


if __name__ == "__main__":
    sys.exit(main())
