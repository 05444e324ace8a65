"""Remove what a published trace must not carry: host name, user name, local absolute paths."""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

REDACTED = "<redacted>"


def _names() -> list[str]:
    """This machine's host name and user names: redacted only where they stand as whole words."""
    found = {socket.gethostname(), os.environ.get("USER", "")}
    try:
        found.add(getpass.getuser())
    except (KeyError, OSError):
        pass
    return [n for n in found if n]


def _paths() -> list[str]:
    """Local absolute paths, longest first (so a path goes before its parent)."""
    found = {
        str(Path.home()),
        tempfile.gettempdir(),
        sys.prefix,
        sys.base_prefix,
        str(Path(__file__).resolve().parents[2]),  # the checkout
        str(Path.cwd()),
    }
    return sorted((p for p in found if len(p) > 1), key=len, reverse=True)


def scrub_trace(
    trace: dict, paths: list[str] | None = None, names: list[str] | None = None
) -> dict:
    """A copy of the Chrome trace with host and user names and local paths redacted."""
    paths = _paths() if paths is None else paths
    names = _names() if names is None else names
    # A name like "dev" must not shred "device": match it only as a whole word.
    word = (
        re.compile("|".join(rf"(?<![\w.-]){re.escape(n)}(?![\w-])" for n in names))
        if names
        else None
    )

    def clean(value):
        if isinstance(value, str):
            for path in paths:
                value = value.replace(path, REDACTED)
            return word.sub(REDACTED, value) if word else value
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "host_name"}
        return value

    cleaned = clean(trace)
    cleaned["traceName"] = "trace.json"  # the exporter writes the temp file's absolute path here
    return cleaned
