"""Remove what a published trace must not carry: host names, user names, local absolute paths.

Only path-like text and host-like fields are touched, so op and kernel names stay exactly as
recorded (a user called `cuda` must not rename `cudaLaunchKernel`). Scrub after measuring.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

REDACTED = "<redacted>"
HOST_KEYS = {"host_name", "hostname", "host", "node", "nodename"}  # dropped wherever they appear
# An absolute POSIX or Windows path inside any string: a run of path characters after / or C:\.
PATH_LIKE = re.compile(r"(?:(?<![\w.])[A-Za-z]:\\|(?<![\w.:/])/)[^\s\"'<>|,;()\[\]{}]+")


def local_names() -> list[str]:
    """This machine's host name and user names."""
    found = {socket.gethostname(), os.environ.get("USER", ""), os.environ.get("USERNAME", "")}
    try:
        found.add(getpass.getuser())
    except (KeyError, OSError):
        pass
    return sorted(n for n in found if n)


def local_paths() -> list[str]:
    """Local absolute folders, longest first (so a path goes before its parent)."""
    found = {
        str(Path.home()),
        tempfile.gettempdir(),
        sys.prefix,
        sys.base_prefix,
        str(Path(__file__).resolve().parents[2]),  # the checkout or site-packages
        str(Path.cwd()),
    }
    return sorted((p for p in found if len(p) > 1), key=len, reverse=True)


class Scrubber:
    """Redacts local folders, and user or host names, inside path-like text."""

    def __init__(self, paths: list[str] | None = None, names: list[str] | None = None) -> None:
        self.paths = local_paths() if paths is None else paths
        names = local_names() if names is None else names
        # Inside a path a name stands between separators, or after `_`/`-` as in
        # /tmp/torchinductor_<user>/ ; it must not shred a longer word ("dev" in "device").
        self.name = (
            re.compile("|".join(rf"(?<=[/\\_\-.]){re.escape(n)}(?=[/\\_\-.]|$)" for n in names))
            if names
            else None
        )

    def path(self, text: str) -> str:
        for folder in self.paths:
            text = text.replace(folder, REDACTED)
        return self.name.sub(REDACTED, text) if self.name else text

    def text(self, value: str) -> str:
        return PATH_LIKE.sub(lambda m: self.path(m.group(0)), value)

    def value(self, value):
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items() if str(k).lower() not in HOST_KEYS}
        return value


def scrub_trace(
    trace: dict, paths: list[str] | None = None, names: list[str] | None = None
) -> dict:
    """A copy of the Chrome trace with local paths and host and user names redacted."""
    cleaned = Scrubber(paths, names).value(trace)
    cleaned["traceName"] = "trace.json"  # the exporter writes the file's absolute path here
    return cleaned
