"""GPU traces recorded by others, as the chapters show them: each one diagnosed, its claims checked
and its screenshot taken, into profiles/public/<folder>/ (diagnosis.json, viewer.png).

    python -m attn.profiling.public [--out profiles] [--no-screenshot]

The traces are test data, tests/fixtures/realtraces/<folder> with SOURCE.txt and LICENSE beside
each; attn.specs.PUBLIC says which a chapter shows. Run it from a checkout; the site reads what it
writes and measures nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from attn import specs
from attn.profiling.flags import out_folder
from attn.traces.claims.claim import evaluate
from attn.traces.claims.public_checks import PublicEvidence
from attn.traces.common import artifacts
from attn.traces.common.atomic import write_json
from attn.traces.diagnosis.calls import Call, find_calls
from attn.traces.diagnosis.diagnose import diagnosis_of
from attn.traces.read.trace import Trace, load_trace, read_trace

REALTRACES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "realtraces"
SOURCE_FIELDS = ("repository", "path", "commit copied from", "license", "GPU", "torch")


def trace_file(folder: str) -> Path:
    (path,) = [p for p in (REALTRACES / folder).iterdir() if p.name.endswith((".json", ".json.gz"))]
    return path


def source(folder: str) -> dict:
    """The facts of SOURCE.txt a reader needs: where the trace is from, its license, GPU, torch."""
    lines = (REALTRACES / folder / "SOURCE.txt").read_text(encoding="utf-8").splitlines()
    found = dict(line.split(": ", 1) for line in lines if ": " in line)
    facts = {key: found[key] for key in SOURCE_FIELDS if key in found}
    facts["commit"] = facts.pop("commit copied from").split()[0]
    for key, end in (("license", r" \("), ("GPU", r" \(|[;,:]"), ("torch", r" \(|, ")):
        facts[key] = re.split(end, facts[key], maxsplit=1)[0]  # the fact, not its provenance
    return facts


MARK = "one attention call, as diagnose found it"  # the band a screenshot zooms to


def _zoomed(trace: Trace, call: Call, op: str) -> list[int]:
    """The device work launched under the first CPU op named `op` in the call."""
    rows = trace.thread_rows(call.row)
    inside = rows[(trace.ts[rows] >= call.start) & (trace.end[rows] <= call.end)]
    first = next(int(r) for r in inside if trace.name[r] == op)
    under = rows[(trace.ts[rows] >= trace.ts[first]) & (trace.end[rows] <= trace.end[first])]
    return trace.launched_by(under[trace.is_runtime[under]]).tolist()


def _focus(trace: Trace, calls: list[Call], select: str, zoom: str | None = None) -> dict:
    """What the screenshot shows: the call with the most device time, its kernels and, when they
    ran close enough to it (a gap shorter than the kernels take), its CPU op; and the first of its
    kernels that matches `select`, selected. With `zoom`, only what that op of the call launched."""
    call = max(calls, key=lambda c: trace.dur[c.device_rows].sum())
    device = call.device_rows if zoom is None else _zoomed(trace, call, zoom)
    start, end = float(trace.ts[device].min()), float(trace.end[device].max())
    if zoom is None and call.row is not None and start - call.end < end - start:
        start, end = min(start, call.start), max(end, call.end)
    kernel = next(trace.name[d] for d in device if re.search(select, trace.name[d]))
    found = {"where": call.where, "from_us": start, "to_us": end, "select": kernel}
    return found | ({"band": f"what {zoom} launched in one attention call"} if zoom else {})


def diagnosis(public: specs.PublicTrace) -> dict:
    """What diagnosis.json holds: the source, the report, the claims checked on it, the shot's aim."""
    trace = read_trace(trace_file(public.folder))
    calls = find_calls(trace)
    full = diagnosis_of(trace, calls)
    keys = ("attention", "attention_share_of_device_time", "unattributed", "findings",
            "not_checked", "lint")  # fmt: skip
    report = {key: full[key] for key in keys}
    evidence = PublicEvidence(report, calls, trace)
    return {
        "folder": public.folder,
        "chapter": public.chapter,
        "source": source(public.folder),
        **report,
        "claims": evaluate(list(public.claims), "cuda", evidence),
        "screenshot": _focus(trace, calls, public.select, public.zoom),
    }


def write(public: specs.PublicTrace, root: Path, screenshot: bool = True) -> Path:
    folder = Path(root) / artifacts.PUBLIC_DIR / public.folder
    data = diagnosis(public)
    write_json(folder / artifacts.DIAGNOSIS, data)
    if screenshot:  # where the viewer boxed the selected kernel: a phone scrolls to it
        mark = take_screenshot(public.folder, folder / artifacts.VIEWER, data["screenshot"])
        write_json(folder / artifacts.DIAGNOSIS, {**data, "viewer": {"mark": mark}})
    return folder


def take_screenshot(folder: str, png: Path, focus: dict) -> dict | None:
    """The trace in the viewer, zoomed to one attention call, marked by a band of its own on a
    track named diagnose. Python's stack frames are left out of the picture (modules kept):
    with_stack nests dozens of them above the ops."""
    from attn.profiling import viewer  # a browser is needed only for the picture

    raw = load_trace(trace_file(folder))
    raw["traceEvents"] = [
        e
        for e in raw["traceEvents"]
        if e.get("cat") != "python_function" or str(e.get("name")).startswith("nn.Module: ")
    ]
    band = focus.get("band", MARK)
    pad = 0.01 * (focus["to_us"] - focus["from_us"])  # the viewer's float ms must not cut an end
    raw["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation", "name": band, "pid": "diagnose", "tid": "diagnose",
         "ts": focus["from_us"] - pad, "dur": focus["to_us"] - focus["from_us"] + 2 * pad}
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="public-shot-") as tmp:
        path = Path(tmp) / "realtraces" / folder / trace_file(folder).name.removesuffix(".gz")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(raw))
        # The page column's width at twice the pixels, as the variants' own shots are taken.
        facts = viewer.screenshot(
            path, png, range_name=band, select=focus["select"], width=680, height=640
        )
    return facts.get("mark")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn.profiling.public", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=out_folder, default=Path("profiles"), help="artifact root")
    parser.add_argument("--no-screenshot", action="store_true", help="skip viewer.png")
    args = parser.parse_args(argv)
    for public in specs.PUBLIC:
        print(write(public, args.out, screenshot=not args.no_screenshot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
