"""Independent per-range counter for raw PyTorch profiler (Kineto) Chrome traces.

Plain Python (json + gzip only), written from the trace JSON and sharing no code
with the project's ``attn`` package: a second opinion on tests/fixtures/realtraces/.
Handles new-format traces (cpu_op/cuda_runtime/kernel, int tids, float ts) and
torch 1.8/1.9 ones (Operator/Runtime/Kernel, string tids such as "1890023232" or
"stream 7"); both spell the host<->device link args["correlation"].
"""

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
    """Per range named ``range_name`` (or starting with it if ``prefix``), in start order:
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
    for r in sorted(ranges, key=lambda e: float(e["ts"])):
        t0, t1 = float(r["ts"]), float(r["ts"]) + float(r.get("dur", 0))
        key = (str(r.get("pid")), str(r.get("tid")))
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
