"""A trace file's JSON text, read in bounded memory and refused in one line as soon as it cannot be one.

A few megabytes of gzip can inflate to gigabytes, and a file of the wrong kind must cost a user
neither the machine's memory nor a crash in the JSON parser (orjson died on one string of 2 GiB).
So the text is read or inflated a chunk at a time into one growing buffer (no second copy of it),
and each chunk is checked as it comes, before it is kept:

- the text stays within the cap (ATTN_MAX_TRACE_GIB, 4 by default); a .gz file that could pass
  it is inflated once keeping nothing, so a bomb is refused in the memory of a chunk;
- the first chunk holds no control character but tab, newline and return (a file of zeros, a
  binary file), and is not UTF-16;
- no stretch between two quotes is longer than a token may be (a 64th of the cap, at most
  256 MiB): a trace is names and keys in quotes a few bytes apart, so one string of gigabytes, or
  gigabytes of whitespace or zeros, are refused a token's length after they begin;
- the least the parsed objects take (counted from the text's braces, commas and quotes) fits in
  the memory free: else refused before parsing, saying how much it needs.
"""

from __future__ import annotations

import io
import math
import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

GZIP_MAGIC = b"\x1f\x8b"
TOKEN_SHARE = 64  # a token (a string, or the text between two) may be this share of the cap
MAX_TOKEN_BYTES = 256 * 2**20  # ... and never longer: no trace holds a name of 256 MiB
MAX_DEFLATE_RATIO = 1032  # the most deflate inflates a byte to: a file this much under the cap fits
CHUNK_BYTES = 2**20  # read or inflated at a time (a quarter token at most, for small caps)
QUOTE, BACKSLASH, OPEN_OBJECT, COMMA = ord('"'), ord("\\"), ord("{"), ord(",")
OBJECT_BYTES = 64  # an empty dict: the least an object parsed from the text takes
# What JSON text may not hold anywhere: every control character but tab, newline and return.
ALLOWED = bytes(range(32, 256)) + b"\t\n\r"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # as some Windows shells save text
MORE = "set ATTN_MAX_TRACE_GIB to allow it"


class TraceFormatError(ValueError):
    """The file is not a Chrome trace this module can read; the message says why, in one line."""


def max_trace_bytes() -> int:
    """The most a trace may decompress to: a bomb of a few kilobytes must not take the machine."""
    text = os.environ.get("ATTN_MAX_TRACE_GIB", "4")
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not (math.isfinite(gib) and gib > 0):
        raise TraceFormatError(f"ATTN_MAX_TRACE_GIB is {text!r}: give a size in GiB, such as 8")
    return int(gib * 2**30)


def read_text(path: str, file: io.BufferedReader) -> bytearray:
    """The JSON text of an open trace file (gzip inflated), checked as it streams in, and refused
    up front when the objects it holds could not fit in the memory free."""
    limit = max_trace_bytes()
    gzipped = file.peek(2)[:2] == GZIP_MAGIC
    size = os.fstat(file.fileno()).st_size
    if not gzipped and size > limit:
        raise TraceFormatError(f"{path}: larger than {_size(limit)}; {MORE}")
    if gzipped and size * MAX_DEFLATE_RATIO > limit:  # it could pass the cap: check, keep nothing
        _checked(path, file, limit, gzipped, keep=False)
        file.seek(0)
    return _checked(path, file, limit, gzipped, keep=True)


def _checked(path: str, file: BinaryIO, limit: int, gzipped: bool, keep: bool) -> bytearray:
    """The text, each chunk checked before it is kept (with keep=False, checked only); then
    TraceFormatError where the least its objects take is more than the memory free."""
    check = TextCheck(path, limit)
    chunks = _inflated(file, check.chunk) if gzipped else _read(file, check.chunk)
    text = bytearray()
    for chunk in chunks:
        check(chunk)
        if keep:
            text += chunk  # grown in place (realloc): the text is held once
    free = available_memory()  # a text kept is held already: only its objects are to come
    if free is not None and check.least_memory() - (check.size if keep else 0) > free:
        raise TraceFormatError(
            f"{path}: reading it takes at least {_size(check.least_memory())} of memory "
            f"({_size(check.size)} of text, {check.objects:,} objects) and "
            f"{_size(free)} is free"
        )
    return text


def available_memory() -> int | None:
    """Bytes that can be allocated without swapping, page cache included (Linux; else None)."""
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def _read(file: BinaryIO, size: int) -> Iterator[bytes]:
    while chunk := file.read(size):
        yield chunk


def _inflated(file: BinaryIO, size: int) -> Iterator[bytes]:
    """The gzip members of the file, one after another, inflated `size` bytes at a time."""
    inflate, fed, data = zlib.decompressobj(wbits=31), False, b""
    while True:
        if not data and not (data := file.read(size)):
            while not inflate.eof and (out := inflate.decompress(b"", size)):
                yield out  # what was still held inside after the last input went in
            if fed and not inflate.eof:
                raise EOFError("the gzip stream is cut short")
            return
        fed = True
        yield inflate.decompress(data, size)
        data = inflate.unconsumed_tail
        if inflate.eof:  # a .gz file may hold several members, one after another
            data, inflate, fed = inflate.unused_data, zlib.decompressobj(wbits=31), False


class TextCheck:
    """Called on each chunk of a trace's text in order: TraceFormatError, naming the file and the
    byte, once the text passes the cap, holds a control character or a stretch without quotes
    longer than a token may be."""

    def __init__(self, where: str, limit: int) -> None:
        self.where, self.limit = where, limit
        self.token = max(1, min(limit // TOKEN_SHARE, MAX_TOKEN_BYTES))
        self.chunk = max(1, min(CHUNK_BYTES, self.token // 4))  # no stretch hides inside one
        self.size = 0  # bytes checked so far
        self.last_quote = -1  # where the last quote that opens or closes a string is
        self.quotes = 0  # how many there were: odd inside a string
        self.backslashes = 0  # how many ended the text so far: they may escape the next quote
        self.objects = self.values = 0  # objects ({) and values (,) seen: what parsing makes

    def __call__(self, chunk: bytes) -> None:
        start, self.size = self.size, self.size + len(chunk)
        if self.size > self.limit:
            raise TraceFormatError(
                f"{self.where}: decompresses to more than {_size(self.limit)}; {MORE}"
            )
        if start == 0:
            self._first(chunk)
        bytes_ = np.frombuffer(chunk, np.uint8)
        self.objects += int(np.count_nonzero(bytes_ == OPEN_OBJECT))
        self.values += int(np.count_nonzero(bytes_ == COMMA))
        first, last, count = self._quotes(chunk, bytes_)
        if count:
            self._stretch(start + first)
            self.last_quote, self.quotes = start + last, self.quotes + count
        self._stretch(self.size)  # the stretch still open at the chunk's end

    def _first(self, chunk: bytes) -> None:
        """The first chunk: not UTF-16, no control character (a file of zeros, a binary file).
        Past it, a control character is refused by the parser, and a run of them by the
        stretch it makes: checking every chunk would cost a tenth of the reading."""
        if chunk[:2] in UTF16_BOMS:
            raise TraceFormatError(f"{self.where}: UTF-16 text; a trace is JSON in UTF-8")
        if control := chunk.translate(None, ALLOWED):
            raise TraceFormatError(
                f"{self.where}: byte {chunk.find(control[:1]):,} is the control character "
                f"{control[:1].hex()}: not JSON text"
            )

    def least_memory(self) -> int:
        """The least the text and the Python objects parsed from it take (the real traces here
        take about twice this: keys are shared, names and numbers are not)."""
        return self.size + OBJECT_BYTES * self.objects + 8 * self.values + 12 * self.quotes

    def _quotes(self, chunk: bytes, bytes_: np.ndarray) -> tuple[int, int, int]:
        """Where the chunk's first and last quote that opens or closes a string are (escaped ones
        left out), and how many it holds."""
        carried = self.backslashes
        trailing = len(chunk) - len(chunk.rstrip(b"\\"))
        self.backslashes = carried + trailing if trailing == len(chunk) else trailing
        if not carried and chunk.find(b"\\") < 0:  # most chunks: every quote is one
            count = np.count_nonzero(bytes_ == QUOTE)
            return chunk.find(b'"'), chunk.rfind(b'"'), int(count)
        # A quote after an odd run of backslashes is escaped: each run ends at a plain byte.
        quotes = np.flatnonzero(bytes_ == QUOTE)
        plain = np.flatnonzero(bytes_ != BACKSLASH)
        before = np.searchsorted(plain, quotes) - 1  # the plain byte before each quote
        run = np.where(before >= 0, quotes - plain[before.clip(0)] - 1, quotes + carried)
        quotes = quotes[run % 2 == 0]
        return (int(quotes[0]), int(quotes[-1]), len(quotes)) if len(quotes) else (-1, -1, 0)

    def _stretch(self, end: int) -> None:
        """TraceFormatError when the bytes from the last quote to `end` are more than a token."""
        if end - self.last_quote - 1 <= self.token:
            return
        what = "a string" if self.quotes % 2 else "text between two strings"
        raise TraceFormatError(
            f"{self.where}: {what} longer than {_size(self.token)} at byte "
            f"{self.last_quote + 1:,}: no trace holds one (whitespace, padding or a corrupt file)"
        )


def _size(nbytes: int) -> str:
    """1 GiB, 64 MiB, 16 KiB: a size as the messages say it."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"
