"""python -m attn.profiling: record, analyse and re-check profiles.

run      [--variants NAME...] [shape flags]      profile variants here into OUT/<hardware>/
example  VARIANT SCRIPT [its flags] [shape flags] run an example, analyse the trace it wrote
analyze  TRACE... [--range NAME] [--variant NAME] --out DIR
                                                 any Kineto trace -> summary, tables, timeline
recheck  [ROOT] [--check]                        re-evaluate claims on committed traces
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import attn
from attn.profiling import layout
from attn.profiling.analyze import device_name_of, recheck, write_artifacts
from attn.profiling.config import DTYPES, ProfileConfig, default_config, default_device
from attn.profiling.decoding import config_for
from attn.profiling.diff import main as diff_main
from attn.profiling.flags import device, out_folder, positive
from attn.profiling.run import ProfilingError, finish_set, profile_example, profile_variant
from attn.profiling.trace import TraceFormatError, load_trace


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every entry point shares: where to write, on what device, which shape."""
    here = default_device()
    parser.add_argument("--out", type=out_folder, default=Path("profiles"), help="artifact root")
    parser.add_argument(
        "--device", type=device, default=here, help=f"cpu or cuda (default: {here})"
    )
    shape = parser.add_argument_group(
        "shape (defaults: the article's on CUDA, 2 x 8 x 1024 x 64 on CPU)"
    )
    shape.add_argument("--batch", type=positive)
    shape.add_argument("--heads", type=positive)
    shape.add_argument("--seq", type=positive, help="query (and key) sequence length")
    shape.add_argument("--seq-k", type=positive, help="key/value sequence length (default: --seq)")
    shape.add_argument("--head-dim", type=positive)
    shape.add_argument("--dtype", choices=sorted(DTYPES))
    shape.add_argument("--no-causal", action="store_true", help="attend to every key")
    parser.add_argument(
        "--no-screenshot", action="store_true", help="skip viewer.png (the trace-viewer picture)"
    )


def config_from(args: argparse.Namespace) -> ProfileConfig:
    """The device's default config with the flags the user gave laid over it."""
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


def _progress(console: Console) -> Progress:
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    ]
    return Progress(*columns, console=console, transient=True)


def run(
    names: Sequence[str],
    config: ProfileConfig,
    out: Path,
    console: Console,
    screenshot: bool = False,
) -> list[Path]:
    """Profile each named variant with a progress bar; returns their artifact folders."""
    folders = []
    with _progress(console) as progress:
        task = progress.add_task("profiling", total=len(names))
        for name in names:
            progress.update(task, description=f"profiling {name}")
            variant_config = config_for(name, config)  # a decode step for the decoding variants
            folders.append(
                profile_variant(attn.get_variant(name), variant_config, out, screenshot=screenshot)
            )
            progress.advance(task)
    finish_set(out, config.device)
    return folders


def report(folders: Sequence[Path], console: Console) -> None:
    """One row per variant: times and counts from its summary; then where the artifacts are."""
    table = Table(
        "variant",
        "CPU µs/fwd",
        "device µs/fwd",
        "ATen ops/fwd",
        "kernels/fwd",
        "memcpy/fwd",
        "memset/fwd",
    )
    fmt = lambda x: "-" if x is None else f"{x:,.1f}"  # noqa: E731
    unavailable = []
    for folder in folders:
        s = json.loads((folder / layout.SUMMARY).read_text())
        if not s["available"]:
            table.add_row(s["variant"], "[dim]not available[/dim]")
            unavailable.append(f"{s['variant']}: {s['reason']}")
            continue
        memcpy = s.get("memcpy_per_forward")
        table.add_row(
            s["variant"],
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
        console.print(f"artifacts in {folders[0].parent}/")


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    folders = run(args.variants, config_from(args), args.out, console, not args.no_screenshot)
    report(folders, console)
    return 0


def cmd_example(args: argparse.Namespace, console: Console, script_flags: list[str]) -> int:
    config = config_for(args.variant, config_from(args))
    variant = attn.get_variant(args.variant)
    console.print(f"running {args.script} {' '.join(script_flags)} for {variant.name}")
    folder = profile_example(
        variant,
        [str(args.script), *script_flags],
        config,
        args.out,
        screenshot=not args.no_screenshot,
    )
    finish_set(args.out, config.device)
    report([folder], console)
    return 0


def cmd_analyze(args: argparse.Namespace, console: Console) -> int:
    if args.variant and len(args.traces) > 1:
        raise SystemExit("error: --variant names one variant: give one trace with it")
    folders = []
    for path in args.traces:
        trace = load_trace(path)
        name = args.variant or path.name.split(".")[0]
        base = {"variant": name, "source": path.name, "device_name": device_name_of(trace)}
        folder = args.out / name
        try:
            write_artifacts(trace, folder, variant=args.variant, base=base, range_name=args.range)
        except TraceFormatError as e:
            raise TraceFormatError(f"{path}: {e}") from e
        folders.append(folder)
    report(folders, console)
    for folder in folders:
        summary = json.loads((folder / layout.SUMMARY).read_text())
        console.print(f"{folder.name}: {summary['forwards']} range(s) named {summary['range']}")
        for claim in summary.get("claims", []):
            verdict = {True: "holds", False: "does not hold", None: "cannot tell"}[claim["holds"]]
            console.print(f"  {verdict}: {claim['text']} ({claim['observed']})")
    return 0


def cmd_recheck(args: argparse.Namespace, console: Console) -> int:
    changed = recheck(args.root, write=not args.check)
    for row in changed:
        console.print(f"claims changed in {row['path']}")
        for before, after in zip(row["before"] or [], row["after"], strict=False):
            if before != after:
                console.print(f"  was: {before}\n  now: {after}")
    sets = len(layout.hardware_dirs(args.root))
    console.print(
        f"rechecked {sets} hardware set(s) under {args.root}: {len(changed)} summary(ies) differ"
    )
    return 1 if (args.check and changed) else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m attn.profiling", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    names = [v.name for v in attn.variants()]

    run_p = sub.add_parser("run", help="profile variants on this machine")
    add_run_arguments(run_p)
    run_p.add_argument(
        "--variants", nargs="+", choices=names, default=names, metavar="NAME",
        help=f"variants to profile (default: all): {', '.join(names)}",
    )  # fmt: skip

    ex_p = sub.add_parser("example", help="run an example script and analyse the trace it wrote")
    add_run_arguments(ex_p)
    ex_p.add_argument(
        "variant", choices=names, metavar="VARIANT", help="the variant the run profiles"
    )
    ex_p.add_argument("script", type=Path, help="the example, e.g. examples/sdpa_attention.py")

    an_p = sub.add_parser("analyze", help="analyse any Kineto trace (.json or .json.gz)")
    an_p.add_argument("traces", nargs="+", type=Path, metavar="TRACE")
    an_p.add_argument(
        "--range",
        help="range name (a trailing * matches a prefix); default attn_fwd, else ProfilerStep#N",
    )
    an_p.add_argument(
        "--variant", choices=names, metavar="NAME", help="check this variant's claims"
    )
    an_p.add_argument("--out", type=out_folder, required=True, help="writes OUT/<name>/")

    diff_p = sub.add_parser(
        "diff", help="what changed between two runs (variant folders or traces)"
    )
    diff_p.add_argument(
        "args", nargs=argparse.REMAINDER, help="A B [--out FILE] [--range NAME] [--all]"
    )

    re_p = sub.add_parser("recheck", help="re-evaluate claims against committed traces")
    re_p.add_argument("root", nargs="?", type=Path, default=Path("profiles"))
    re_p.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a summary's claims differ"
    )
    return p


def _stop(signum, frame) -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C: scratch is removed, the last set stays."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signals = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    before = {s: signal.signal(s, _stop) for s in signals}
    try:
        return _main(argv)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _main(argv: Sequence[str] | None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and args.command != "example":
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    console = Console(stderr=True)
    try:
        if args.command == "run":
            return cmd_run(args, console)
        if args.command == "example":
            return cmd_example(args, console, extra)
        if args.command == "analyze":
            return cmd_analyze(args, console)
        if args.command == "diff":
            return diff_main(args.args)
        return cmd_recheck(args, console)
    except (ProfilingError, TraceFormatError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # one line, whatever the terminal's width
        return 1
    except KeyboardInterrupt:
        console.print("interrupted: the previous artifacts are left as they were")
        return 130


if __name__ == "__main__":
    sys.exit(main())
