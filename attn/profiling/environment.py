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
