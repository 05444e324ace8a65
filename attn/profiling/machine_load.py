"""How busy the machine was while a run measured: other work's share of the CPU, not the run's own.

A load average counts every runnable thread, the run's own among them: a run of two threads on two
cores puts it near 2.5 by itself, and the step after it inherits that for a minute. So a run is
called busy by what /proc/stat says the whole machine did in CPU time, less what the run and every
process under it did (its example scripts, its browser): other work's share of the machine. Where
/proc/stat is missing (not Linux), a load average above the core count is all there is to go by.

A process whose parent ends first (a browser's renderers at its shutdown, Inductor's compile
workers) would be handed to init with the CPU time it used; inside `adopting_orphans` it comes
to the run's process instead, and its time still counts as the run's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Iterator
from pathlib import Path

from attn.traces.common.busy import how_busy

BUSY_SHARE = 0.25  # other work took at least a quarter of the machine's CPU time
LOOK_S = 0.5  # how long the look before a run watches the machine


def load_now() -> dict:
    """The load average now, /proc/stat's CPU time counters (steal among them, where it has them),
    the CPU seconds this process and every process under it have used, and the clock."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    ticks = None
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
        if first[0] == "cpu" and len(first) > 8:  # user nice system idle iowait irq softirq steal
            values = [int(x) for x in first[1:9]]
            ticks = {"total": sum(values), "idle": values[3] + values[4], "steal": values[7]}
    except (OSError, ValueError, IndexError):
        pass
    return {
        "load_avg": load,
        "ticks": ticks,
        "own_cpu_s": own_cpu_seconds(),
        "at": time.monotonic(),
    }


def load_over(before: dict, after: dict) -> dict:
    """A run's load: the 1, 5 and 15-minute load averages before and after; between the two, the
    share of CPU time the hypervisor stole and the share other work used (where /proc/stat counts
    them); and whether the machine was busy."""
    cores = os.cpu_count() or 1
    steal = others = None
    if before.get("ticks") and after.get("ticks"):
        span = {key: after["ticks"][key] - before["ticks"][key] for key in before["ticks"]}
        if span["total"] > 0:
            steal = round(span["steal"] / span["total"], 4)
            working = (span["total"] - span["idle"] - span["steal"]) / span["total"]
            wall = after.get("at", 0) - before.get("at", 0)
            own = after.get("own_cpu_s", 0) - before.get("own_cpu_s", 0)
            own_share = own / (wall * cores) if wall > 0 else 0.0
            others = round(min(max(working - own_share, 0.0), 1.0), 3)
    loads = [x["load_avg"] for x in (before, after) if x.get("load_avg")]
    if others is not None:
        busy = others >= BUSY_SHARE
    else:
        busy = any(load[0] > cores for load in loads) if loads else None
    return {
        "load_avg_before": before.get("load_avg"), "load_avg_after": after.get("load_avg"),
        "steal_share": steal, "others_share": others, "cpu_count": cores, "busy": busy,
    }  # fmt: skip


def load_before_a_run() -> dict:
    """The machine watched for half a second while this process waits: other work's load now."""
    before = load_now()
    time.sleep(LOOK_S)
    return load_over(before, load_now())


def busy_line(load: dict) -> str | None:
    """One line when a load says the machine is busy, else None."""
    if (what := how_busy([load])) is None:
        return None
    return (
        f"busy machine: {what}; times will be slower and more spread than on an idle machine "
        "(the set is stamped busy)"
    )


def own_cpu_seconds() -> float:
    """CPU seconds used by this process and every process under it, ended or running: its own,
    its ended children's (and theirs), and each running descendant's own and ended children's."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in _descendants(os.getpid()):
        try:  # fields after the name: state ppid ... utime(14) stime cutime cstime (1-based)
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile: its time is its parent's now, or lost with it
    return total


def _descendants(root: int) -> list[int]:
    """The running processes under `root` (from each process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """While inside, processes under this one whose parent ends first come to this one, not to
    init (Linux; elsewhere nothing changes); on leaving, those that ended are reaped."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "prctl") or libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        yield
        return
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in _ended_children():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _ended_children() -> list[int]:
    """This process's children that ended and wait to be reaped (zombies)."""
    found = []
    for pid in _descendants(os.getpid()):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(pid)
    return found
