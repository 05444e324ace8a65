"""diff as a gate: which changes between two runs break a rule, for a CI job to fail on.

A and B are two variant folders, two traces, or two sets (`profiles/<hardware>/` folders, compared
variant by variant). Counts come from the traces and do not move with the machine's load, so a rule
on counts is exact. Times decide only where both sides carry the timing pass's intervals
(`timing.json` in the set's folder) and the whole interval of B's median over A's is past the
limit: where the interval holds it, the gate cannot tell, and cannot tell never fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from attn.traces.common import artifacts, intervals, jsonfile
from attn.traces.common.atomic import RefusedOutput, check_output, write_json
from attn.traces.common.terminal import say
from attn.traces.common.units import bytes_text, count_text
from attn.traces.compare.diff import (
    CALLS_EPS,
    CHANGE_WORDS,
    KIND_ORDER,
    changed_word,
    diff,
    name_rank,
    print_diff,
)
from attn.traces.read.scrub import Scrubber, local_paths
from attn.traces.read.trace import TraceFormatError

SCHEMA = 1  # of what `diff --json` writes; raised when a field changes meaning or goes
RULES = {  # --fail-on NAME: what fails the gate
    "counts": "any change in the calls per forward of an op, kernel, memcpy or memset (the default)",
    "ops": "a new op, or more calls of one, per forward",
    "kernels": "a new kernel, or more launches of one, per forward",
    "memcpy": "a new memcpy, or more of one, per forward",
    "memset": "a new memset, or more of one, per forward",
    "peak": "a higher peak memory (peak:10%: higher by more than 10%)",
    "time": "slower, where both sides carry timing.json and its whole interval says so (time:5%)",
}
KIND = {"ops": "op", "kernels": "kernel", "memcpy": "memcpy", "memset": "memset"}
WITH_SHARE = ("peak", "time")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of --fail-on: its name and, for peak and time, the rise allowed (0.1 is 10%)."""

    name: str
    share: float = 0.0

    def __str__(self) -> str:
        return f"{self.name}:{self.share * 100:g}%" if self.share else self.name


def parse_rules(text: str) -> list[Rule]:
    """`counts`, `kernels,memcpy`, `peak:10%`, `time:5%` as rules; ValueError naming a bad one."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, share = part.partition(":")
        if name not in RULES:
            raise ValueError(f"{part!r} is no rule: {', '.join(RULES)} (peak and time take :N%)")
        if share and name not in WITH_SHARE:
            raise ValueError(f"{part!r}: only peak and time take a share (peak:10%)")
        try:
            value = float(share.removesuffix("%")) / 100 if share else 0.0
        except ValueError:
            value = -1.0
        if not (math.isfinite(value) and value >= 0) or (share and not share.endswith("%")):
            raise ValueError(f"{part!r}: give the share as a percentage, e.g. {name}:10%")
        rules.append(Rule(name, value))
    if not rules:
        raise ValueError("name at least one rule: " + ", ".join(RULES))
    return rules


def finding(variant: str, rule: str, text: str, **facts) -> dict:
    """A regression or a cannot-tell: which pair, which rule, the facts, and the line it prints."""
    base = {"variant": variant, "rule": rule, "kind": None, "name": None, "a": None, "b": None}
    return {**base, **facts, "text": text}


def line(found: dict) -> str:
    """'variant: what changed', as the verdict prints it after the rule or 'cannot tell'."""
    return f"{found['variant']}: {found['text']}"


# --- what is compared: two runs, or two sets variant by variant ----------------------------------


def _is_set(path: Path) -> bool:
    """A folder of variant folders (`profiles/<hardware>/`, or the examples' `runs/`)."""
    if (
        not path.is_dir()
        or (path / artifacts.TRACE).is_file()
        or (path / artifacts.SUMMARY).is_file()
    ):
        return False
    return any(
        (p / artifacts.TRACE).is_file() or (p / artifacts.SUMMARY).is_file() for p in _subdirs(path)
    )


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not artifacts.is_scratch(p))


def pairs_of(a: Path, b: Path) -> tuple[list[tuple[Path, Path]], list[str], list[str]]:
    """(the pairs to diff, the variants that ran in A only, those that ran in B only)."""
    for path in (a, b):
        if not path.exists():
            raise TraceFormatError(f"{path}: no such file or folder")
    sets = _is_set(a), _is_set(b)
    if sets == (False, False):
        return [(a, b)], [], []
    if sets != (True, True):
        one, other = (a, b) if sets[0] else (b, a)
        raise TraceFormatError(
            f"{one} is a set of variants and {other} is not: give two sets, or two runs"
        )
    ran_a, ran_b = ({p.name for p in _subdirs(s) if artifacts.ran(p)} for s in (a, b))
    both = sorted(ran_a & ran_b)
    if not both:
        raise TraceFormatError(f"no variant ran in both {a} and {b}: nothing to compare")
    return [(a / n, b / n) for n in both], sorted(ran_a - ran_b), sorted(ran_b - ran_a)


def timing_rows(folder: Path, cache: dict[Path, dict | None]) -> dict | None:
    """{variant: [its checked rows]} of a set's timing.json, None where there is none."""
    if folder not in cache:
        path = folder / artifacts.TIMING
        cache[folder] = None
        if path.is_file():
            try:  # nesting and numbers checked: one line, never a RecursionError
                rows = jsonfile.load(path, dict).get("rows")
            except jsonfile.BadJson as e:
                raise TraceFormatError(f"{e} (not the timing pass's output)") from e
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise TraceFormatError(f"{path}: no list of rows (rerun the timing pass)")
            found: dict[str, list] = {}
            for i, r in enumerate(rows):
                if not isinstance(r.get("variant"), str):
                    raise TraceFormatError(
                        f"{path}: rows[{i}].variant is {r.get('variant')!r}, not a variant's name"
                    )
                where = f"{path}: {r.get('variant')}"
                found.setdefault(r.get("variant"), []).append(intervals.checked(r, where))
            cache[folder] = found
    return cache[folder]


def timed(side: Path, info: dict, cache: dict[Path, dict | None]) -> dict | None:
    """The timing pass's row for one side (its set's timing.json, at its shape), or None."""
    rows = timing_rows(side.parent, cache) if side.is_dir() else None
    found = [
        r
        for r in (rows or {}).get(info["label"], [])
        if (info["shape"] is None or r.get("shape") == info["shape"])
        and (info["dtype"] is None or r.get("dtype") == info["dtype"])
    ]
    return found[0] if len(found) == 1 else None


# --- the rules -------------------------------------------------------------------------------------


def _changed(r: dict, rule: Rule) -> str:
    """'new', 'gone', 'more' or 'fewer'; under counts, which fails on fewer and gone too, the
    word says the rule it breaks ('gone (breaks counts)'), since fewer is no regression."""
    word = CHANGE_WORDS[r["change"]] if r["change"] != "changed" else changed_word(r)
    return f"{word} (breaks {rule})" if rule.name == "counts" else word


def row_findings(label: str, rows: list[dict], rule: Rule) -> list[dict]:
    """counts: every row whose calls per forward changed; ops, kernels...: those of that kind that
    are new or more. Device work first, then what moves data, views last, as the headline."""
    found = []
    for r in sorted(rows, key=lambda r: (KIND_ORDER[r["kind"]], name_rank(r["name"]), r["name"])):
        if rule.name == "counts":
            hit = r["change"] != "same"
        else:
            hit = r["kind"] == KIND[rule.name] and r["calls_b"] > r["calls_a"] + CALLS_EPS
        if hit:
            text = (
                f"{r['name']} ({r['kind']}) {count_text(r['calls_a'])} -> "
                f"{count_text(r['calls_b'])} per forward, {_changed(r, rule)}"
            )
            found.append(finding(label, str(rule), text, kind=r["kind"], name=r["name"],
                                 a=r["calls_a"], b=r["calls_b"]))  # fmt: skip
    return found


def peak_finding(label: str, data: dict, rule: Rule) -> tuple[dict | None, bool]:
    """(the finding, whether it is a regression): B's peak over A's by more than the share."""
    a, b = data["a"].get("peak_memory_bytes"), data["b"].get("peak_memory_bytes")
    if a is None or b is None:
        side = "A" if a is None else "B"
        text = f"peak memory: not recorded in {side} (profile with profile_memory=True)"
        return finding(label, str(rule), text, kind="peak_memory_bytes", a=a, b=b), False
    for side, value in (("A", a), ("B", b)):  # a count of bytes: NaN or -5 is no verdict
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**63:
            raise TraceFormatError(
                f"{data[side.lower()]['source']}: peak_memory_bytes in {side} is {value!r}, "
                "not a count of bytes"
            )
    if b <= a * (1 + rule.share):
        return None, False
    rise = f"+{(b - a) / a:.0%}" if a else "from nothing"
    text = f"peak memory {bytes_text(a)} -> {bytes_text(b)} ({rise})"
    return finding(label, str(rule), text, kind="peak_memory_bytes", a=a, b=b), True


def time_finding(
    label: str, rule: Rule, time_a: dict | None, time_b: dict | None
) -> tuple[dict | None, bool]:
    """(the finding, whether it is a regression): B ÷ A, its whole interval past 1 + share."""
    facts = {
        "kind": "time_us",
        "a": time_a and time_a["median_us"],
        "b": time_b and time_b["median_us"],
    }
    if time_a is None or time_b is None:
        side = "A" if time_a is None else "B"
        text = f"time: no timing pass in {side} (times decide only where both sides were timed)"
        return finding(label, str(rule), text, **facts), False
    value, low, high = intervals.ratio(time_b, time_a)
    limit = 1 + rule.share
    verdict = intervals.above(low, high, limit)
    said = f"time {intervals.ratio_text(value, low, high)} of A's"
    if verdict is None:
        text = f"{said}: the interval holds {limit:g}×"
        return finding(label, str(rule), text, ratio=[value, low, high], **facts), False
    if verdict:
        text = f"{said}: the whole interval is above {limit:g}×"
        return finding(label, str(rule), text, ratio=[value, low, high], **facts), True
    return None, False


# --- the gate --------------------------------------------------------------------------------------


def _label(data: dict) -> str:
    a, b = data["a"]["label"], data["b"]["label"]
    return a if a == b else f"{a} -> {b}"


def _judge(data: dict, rules: list[Rule], times: tuple[dict | None, dict | None]):
    """(regressions, cannot tell) of one pair under the rules."""
    label, failed, unsure = _label(data), [], []
    for rule in rules:
        if rule.name in ("peak", "time"):
            found, bad = (
                peak_finding(label, data, rule)
                if rule.name == "peak"
                else time_finding(label, rule, *times)
            )
            if found is not None:
                (failed if bad else unsure).append(found)
        else:
            failed += row_findings(label, data["rows"], rule)
    return failed, unsure


def shared_paths(*sides: Path) -> list[str]:
    """The folders a shared `--json` leaves out: the scrub's (home, temp, checkout) and the folder
    each side is in (`/srv/<user-name>/base/naive` -> `<redacted>/naive`), longest first."""
    found = {*local_paths(), *(str(Path(s).absolute().parent) for s in sides)}
    return sorted((p for p in found if len(p) > 1), key=len, reverse=True)


def gate(a: Path | str, b: Path | str, rules: list[Rule], range_name: str | None = None) -> dict:
    """Diff A and B (two runs or two sets) and judge them: the dict `diff --json` writes."""
    a, b = Path(a), Path(b)
    pairs, only_a, only_b = pairs_of(a, b)
    cache: dict[Path, dict | None] = {}
    diffs, failed, unsure = [], [], []
    for side_a, side_b in pairs:
        data = diff(side_a, side_b, range_name)
        times = (timed(side_a, data["a"], cache), timed(side_b, data["b"], cache))
        data["timing_median_us"] = {
            side: t and t["median_us"] for side, t in zip("ab", times, strict=True)
        }
        regressions, cannot_tell = _judge(data, rules, times)
        diffs.append(data)
        failed += regressions
        unsure += cannot_tell
    if rules:  # a variant gone from B is never a pass: nothing of it was compared
        failed += [finding(n, "missing", f"ran in {a}, not in {b}") for n in only_a]
    return {
        "schema": SCHEMA,
        "a": str(a),
        "b": str(b),
        "fail_on": [str(r) for r in rules],
        "passed": not failed if rules else None,
        "regressions": failed,
        "cannot_tell": unsure,
        "notes": [f"{n}: ran in {b} only" for n in only_b],
        "pairs": diffs,
    }


# --- command line ----------------------------------------------------------------------------------

DESCRIPTION = """\
What changed between two runs: ops, kernels, memcpys and memsets per forward, and peak memory.
With --fail-on, a gate: exit 1 with a line for each change that breaks a rule, headed by the rule."""
EXAMPLES = """\
examples:
  %(prog)s runs/naive runs/inplace
      what changed from one run to the other (variant folders, or their trace.json.gz)
  %(prog)s baseline/inplace runs/inplace --fail-on
      the gate: exit 1, with a line for each op, kernel, memcpy or memset whose calls per
      forward changed, each headed "counts:" (--fail-on alone is --fail-on counts)
  %(prog)s baseline/inplace runs/inplace --fail-on kernels,memcpy --fail-on peak:10%%
      fail only on new or more kernels or memcpys, or on a peak memory over 10%% higher
  %(prog)s before/cpu-amd-epyc profiles/cpu-amd-epyc --fail-on counts,time --json gate.json
      two sets, variant by variant; times decide only where both sides carry timing.json, and
      "cannot tell" never fails; the verdict written as JSON too

rules (--fail-on RULE,RULE; the flag may be given again):
{rules}

exit status: 0 no regression (or no --fail-on), 1 a rule broken (a line each), 2 bad input
""".format(rules="\n".join(f"  {name:8} {what}" for name, what in RULES.items()).replace("%", "%%"))


def _rules_arg(text: str) -> list[Rule]:
    try:
        return parse_rules(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """diff's arguments, for `python -m attn.profiling diff` and `python -m attn.traces.compare`."""
    parser.add_argument(
        "a", type=Path, metavar="A", help="the run before: a variant folder, a trace, or a set"
    )
    parser.add_argument("b", type=Path, metavar="B", help="the run after, of the same kind")
    parser.add_argument(
        "--fail-on", action="append", nargs="?", const=[Rule("counts")], type=_rules_arg,
        metavar="RULES", dest="fail_on",
        help="exit 1 on a regression by these rules (below; alone: counts)",
    )  # fmt: skip
    parser.add_argument(
        "--json", "--out", type=Path, metavar="OUT", dest="json",
        help=f"also write the diff and the verdict as JSON (schema {SCHEMA}) to this file",
    )  # fmt: skip
    parser.add_argument("--range", help="range name (default: attn_fwd, else ProfilerStep#N)")
    parser.add_argument("--all", action="store_true", help="show unchanged rows too")


def report(result: dict, everything: bool = False) -> None:
    """Each pair's diff (a pair of a set that did not change: one line), then the verdict, a line
    per finding."""
    for data in result["pairs"]:
        moved = data["notes"] or any(r["change"] != "same" for r in data["rows"])
        if len(result["pairs"]) == 1 or moved or everything:
            print_diff(data, everything)
        else:
            say(f"{_label(data)}: {data['headline']}")
    for note in result["notes"]:
        say(f"note: {note}")
    for found in result["cannot_tell"]:
        say(f"cannot tell: {line(found)}")
    for found in result["regressions"]:  # each headed by the rule it breaks
        say(f"{found['rule']}: {line(found)}")
    if result["passed"]:
        print(f"no regression (fail on {', '.join(result['fail_on'])})")


def run(args: argparse.Namespace) -> int:
    """diff with the parsed arguments: 0, 1 on a regression, 2 on bad input (one line)."""
    rules = list(dict.fromkeys(r for given in args.fail_on or [] for r in given))
    try:
        if args.json is not None:  # never over an input, whatever the diff finds
            check_output(args.json, (args.a, args.b))
        result = gate(args.a, args.b, rules, args.range)
        report(result, args.all)
        if args.json is not None:  # a file to share, as a published trace is: no local path
            write_json(args.json, Scrubber(shared_paths(args.a, args.b)).value(result))
            say(f"written: {args.json}")
    except (TraceFormatError, intervals.BadTiming, RefusedOutput, OSError) as exc:
        say(f"error: {exc}", err=True)
        return 2
    return 1 if result["passed"] is False else 0


def main(argv: Sequence[str] | None = None, prog: str = "python -m attn.traces.compare") -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=DESCRIPTION, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
