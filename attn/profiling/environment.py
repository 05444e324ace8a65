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
    model (`cpu-amd-epyc-9654`, `cpu-amd-epyc-family-25-model-17`), so a run on another CPU adds
    a set beside the others."""
    if is_gpu(device):
        return slug(device_name(device))
    return cpu_slug(cpu_model())


def slug(name: str) -> str:
    """Lowercase letters and digits, runs of anything else as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# Words in a CPU's model name that tell no two models apart: marks, clock speeds, core counts.
_CPU_NOISE = re.compile(
    r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@|\b\d+-core\b|\b\d+(\.\d+)?\s*ghz\b", re.I
)


def cpu_slug(model: str) -> str:
    """`cpu-` and the model as the CPU reports it, its marks and clock left out
    ('Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz' -> 'cpu-intel-xeon-platinum-8480')."""
    return "-".join(filter(None, ("cpu", slug(_CPU_NOISE.sub(" ", model)))))


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name as lscpu shows it; where that name tells no generation apart (a cloud
    VM's 'AMD EPYC', 'Intel(R) Xeon(R) Processor'), with its family and model numbers after it,
    so a Zen 4 and a Zen 5 make two sets, not one that each overwrites."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first = {}  # the first processor's fields: every core of one machine is one model
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    name = first.get("model name") or platform.processor() or platform.machine()
    family, model = first.get("cpu family"), first.get("model")
    if family and model and not re.search(r"\d", _CPU_NOISE.sub(" ", name)):
        name += f" (family {family}, model {model})"
    return name


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


def is_committed(folder: Path) -> bool:
    """Whether git tracks files under `folder` (a committed set); False outside a checkout."""
    if not folder.is_dir():
        return False
    try:
        return bool(
            subprocess.run(
                ["git", "ls-files", "--", "."], cwd=folder, capture_output=True, text=True,
                timeout=10, check=True,
            ).stdout.strip()
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False


def stamp() -> dict:
    """When and from what a run was made: date, commit and torch version."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
    }


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
