"""Where numbers came from: the hardware slug and environment.json."""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from pathlib import Path

import torch


def is_gpu(device: str | torch.device) -> bool:
    """Whether a device is a GPU: the one place that decides it (CUDA and ROCm both say cuda)."""
    return torch.device(device).type == "cuda"


def device_name(device: str) -> str:
    """A human name for the device: the GPU's name, or the CPU model."""
    dev = torch.device(device)
    if is_gpu(dev):
        return torch.cuda.get_device_name(dev)
    return cpu_model()


def hardware_slug(device: str) -> str:
    """A set's folder: the GPU's name as a lowercase slug (`nvidia-h200`), or `cpu-` and the CPU's
    model (`cpu-amd-epyc`), so a run on another CPU adds a set beside the others."""
    if is_gpu(device):
        return slug(device_name(device))
    return cpu_slug(cpu_model())


def slug(name: str) -> str:
    """Lowercase letters and digits, runs of anything else as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# Words in a CPU's model name that tell no two models apart: marks, clock speeds, core counts.
_CPU_NOISE = re.compile(
    r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$|\b\d+-core\b|\b\d+(\.\d+)?\s*ghz\b", re.I
)


def cpu_slug(model: str) -> str:
    """`cpu-` and the model as the CPU reports it, its marks and clock left out
    ('Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz' -> 'cpu-intel-xeon-platinum-8480')."""
    return "-".join(filter(None, ("cpu", slug(_CPU_NOISE.sub(" ", model)))))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The checkout's short commit, marked `-dirty` when tracked files differ from it."""
    root = Path(__file__).resolve().parents[2]
    try:
        run = lambda *args: subprocess.run(  # noqa: E731
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        commit = run("rev-parse", "--short=12", "HEAD")
        dirty = run("status", "--porcelain", "--untracked-files=no", "--", "attn", "csrc")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def stamp() -> dict:
    """When and from what a run was made: date, commit and torch version."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
    }


def load_now() -> dict:
    """The load average now, and the CPU time counters /proc/stat has (steal among them), if any."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    ticks = None
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
        if first[0] == "cpu" and len(first) > 8:  # user nice system idle iowait irq softirq steal
            values = [int(x) for x in first[1:]]
            ticks = {"total": sum(values[:8]), "steal": values[7]}
    except (OSError, ValueError, IndexError):
        pass
    return {"load_avg": load, "ticks": ticks}


def load_over(before: dict, after: dict) -> dict:
    """A run's load: the 1, 5 and 15-minute load averages before and after, the share of CPU time
    stolen by the hypervisor in between (where /proc/stat counts it), and whether the machine was
    busy: a load above its core count."""
    steal = None
    if before.get("ticks") and after.get("ticks"):
        total = after["ticks"]["total"] - before["ticks"]["total"]
        steal = (
            round((after["ticks"]["steal"] - before["ticks"]["steal"]) / total, 4)
            if total
            else None
        )
    loads = [x["load_avg"] for x in (before, after) if x.get("load_avg")]
    cores = os.cpu_count() or 1
    return {
        "load_avg_before": before.get("load_avg"), "load_avg_after": after.get("load_avg"),
        "steal_share": steal, "cpu_count": cores,
        "busy": any(load[0] > cores for load in loads) if loads else None,
    }  # fmt: skip


def busy_line(load: dict) -> str | None:
    """One line when a load says the machine is busy, else None."""
    if not load.get("busy"):
        return None
    worst = max((x or [0])[0] for x in (load["load_avg_before"], load["load_avg_after"]))
    return (
        f"busy machine: load average {worst:.2f} on {load['cpu_count']} cores; times will be slower "
        "and more spread than on an idle machine (the set is stamped busy)"
    )


def environment(device: str, load: dict | None = None) -> dict:
    """The facts a reader needs to trust (or distrust) a profile set."""
    dev = torch.device(device)
    cuda = is_gpu(dev)
    return {
        "hardware": hardware_slug(device), "device_name": device_name(device),
        "device_type": dev.type, "cpu_model": cpu_model(), "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(), "cuda_version": torch.version.cuda if cuda else None,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None, **stamp(),
        **({"load": load} if load is not None else {}),
    }  # fmt: skip
