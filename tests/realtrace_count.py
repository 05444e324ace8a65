"""Independent per-range counter for raw PyTorch profiler (Kineto) Chrome traces.

Plain Python (json + gzip only), written from the trace JSON and sharing no code
with the project's ``attn`` package: a second opinion on tests/fixtures/realtraces/.
Handles new-format traces (cpu_op/cuda_runtime/kernel, int tids, float ts) and
torch 1.8/1.9 ones (Operator/Runtime/Kernel, string tids such as "1890023232" or
"stream 7"); both spell the host<->device link args["correlation"].
"""

import bisect
import gzip
import json
import re

RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}  # host launch/API calls
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
DEVICE_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
# Device-side copies of CPU ranges; they live on a GPU "pid", so skip them as ranges.
NOT_RANGE_CATS = {"gpu_user_annotation"} | DEVICE_CATS


def load(path):  # a .json or .json.gz trace file -> dict (or list, oldest traces)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _corr(e):
    c = (e.get("args") or {}).get("correlation")
    return None if c is None else str(c)  # "36037" and 36037 are the same id


def count_ranges(trace, range_name, prefix=False):
    """Per range named ``range_name`` (or starting with it if ``prefix``), in start order, a range
    nested in another of those on its thread counted once (its events are the outer one's):
    the runtime/driver calls on the SAME pid and tid starting in [ts, ts+dur] that carry a
    correlation id, and the device events sharing those ids. ts/dur may be numeric strings.
    """
    events = trace["traceEvents"] if isinstance(trace, dict) else trace  # oldest traces: bare list
    events = [e for e in events if e.get("ph") == "X"]
    device_by_corr = {}
    for e in events:
        if e.get("cat") in DEVICE_CATS and _corr(e) is not None:
            device_by_corr.setdefault(_corr(e), []).append(e)
    calls = [e for e in events if e.get("cat") in RUNTIME_CATS and _corr(e) is not None]

    def matches(name):
        name = str(name)
        return name.startswith(range_name) if prefix else name == range_name

    ranges = [
        e for e in events if matches(e.get("name", "")) and e.get("cat") not in NOT_RANGE_CATS
    ]
    out = []
    last_end = {}  # a range inside one of its name on its thread is that range, counted once
    for r in sorted(ranges, key=lambda e: (float(e["ts"]), -float(e.get("dur", 0)))):
        t0, t1 = float(r["ts"]), float(r["ts"]) + float(r.get("dur", 0))
        key = (str(r.get("pid")), str(r.get("tid")))
        if t1 <= last_end.get(key, float("-inf")):
            continue
        last_end[key] = t1
        mine = [
            c
            for c in calls
            if (str(c.get("pid")), str(c.get("tid"))) == key and t0 <= float(c["ts"]) <= t1
        ]
        res = {
            "name": r["name"],
            "ts": float(r["ts"]),
            "kernels": 0,
            "memcpy": {},
            "memset": 0,
            "launches": sum("Launch" in c.get("name", "") for c in mine),
            "device_time_us": 0.0,
        }
        for c in mine:
            for d in device_by_corr.get(_corr(c), []):
                cat = d.get("cat")
                if cat in KERNEL_CATS:
                    res["kernels"] += 1
                elif cat in MEMCPY_CATS:  # "Memcpy DtoD (Device -> Device)" -> "DtoD"
                    m = re.match(r"Memcpy\s+(\w+)", d.get("name", ""))
                    direction = m.group(1) if m else d.get("name", "?")
                    res["memcpy"][direction] = res["memcpy"].get(direction, 0) + 1
                else:
                    res["memset"] += 1
                res["device_time_us"] += float(d.get("dur", 0))
        out.append(res)
    return out


# --- attention calls, counted from the raw JSON a second way ------------------------------------

PRODUCTS = {"aten::matmul", "aten::bmm", "aten::mm", "aten::baddbmm", "aten::einsum"}


def _x(trace):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X"]


def _device_of(events, host):
    """Device events launched by runtime calls among ``host`` (correlation ids)."""
    ids = {_corr(e) for e in host if e.get("cat") in RUNTIME_CATS and _corr(e) is not None}
    if len(ids) < 50:  # a few calls: look them up (the events' index is made once per list)
        index = _by_correlation(events)
        return [d for i in ids for d in index.get(i, [])]
    return [e for e in events if e.get("cat") in DEVICE_CATS and _corr(e) in ids]


_index = [None, {}]  # the last list of events indexed, and its index


def _by_correlation(events):
    """{correlation id: device events} of a list of events, made once for the last list asked."""
    if _index[0] is not events:
        index = {}
        for e in events:
            if e.get("cat") in DEVICE_CATS and _corr(e) is not None:
                index.setdefault(_corr(e), []).append(e)
        _index[:] = [events, index]
    return _index[1]


def _on_thread_within(events, like, t0, t1):
    """Events on ``like``'s thread that start and end within [t0, t1], in start order."""
    threads = _by_thread(events)
    starts, on = threads.get((str(like.get("pid")), str(like.get("tid"))), ([], []))
    first = bisect.bisect_left(starts, t0)
    last = bisect.bisect_right(starts, t1)
    return [e for e in on[first:last] if float(e["ts"]) + float(e.get("dur", 0)) <= t1]


def _within(events, t0, t1):
    """Those of ``events`` (one thread's) that start and end within [t0, t1]."""
    return [e for e in events if t0 <= float(e["ts"]) and _end(e) <= t1]


_threads = [None, {}]  # the last list of events split by thread, and its threads


def _by_thread(events):
    """{(pid, tid): (start times, events)} sorted by start, made once for the last list asked."""
    if _threads[0] is not events:
        found = {}
        for e in events:
            found.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(e)
        for key, on in found.items():
            on.sort(key=lambda e: float(e["ts"]))
            found[key] = ([float(e["ts"]) for e in on], on)
        _threads[:] = [events, found]
    return _threads[1]


def _summarise(groups):
    """{shapes: [(a call's device events, its attention kernels)]} ->
    {shapes: (calls, kernels per call, us per call, attention kernels' us per call)}"""
    out = {}
    for shapes, calls in groups.items():
        kernels = sum(d.get("cat") in KERNEL_CATS for c, _ in calls for d in c)
        us = sum(float(d.get("dur", 0)) for c, _ in calls for d in c)
        attention = sum(float(d.get("dur", 0)) for _, a in calls for d in a)
        n = len(calls)
        out[shapes] = (n, kernels / n, us / n, attention / n)
    return out


def _shapes(e):
    dims = [d for d in (e.get("args") or {}).get("Input Dims", []) if d]
    return " ".join("[" + ",".join(str(x) for x in d) + "]" for d in dims) or None


def op_call_events(trace, op_name, attention=""):
    """Calls of CPU ops named ``op_name``: {shapes: [(the device work of the runtime calls inside
    it, on its own thread; its kernels whose names match the regex ``attention``)]}."""
    events = _x(trace)
    groups = {}
    for op in (e for e in events if e.get("name") == op_name and e.get("cat") == "cpu_op"):
        t0, t1 = float(op["ts"]), float(op["ts"]) + float(op.get("dur", 0))
        device = _device_of(events, _on_thread_within(events, op, t0, t1))
        mine = [
            d for d in device if d.get("cat") in KERNEL_CATS and re.search(attention, d["name"])
        ]
        groups.setdefault(_shapes(op), []).append((device, mine))
    return groups


def op_calls(trace, op_name, attention=""):
    """Calls of CPU ops named ``op_name``, by their input shapes: (calls, kernels, us per call, the
    attention kernels' us per call, those whose names match ``attention``)."""
    return _summarise(op_call_events(trace, op_name, attention))


def _end(e):
    return float(e["ts"]) + float(e.get("dur", 0))


def _outer(products):
    return [
        p
        for p in products
        if not any(
            q is not p and float(q["ts"]) <= float(p["ts"]) and _end(p) <= _end(q) for q in products
        )
    ]


def _product_out(e):
    """The last two dims a 2-input product writes: [M, N] of [.., M, K] x [.., K, N]."""
    dims = (e.get("args") or {}).get("Input Dims", [])
    if len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2:
        return None
    return [dims[0][-2], dims[1][-1]]


def eager_call_events(trace, module_prefix):
    """In each module named ``module_prefix``...: every softmax, Q.K^T the first outermost product
    since the last P.V whose output's last two dims are the softmax input's, P.V the first after
    it. {Q.K^T's shapes: [(the device work from Q.K^T's start to P.V's end, the kernels inside
    Q.K^T, the softmax and P.V whose names say no copy)]}."""
    events = _x(trace)
    groups = {}
    for m in (e for e in events if str(e.get("name", "")).startswith(module_prefix)):
        t0, t1 = float(m["ts"]), _end(m)
        inside = _on_thread_within(events, m, t0, t1)
        outer = sorted(_outer([e for e in inside if e.get("name") in PRODUCTS]),
                       key=lambda e: float(e["ts"]))  # fmt: skip
        since = t0
        for s in sorted((e for e in inside if e.get("name") == "aten::softmax"),
                        key=lambda e: float(e["ts"])):  # fmt: skip
            scores = s["args"]["Input Dims"][0][-2:]
            before = [p for p in outer if since <= float(p["ts"]) < float(s["ts"])]
            after = [p for p in outer if float(p["ts"]) > float(s["ts"])]
            qk = next((p for p in before if _product_out(p) == scores), None)
            if qk is None or not after:
                continue
            pv = after[0]
            since = _end(pv)
            extent = _within(inside, float(qk["ts"]), _end(pv))
            core = [x for op in (qk, s, pv) for x in _within(inside, float(op["ts"]), _end(op))]
            mine = [d for d in _device_of(events, core)
                    if d.get("cat") in KERNEL_CATS and "copy" not in d["name"].lower()]  # fmt: skip
            groups.setdefault(_shapes(qk), []).append((_device_of(events, extent), mine))
    return groups


def eager_calls(trace, module_prefix):
    """eager_call_events summed by Q.K^T's input shapes, as op_calls."""
    return _summarise(eager_call_events(trace, module_prefix))


def backward_nodes(trace, node_name):
    """How many autograd nodes named ``node_name`` the backward ran (the evaluate_function
    wrappers the engine records around each)."""
    wanted = "autograd::engine::evaluate_function: " + node_name
    return sum(e.get("name") == wanted for e in _x(trace))


def kernels_named(trace, pattern):
    """Kernels whose names match the regex ``pattern``: (how many, their summed duration)."""
    found = [e for e in _x(trace) if e.get("cat") in KERNEL_CATS and re.search(pattern, e["name"])]
    return len(found), sum(float(e.get("dur", 0)) for e in found)


def ops_named(trace, op_name, first_dims=None):
    """CPU ops named ``op_name`` (whose first input has ``first_dims``, if given): (how many, the
    summed duration of the device work launched inside them)."""
    events = _x(trace)
    found = [
        e
        for e in events
        if e.get("name") == op_name
        and e.get("cat") == "cpu_op"
        and (first_dims is None or (e.get("args") or {}).get("Input Dims", [None])[0] == first_dims)
    ]
    device = []
    for op in found:
        t0, t1 = float(op["ts"]), float(op["ts"]) + float(op.get("dur", 0))
        device += _device_of(events, _on_thread_within(events, op, t0, t1))
    return len(found), sum(float(d.get("dur", 0)) for d in device)


def kernels_without_launch(trace, pattern):
    """Kernels matching ``pattern`` whose correlation id no runtime call carries: (how many,
    their summed duration)."""
    events = _x(trace)
    launched = {_corr(e) for e in events if e.get("cat") in RUNTIME_CATS}
    found = [
        e
        for e in events
        if e.get("cat") in KERNEL_CATS
        and re.search(pattern, e["name"])
        and _corr(e) not in launched
    ]
    return len(found), sum(float(e.get("dur", 0)) for e in found)


def kernel_events(trace, pattern):
    """Kernels whose names match the regex ``pattern``."""
    return [e for e in _x(trace) if e.get("cat") in KERNEL_CATS and re.search(pattern, e["name"])]


def unattributed(trace, explained, least=0.01):
    """Kernels not among ``explained`` (device events), summed by name, each over ``least`` of
    all device time (kernels, memcpys, memsets): [(name, calls, us, share)], the largest first."""
    events = _x(trace)
    total = sum(float(e.get("dur", 0)) for e in events if e.get("cat") in DEVICE_CATS)
    ids = {id(e) for e in explained}
    found = {}
    for e in events:
        if e.get("cat") in KERNEL_CATS and id(e) not in ids:
            calls, us = found.get(e["name"], (0, 0.0))
            found[e["name"]] = (calls + 1, us + float(e.get("dur", 0)))
    rows = [(name, n, us, us / total) for name, (n, us) in found.items() if us > least * total]
    return sorted(rows, key=lambda r: -r[2])


VIEWS = {"aten::view", "aten::expand", "aten::unsqueeze", "aten::slice", "aten::reshape",
         "aten::permute", "aten::transpose", "aten::select", "aten::as_strided"}  # fmt: skip


def arange_runs(trace, module_prefix, shapes, scores):
    """From each outermost aten::arange to the start of the next module named ``module_prefix``...
    on its thread: the outermost ops there (views aside) that take a tensor of one of ``shapes``,
    kept where one of them takes one of ``scores``: (runs, ops, the device time they launched)."""
    events = _x(trace)
    aranges = _outer(
        [e for e in events if e.get("name") == "aten::arange" and e.get("cat") == "cpu_op"]
    )
    modules = sorted((e for e in events if str(e.get("name", "")).startswith(module_prefix)),
                     key=lambda e: float(e["ts"]))  # fmt: skip
    runs, ops, us = 0, 0, 0.0
    for a in aranges:
        after = next((m for m in modules if float(m["ts"]) > float(a["ts"])), None)
        if after is None:
            continue
        window = _outer([e for e in _on_thread_within(events, a, float(a["ts"]), float(after["ts"]))
                         if e.get("cat") == "cpu_op"])  # fmt: skip
        dims = lambda e: (e.get("args") or {}).get("Input Dims", [])  # noqa: E731
        mine = [e for e in window if e is a
                or (e["name"] not in VIEWS and any(d in shapes for d in dims(e)))]  # fmt: skip
        if not any(d in scores for e in mine for d in dims(e)):
            continue
        inner = [x for e in mine for x in _on_thread_within(events, e, float(e["ts"]), _end(e))]
        runs, ops = runs + 1, ops + len(mine)
        us += sum(float(d.get("dur", 0)) for d in _device_of(events, inner))
    return runs, ops, us
