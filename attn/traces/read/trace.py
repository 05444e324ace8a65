"""Read any Kineto Chrome trace once into a table of events, and find the named ranges in it.

Works on the traces torch.profiler writes today and on older ones (torch 1.8-1.10 spelled the
categories `Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`): categories are mapped to today's
names on reading, so everything else sees one format. The table holds one row per complete event,
sorted by start, with columns computed once (end, thread, correlation); a range's CPU events are a
slice of its thread's rows, and its device work is found by the correlation id it shares with the
runtime call that launched it. Analysis, claims, tables, the timeline and diffs all read this table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import orjson

from attn.traces.read.patterns import ATEN
from attn.traces.read.reading import TraceFormatError, read_text

FORWARD_RANGE = "attn_fwd"
BACKWARD_RANGE = "attn_bwd"  # a training step's backward (its ops may run on another thread)
STEP_PREFIX = "ProfilerStep#"
# The seconds of a run's first two calls, before profiling (a compiled variant compiles there):
# kept in the trace under this key by our harness, beside the profiler's own top-level keys.
FIRST_CALLS_KEY = "attn_first_calls_seconds"
KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
DEVICE_CATEGORIES = (KERNEL, MEMCPY, MEMSET)
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")  # the CPU side of device work
RANGE_CATEGORIES = ("user_annotation", "cpu_op")  # ranges are annotations (old: operators)
OLD_CATEGORIES = {  # torch 1.8-1.10 -> today
    "operator": "cpu_op",
    "runtime": "cuda_runtime",
    "kernel": KERNEL,
    "memcpy": MEMCPY,
    "memset": MEMSET,
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
}
CPU_DEVICE_TYPE = 0  # "Device Type" of a [memory] event: c10::DeviceType, 0 CPU, 1 CUDA
EPS_US = 1e-3  # timestamps are floats in microseconds
MAX_TIME_US = 1e17  # about 3,000 years: a timestamp or duration past it is corrupt, not data
# Where orjson stops and the standard library reads on: NaN, Infinity, a number past a double.
NONSTANDARD_NUMBER = frozenset(b"NI-0123456789")
UTF8_BOM = b"\xef\xbb\xbf"


class Event(NamedTuple):
    """One complete ('X') event of the trace, with its category in today's spelling (a named
    tuple: ranges of a hundred thousand events are made into these in a blink)."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: int | str
    tid: int | str
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def correlation(self) -> int | None:
        value = self.args.get("correlation")
        return None if value is None else int(value)

    def contains(self, other: Event) -> bool:
        return self.ts - EPS_US <= other.ts and other.end <= self.end + EPS_US


def parse_json(data: bytes | bytearray):
    """JSON text as Python values: orjson (fast), else the standard library where orjson stops at
    what only it reads (NaN, Infinity, a number past a double); other text is refused at once,
    never decoded a second time."""
    bom = len(UTF8_BOM) if data[:3] == UTF8_BOM else 0  # as Windows tools write it
    try:
        return orjson.loads(memoryview(data)[bom:] if bom else data)
    except orjson.JSONDecodeError as e:
        if "depth limit" in str(e):
            raise RecursionError from None
        at = bom + e.pos
        if at >= len(data) or data[at] not in NONSTANDARD_NUMBER:
            raise
        return json.loads(data)  # the standard library skips a byte-order mark too


def load_trace(path: Path | str) -> dict:
    """A trace file (`.json` or `.json.gz`) as a dict; TraceFormatError naming the problem."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            text = read_text(str(path), f)
        trace = parse_json(text)
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read it ({e.strerror or e})") from e
    except RecursionError:  # orjson stops at 1024 levels, the standard library at the stack
        raise TraceFormatError(f"{path}: JSON nested too deep to be a trace") from None
    except (ValueError, EOFError, zlib.error) as e:
        if isinstance(e, TraceFormatError):
            raise
        raise TraceFormatError(f"{path}: not JSON or gzip-compressed JSON ({e})") from e
    return check_format(trace, str(path))


def check_format(trace: object, where: str = "trace") -> dict:
    """The trace itself when it is a Chrome trace of complete events; else TraceFormatError."""
    if isinstance(trace, list):  # the JSON Array Format: events without the wrapping object
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceFormatError(
            f"{where}: not a Chrome trace (expected an object with a 'traceEvents' list)"
        )
    if not any(isinstance(e, dict) and e.get("ph") == "X" for e in trace["traceEvents"]):
        raise TraceFormatError(f"{where}: a Chrome trace with no complete ('X') events")
    return trace


def _category(cat: str) -> str:
    return OLD_CATEGORIES.get(cat.lower(), cat) if cat[:1].isupper() else cat


def _numbers(values: list, field: str, name_of, whole: bool = False) -> np.ndarray:
    """A column of numbers; TraceFormatError naming the first event (`name_of(i)`) whose value is
    not a finite number of a sane size (null, text, NaN, 1e300; for ids, a whole number)."""
    try:
        column = np.array(values, dtype=np.float64)  # numeric text, as old traces write, reads too
    except (TypeError, ValueError, OverflowError):
        column = np.array([_float(v) for v in values], dtype=np.float64)
    bad = ~np.isfinite(column) | (np.abs(column) > MAX_TIME_US)
    if whole:
        bad |= column != np.round(column)
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceFormatError(
            f"event {name_of(i)!r} has {field} {values[i]!r}: not a number a trace can hold"
        )
    return column.astype(np.int64) if whole else column


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _args(e: dict) -> dict:
    args = e.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TraceFormatError(f"event {e.get('name')!r} has args {args!r}: not an object")
    if "Input dims" in args and "Input Dims" not in args:  # torch 1.8 spelled it this way
        args = {**args, "Input Dims": args["Input dims"]}
    return args


class Trace:
    """A Chrome trace parsed once: its complete events as columns, sorted by start (longer first on
    ties, so parents lead), and its memory events. `raw` is the trace as read."""

    def __init__(self, raw: dict) -> None:
        self.raw = raw
        self._forwards: dict[tuple[str | None, bool], list[Forward]] = {}
        self.problems = []  # what makes counts untrustworthy: claims then cannot tell
        found = self._timed_events(raw)
        order = self._time_columns(found)
        self._text_columns(found, order)
        self._check_correlations()

    def _timed_events(self, raw: dict) -> list[dict]:
        """The complete events that have a start; those without one (or a dur) noted as problems."""
        complete = [e for e in raw.get("traceEvents", []) if type(e) is dict and e.get("ph") == "X"]
        found = [e for e in complete if "ts" in e]
        if len(found) < len(complete):
            self.problems.append(f"{len(complete) - len(found)} complete event(s) have no ts")
        if untimed := sum("dur" not in e for e in found):
            self.problems.append(f"{untimed} complete event(s) have no dur")
        return found

    def _time_columns(self, found: list[dict]) -> np.ndarray:
        """The ts, dur and end columns, sorted by start (longer first on ties); returns the order."""
        name_of = lambda i: found[i].get("name")  # noqa: E731
        ts = _numbers([e["ts"] for e in found], "ts", name_of)
        dur = _numbers([e.get("dur", 0.0) for e in found], "dur", name_of)
        if len(found) and (dur < 0).any():
            e = found[int(np.argmax(dur < 0))]
            raise TraceFormatError(f"event {e.get('name')!r} has a negative dur ({e['dur']!r})")
        order = np.lexsort((-dur, ts))
        self.ts, self.dur = ts[order], dur[order]
        self.end = self.ts + self.dur
        return order

    def _text_columns(self, found: list[dict], order: np.ndarray) -> None:
        """The name, category, args, thread and correlation columns, in `order`."""
        # One pass over the events for the text columns (a trace of a million events is a million
        # dicts: each is visited once here, and never again by the analysis).
        names, cats, all_args, thread, codes, correlations = [], [], [], [], [], []
        spelled: dict[str, tuple[str, int]] = {}  # raw category -> (today's spelling, its code)
        self._category_codes: dict[str, int] = {}  # today's spelling -> its number in cat_code
        threads: dict[tuple, int] = {}
        for i in order.tolist():
            e = found[i]
            name = e.get("name", "")
            names.append(name if type(name) is str else str(name))
            raw_cat = e.get("cat", "")
            if type(raw_cat) is not str:
                raw_cat = str(raw_cat)
            if (known := spelled.get(raw_cat)) is None:
                today = _category(raw_cat)
                code = self._category_codes.setdefault(today, len(self._category_codes))
                known = spelled[raw_cat] = (today, code)
            cats.append(known[0])
            codes.append(known[1])
            args = e.get("args")
            if type(args) is not dict or "Input dims" in args:  # odd, missing or torch 1.8's
                args = _args(e)
            all_args.append(args)
            correlations.append(args.get("correlation", -1))  # -1: none
            thread.append(threads.setdefault((e.get("pid", 0), e.get("tid", 0)), len(threads)))
        self.name, self.cat, self.args = names, cats, all_args
        self.thread = np.array(thread, dtype=np.int64)
        self.cat_code = np.array(codes, dtype=np.int64)
        self.threads = list(threads)  # (pid, tid) of each thread index
        self.correlation = _numbers(
            [-1 if c is None else c for c in correlations],
            "correlation",
            self.name.__getitem__,
            True,
        )

    def _check_correlations(self) -> None:
        """Whether device work can be told to its range: problems noted, device_counts_known set."""
        self.is_device = self.in_categories(*DEVICE_CATEGORIES)
        self.is_runtime = self.in_categories(*RUNTIME_CATEGORIES)
        # Device work is tied to its launch by correlation id: when ids repeat among launches, or
        # no device event finds its launch, per-range device counts would be made up.
        launches = self.correlation[self.is_runtime & (self.correlation >= 0)]
        shared = len(launches) - len(np.unique(launches))
        device = self.correlation[self.is_device]
        lost = len(device) and not np.isin(device, launches).any()
        if shared:
            self.problems.append(f"{shared} runtime call(s) reuse another's correlation id")
        if lost:
            self.problems.append(f"none of the {len(device)} device events has its launch")
        between = 0 if lost else self._unlaunched_between()
        if between:
            self.problems.append(
                f"{between} device event(s) without their launch run among those a range launched"
            )
        self.device_counts_known = not (shared or lost or between)

    def _unlaunched_between(self) -> int:
        """Device events whose launch the trace lacks, on a stream between work whose launch it
        has: they belong to some range, which one cannot be told (kernels of a warm-up before
        the trace began come first, and are no range's)."""
        rows = np.flatnonzero(self.is_device)
        launches = self.correlation[self.is_runtime & (self.correlation >= 0)]
        known, ts = np.isin(self.correlation[rows], launches), self.ts[rows]
        streams, stream = np.unique(self.thread[rows], return_inverse=True)
        first, last = np.full(len(streams), np.inf), np.full(len(streams), -np.inf)
        np.minimum.at(first, stream[known], ts[known])  # one pass, however many streams
        np.maximum.at(last, stream[known], ts[known])
        lost, on = ts[~known], stream[~known]
        return int(((lost > first[on]) & (lost < last[on])).sum())

    def in_categories(self, *wanted: str) -> np.ndarray:
        """A boolean column: whether each row's category (today's spelling) is one of `wanted`."""
        codes = self._category_codes
        return np.isin(self.cat_code, [codes[c] for c in wanted if c in codes])

    def named(self, among: np.ndarray, test) -> np.ndarray:
        """A boolean column: `test(name)` of each row `among` selects, False elsewhere (only
        those rows' names are read)."""
        found = np.zeros(len(self.name), dtype=bool)
        rows = np.flatnonzero(among)
        found[rows] = np.fromiter((test(self.name[i]) for i in rows.tolist()), bool, len(rows))
        return found

    @functools.cached_property
    def is_aten_op(self) -> np.ndarray:
        """ATen operators: what `ops_per_forward` counts."""
        return self.named(self.in_categories("cpu_op"), lambda name: name.startswith(ATEN))

    @functools.cached_property
    def is_launch(self) -> np.ndarray:
        """Runtime or driver calls that launch device work."""
        return self.named(self.is_runtime, lambda name: "Launch" in name)

    def event(self, i: int) -> Event:
        return self.events(np.array([i]))[0]

    def events(self, rows: np.ndarray) -> list[Event]:
        """The rows as Event objects (columns read once, not element by element)."""
        columns = (rows.tolist(), self.ts[rows].tolist(), self.dur[rows].tolist())
        return [
            Event(self.name[i], self.cat[i], ts, dur, *self.threads[thread], self.args[i])
            for i, ts, dur, thread in zip(*columns, self.thread[rows].tolist(), strict=True)
        ]

    @property
    def has_device_activity(self) -> bool:
        return bool(self.is_device.any())

    @functools.cached_property
    def _by_thread(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Row numbers of each thread's host events (device work left out), in start order, and
        their start times: a range's events are found by binary search, whatever the ranges."""
        host = np.flatnonzero(~self.is_device)
        if not len(host):
            return {}
        host = host[np.argsort(self.thread[host], kind="stable")]  # a mask per thread: quadratic
        threads, first = np.unique(self.thread[host], return_index=True)
        rows = zip(threads.tolist(), np.split(host, first[1:]), strict=True)
        return {t: (r, self.ts[r]) for t, r in rows}

    @functools.cached_property
    def parent(self) -> np.ndarray:
        """Row of each host event's innermost enclosing event on its thread (-1: none, and for
        device work). Rows come in start order with parents first, so one stack per thread does."""
        parent = np.full(len(self.name), -1, dtype=np.int64)
        end = self.end.tolist()
        for rows, _ in self._by_thread.values():
            stack: list[int] = []
            for i in rows.tolist():
                while stack and end[stack[-1]] + EPS_US < end[i]:
                    stack.pop()
                if stack:
                    parent[i] = stack[-1]
                stack.append(i)
        return parent

    def ancestors(self, row: int) -> Iterator[int]:
        """The rows enclosing `row`, innermost first."""
        row = int(self.parent[row])
        while row >= 0:
            yield row
            row = int(self.parent[row])

    def thread_rows(self, row: int) -> np.ndarray:
        """The host rows of `row`'s thread, in start order."""
        return self._by_thread[int(self.thread[row])][0]

    def thread_within(self, row: int, start: float, end: float) -> np.ndarray:
        """The host rows of `row`'s thread that start and end within [start, end], found by binary
        search in the thread's start times (not a pass over the thread per question)."""
        rows, starts = self._by_thread[int(self.thread[row])]
        lo, hi = np.searchsorted(starts, [start - EPS_US, end + EPS_US])
        rows = rows[lo:hi]
        return rows[self.end[rows] <= end + EPS_US]

    def row_at(self, pid: str, tid: str, ts: float) -> int | None:
        """The host row that starts at `ts` on thread (pid, tid), spelled as text, the outermost if
        several: where a flow event (fwdbwd, ac2g) ends."""
        thread = self._thread_index.get((pid, tid))
        if thread is None or thread not in self._by_thread:
            return None
        rows, starts = self._by_thread[thread]
        i = int(np.searchsorted(starts, ts - EPS_US))
        return int(rows[i]) if i < len(rows) and abs(starts[i] - ts) <= EPS_US else None

    @functools.cached_property
    def _thread_index(self) -> dict[tuple, int]:
        return {(str(pid), str(tid)): i for i, (pid, tid) in enumerate(self.threads)}

    @functools.cached_property
    def _device_by_correlation(self) -> tuple[np.ndarray, np.ndarray]:
        """Device rows sorted by correlation id, and those ids: a launch's work by binary search."""
        rows = np.flatnonzero(self.is_device & (self.correlation >= 0))
        rows = rows[np.argsort(self.correlation[rows], kind="stable")]
        return rows, self.correlation[rows]

    @functools.cached_property
    def _runtime_by_correlation(self) -> dict[int, int]:
        rows = np.flatnonzero(self.is_runtime & (self.correlation >= 0))
        return dict(zip(self.correlation[rows].tolist(), rows.tolist(), strict=True))

    def launcher(self, device_row: int) -> int | None:
        """The runtime call that launched this device work (same correlation id), if recorded."""
        return self._runtime_by_correlation.get(int(self.correlation[device_row]))

    def launched_by(self, runtime_rows: np.ndarray) -> np.ndarray:
        """The device rows (in start order) launched by these runtime calls, via correlation."""
        rows, keys = self._device_by_correlation
        wanted = np.unique(self.correlation[runtime_rows])
        wanted = wanted[wanted >= 0]
        lo, hi = np.searchsorted(keys, wanted, "left"), np.searchsorted(keys, wanted, "right")
        if not len(wanted):
            return np.empty(0, dtype=np.int64)
        return np.sort(np.concatenate([rows[a:b] for a, b in zip(lo, hi, strict=True)]))

    def range_rows(self, name: str | None = None) -> list[int]:
        """The CPU-side range events: `name` exactly (a trailing `*` matches a prefix); by default
        every `attn_fwd`, else every `ProfilerStep#N`."""
        candidates = self._range_candidates
        if name is None:
            found = [i for i in candidates if self.name[i] == FORWARD_RANGE]
            found = found or [i for i in candidates if self.name[i].startswith(STEP_PREFIX)]
        elif name.endswith("*"):
            found = [i for i in candidates if self.name[i].startswith(name[:-1])]
        else:
            found = [i for i in candidates if self.name[i] == name]
        return self._outermost(found)

    def _outermost(self, rows: list[int]) -> list[int]:
        """The rows not inside another of them on their thread: an op that calls itself
        (`aten::baddbmm` under `aten::baddbmm`) is one range, however deep its name nests."""
        kept: list[int] = []  # rows come by start, the longer first on ties
        end_of: dict[int, float] = {}
        for r in rows:
            thread = int(self.thread[r])
            if self.end[r] <= end_of.get(thread, -np.inf) + EPS_US:
                continue
            kept.append(r)
            end_of[thread] = float(self.end[r])
        return kept

    @functools.cached_property
    def _range_candidates(self) -> list[int]:
        return [i for i, c in enumerate(self.cat) if c in RANGE_CATEGORIES]

    @functools.cached_property
    def _host(self) -> tuple[np.ndarray, np.ndarray]:
        """Every thread's host events (row numbers in start order) and their start times."""
        rows = np.flatnonzero(~self.is_device)
        return rows, self.ts[rows]

    def forwards(self, range_name: str | None = None, any_thread: bool = False) -> list[Forward]:
        """The ranges, in order, each with its CPU events and the device work it launched; with
        any_thread, the events of every thread inside the range's time (autograd runs a GPU
        backward on a thread of its own while the range's thread waits)."""
        key = (range_name, any_thread)
        if key in self._forwards:  # asked for again by the summary, claims and tables
            return self._forwards[key]
        found = self._forwards[key] = []
        for r in self.range_rows(range_name):
            rows, starts = self._host if any_thread else self._by_thread[int(self.thread[r])]
            lo = np.searchsorted(starts, self.ts[r] - EPS_US, "left")
            hi = np.searchsorted(starts, self.end[r] + EPS_US, "right")
            inside = rows[lo:hi]
            inside = inside[(inside != r) & (self.end[inside] <= self.end[r] + EPS_US)]
            device = self.launched_by(inside[self.is_runtime[inside]])
            found.append(Forward(self, r, inside, device))
        return found


def parse(trace: dict | Trace) -> Trace:
    """The trace as a table (a Trace is returned as it is: parse once, pass it on)."""
    return trace if isinstance(trace, Trace) else Trace(trace)


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """Python's cyclic collector off while a trace's million dicts are made: each collection
    would walk every one made so far (JSON holds no cycles), which more than doubles the time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_trace(path: Path | str) -> Trace:
    """A trace file as a table; TraceFormatError naming the file and the problem."""
    with _no_collection():
        raw = load_trace(path)
        try:
            return Trace(raw)
        except (TypeError, ValueError) as e:  # TraceFormatError names the event and its field
            raise TraceFormatError(f"{path}: an event that cannot be read ({e})") from e


# --- what a range holds ---------------------------------------------------------------------


@dataclasses.dataclass
class Forward:
    """One range (an `attn_fwd`, a ProfilerStep): CPU events under it and the device work it launched."""

    trace: Trace
    row: int  # the range's own row
    cpu_rows: np.ndarray  # ops and runtime calls on the range's thread, in start order
    device_rows: np.ndarray  # kernels, memcpys and memsets it launched, in start order

    @functools.cached_property
    def range(self) -> Event:
        return self.trace.event(self.row)

    @functools.cached_property
    def cpu_events(self) -> list[Event]:
        return self.trace.events(self.cpu_rows)

    @functools.cached_property
    def device_events(self) -> list[Event]:
        return self.trace.events(self.device_rows)

    @property
    def aten_ops(self) -> list[Event]:
        return [e for e in self.cpu_events if e.cat == "cpu_op" and e.name.startswith(ATEN)]

    @property
    def runtime_calls(self) -> list[Event]:
        return [e for e in self.cpu_events if e.cat in RUNTIME_CATEGORIES]

    def of_kind(self, cat: str) -> list[Event]:
        return [e for e in self.device_events if e.cat == cat]

    @property
    def device_time_us(self) -> float:
        return float(self.trace.dur[self.device_rows].sum())


def forwards(trace: dict | Trace, range_name: str | None = None) -> list[Forward]:
    return parse(trace).forwards(range_name)


def device_name_of(trace: dict) -> str | None:
    """The GPU's name as the trace records it (deviceProperties), or None."""
    props = trace.get("deviceProperties") or []
    return props[0].get("name") if props and isinstance(props[0], dict) else None
