"""Remove what a published trace must not carry: host names, user names, local absolute paths.

Only path-like text and host-like fields are touched, so op and kernel names stay exactly as
recorded (a user called `cuda` must not rename `cudaLaunchKernel`). Scrub after measuring.
"""

from __future__ import annotations

import bisect
import functools
import getpass
import gzip
import itertools
import json
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import orjson

from attn.traces.read.reading import TraceFormatError

REDACTED = "<redacted>"
CHUNK = 5_000  # events scrubbed and written at a time: a megabyte or two of JSON, three copies
# Dropped wherever they appear: host names, and addresses such as distributedInfo.master_addr.
HOST_KEYS = {
    "host_name", "hostname", "host", "node", "nodename", "master_addr", "master", "addr", "ip",
}  # fmt: skip
# An absolute path inside any string: a run of path characters after / (file:// URLs' too), after
# C:\ or after \\ (a UNC path: \\server\share).
PATH_LIKE = re.compile(
    r"(?:(?<![\w.])[A-Za-z]:\\|(?<![\w.:/\\])\\\\(?=\w)|(?<![\w.:/])/|(?<=file://)/)"
    r"[^\s\"'<>|,;()\[\]{}]+"
)
# Whoever's home it is: the user folder after /home/, /Users/ or C:\Users\, and a UNC server.
SOMEONE = re.compile(r"(?i)(?<=[/\\]home[/\\])[^/\\]+|(?<=[/\\]users[/\\])[^/\\]+|(?<=^\\\\)[^\\]+")
# A home folder whose name holds spaces (/Users/Alice Smith/): PATH_LIKE stops at the first one,
# so the whole folder name, up to its separator, is redacted first.
SPACED_HOME = re.compile(r"(?i)(?<=[/\\]home[/\\])[^/\\\"'<>|\n]* [^/\\\"'<>|\n]*(?=[/\\])|"
                         r"(?<=[/\\]users[/\\])[^/\\\"'<>|\n]* [^/\\\"'<>|\n]*(?=[/\\])")  # fmt: skip


def local_hosts() -> list[str]:
    """This machine's host name, and its first label (gpu-node-17 of gpu-node-17.cluster)."""
    host = socket.gethostname()
    return sorted({h for h in (host, host.split(".")[0]) if len(h) >= 3})


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
    """Redacts local folders and user names inside path-like text, and host names anywhere."""

    def __init__(
        self,
        paths: list[str] | None = None,
        names: list[str] | None = None,
        hosts: list[str] | None = None,
    ) -> None:
        self.paths = local_paths() if paths is None else paths
        self.names = names = local_names() if names is None else names
        # A host name is redacted anywhere, free text too ("connected to gpu-node-17"); a user
        # name only inside paths (a user called cuda must not rename cudaLaunchKernel).
        self._done: dict[str, str] = {}
        self.hosts: list[str] = []
        self.host = None
        self.learn(local_hosts() if hosts is None else hosts)
        # Inside a path a name stands between separators, or after `_`/`-` as in
        # /tmp/torchinductor_<user>/ ; it must not shred a longer word ("dev" in "device").
        self.name = (
            re.compile("|".join(rf"(?<=[/\\_\-.]){re.escape(n)}(?![\w])" for n in names))
            if names
            else None
        )

    @functools.cached_property
    def markers(self) -> list[bytes]:
        """Bytes, lowercased, without which a trace's JSON text holds nothing to scrub: a chunk of
        events that has none of them is written as it is, never walked."""
        names = [sep + n for n in self.names for sep in "/\\_-."]  # as the name pattern has them
        found = [
            orjson.dumps(t.lower())[1:-1] for t in [*self.paths, *names]
        ]  # as JSON spells them
        others = [
            b"/home/",
            b"/users/",
            b"\\\\users\\\\",
            b"\\\\\\\\",
        ]  # SOMEONE, as JSON spells it
        hosts = [orjson.dumps(h.lower())[1:-1] for h in self.hosts]
        return found + others + hosts + [orjson.dumps(k) + b":" for k in HOST_KEYS]

    def events(self, events: list) -> bytes:
        """The events as JSON text (comma-separated, unbracketed), scrubbed: a chunk whose text
        holds no marker is written as one dump; otherwise only the events holding one are walked."""
        whole = _dumps(events)[1:-1]
        low = whole.lower()
        if not self._found(low):
            return whole
        # One dump per event costs orjson a buffer each (about 4 KiB): a thousand at a time.
        return b",".join(self._marked(events[i : i + 1000]) for i in range(0, len(events), 1000))

    def _marked(self, events: list) -> bytes:
        parts = [_dumps(e) for e in events]
        low = b",".join(parts).lower()
        ends = list(itertools.accumulate(len(p) + 1 for p in parts))  # each one's comma
        for marker in self._found(low):
            at = low.find(marker)
            while at >= 0:  # one hit per event is enough: the work stays bounded by the events
                i = bisect.bisect_right(ends, at)
                parts[i] = _dumps(self.value(events[i]))
                at = low.find(marker, ends[i])
        return b",".join(parts)

    def _found(self, low: bytes) -> list[bytes]:
        """The markers in this (lowercased) text. Each pass over a chunk's megabytes costs alike,
        so the markers are looked for by a shorter string inside them, fewer than they are: a user
        name stands for its five spellings, `"host` for three keys, a backslash for any with one."""
        if getattr(self, "_sieved", None) is not self.markers:  # new hosts learnt: new markers
            cores = {orjson.dumps(n.lower())[1:-1] for n in self.names} | {b"\\\\"}
            cores |= {b'"' + k.encode() for k in HOST_KEYS}
            cores = sorted(cores, key=lambda c: (len(c), c))
            sieve: dict[bytes, list[bytes]] = {}
            for marker in self.markers:
                sieve.setdefault(next((c for c in cores if c in marker), marker), []).append(marker)
            self._sieved, self._sieve = self.markers, sieve
        return [
            m for core, inside in self._sieve.items() if core in low for m in inside if m in low
        ]

    def learn(self, hosts: list[str]) -> None:
        """Redact these host names wherever they appear from now on."""
        self.hosts = sorted({*self.hosts, *(h for h in hosts if len(h) >= 3)})
        # The whole host name: its domain too (alice-laptop.corp.example, not <redacted>.corp...).
        alternatives = "|".join(
            rf"(?<![\w-]){re.escape(h)}(?:\.[\w-]+)*(?![\w-])" for h in self.hosts
        )
        self.host = re.compile(alternatives, re.I) if self.hosts else None
        self._done.clear()
        self.__dict__.pop("markers", None)

    def learn_from(self, head: dict) -> None:
        """The hosts a trace names in its own host fields (a master_addr, a hostname), so the
        free text of a trace from another machine loses them too."""
        found = []
        todo = [head]
        while todo:
            item = todo.pop()
            if isinstance(item, dict):
                for k, v in item.items():
                    if str(k).lower() in HOST_KEYS and isinstance(v, str):
                        found += [v.rsplit(":", 1)[0] if v.count(":") == 1 else v]
                    todo.append(v)
            elif isinstance(item, list):
                todo += item
        self.learn(found)

    def _has_host(self, value: str) -> bool:
        low = value.lower()
        return any(h.lower() in low for h in self.hosts)

    def path(self, text: str) -> str:
        for folder in self.paths:
            text = text.replace(folder, REDACTED)
        text = SOMEONE.sub(REDACTED, text)
        return self.name.sub(REDACTED, text) if self.name else text

    def text(self, value: str) -> str:
        if value not in self._done:  # names repeat by the thousand in a trace: scrub each once
            spaced = SPACED_HOME.sub(REDACTED, value)
            scrubbed = PATH_LIKE.sub(lambda m: self.path(m.group(0)), spaced)
            self._done[value] = self.host.sub(REDACTED, scrubbed) if self.host else scrubbed
        return self._done[value]

    def value(self, value):
        kind = type(value)
        if kind is str:  # text with no separator holds no path: most names, left untouched
            marked = "/" in value or "\\" in value or self._has_host(value)
            return self.text(value) if marked else value
        if kind is list:
            return [self.value(v) for v in value]
        if kind is dict:  # keys too: a trace may key a table by file path
            return {
                self.value(k): self.value(v)
                for k, v in value.items()
                if str(k).lower() not in HOST_KEYS
            }
        return value


def _dumps(value) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError as e:
        if "Recursion" not in str(e):  # an integer past 64 bits, read by the standard library
            return json.dumps(value).encode()
        # orjson writes 255 levels, the standard library as deep as the stack: refused here, in
        # one line, where the fallback ended analyze in RecursionError.
        raise TraceFormatError(f"{_named(value)} is nested over 255 levels deep") from None


def _named(value) -> str:
    """What a value too deep to write is: the first event of it that is too deep, by name."""
    events = value if isinstance(value, list) else [value]
    for e in events:
        try:
            orjson.dumps(e)
        except TypeError:
            name = e.get("name") if isinstance(e, dict) else None
            return f"the event {str(name)[:80]!r}" if name is not None else "a value of the trace"
    return "the trace's events"


def write_trace(trace: dict, path: Path, scrubber: Scrubber | None = None) -> Path:
    """Write the trace scrubbed and gzip-compressed, its events a chunk at a time: the scrubbed copy
    never exists whole, so writing a trace of a million events takes little more memory."""
    scrubber = scrubber or Scrubber()
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    scrubber.learn_from(head)  # its distributedInfo's master, its hostname: in free text too
    head = {**scrubber.value(head), "traceName": "trace.json"}  # the exporter's absolute path
    with (
        open(path, "wb") as file,
        # Level 9, as Python and Kineto write a trace: the published copy is no larger than theirs.
        gzip.GzipFile(fileobj=file, mode="wb", compresslevel=9, mtime=0) as out,
    ):
        out.write(b'{"traceEvents":[')
        events = trace.get("traceEvents", [])
        for start in range(0, len(events), CHUNK):
            out.write(b"," if start else b"")
            out.write(scrubber.events(events[start : start + CHUNK]))
        out.write(b"]")
        for key, value in head.items():
            out.write(b"," + _dumps(key) + b":" + _dumps(value))
        out.write(b"}")
    return Path(path)
