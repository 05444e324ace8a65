"""The one reader of a set's JSON files and the summaries a trace job writes: a file the standard
library reads, no deeper than a file of ours ever is, with every number one a field can hold.

`json.loads` alone ends in RecursionError on a file nested 100,000 deep, reads `NaN`, `Infinity`
and `1e400` as floats a comparison mistakes for a verdict, and a 401-digit integer that
`math.isfinite` cannot take. `load` refuses each in one line naming the file and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

MAX_DEPTH = 64  # a set's deepest file (a diff's rows, a figure's cells) is under ten levels
MAX_INT = 2**63  # what a count, a byte size or a time in ns can hold; past it a field is garbage


class BadJson(ValueError):
    """A JSON file refused; the message is one line naming the file and the field."""


def _where(path: tuple) -> str:
    """('rows', 0, 'median_us') -> 'rows[0].median_us'; the top: 'its top level'."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return text or "its top level"


def check_value(value, source: str = "the value") -> None:
    """BadJson naming the field, unless every container of `value` is at most MAX_DEPTH deep and
    every number finite and within ±2**63. Walked without recursion: a deep value cannot end it."""
    stack: list[tuple[object, tuple]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict | list):
            if len(path) >= MAX_DEPTH:
                raise BadJson(f"{source}: {_where(path)} is nested over {MAX_DEPTH} levels deep")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack += [(v, (*path, k)) for k, v in pairs]
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        elif isinstance(item, int) and not -MAX_INT < item < MAX_INT:
            raise BadJson(f"{source}: {_where(path)} is an integer of {len(str(abs(item)))} digits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise BadJson(f"{source}: {_where(path)} is {item}, not a finite number")


def loads(text: str | bytes, source: str = "the text"):
    """JSON text as Python values, checked as check_value checks; BadJson naming source."""
    try:
        value = json.loads(text)  # NaN and Infinity read, then refused by field below
    except RecursionError:
        raise BadJson(f"{source}: nested deeper than a JSON file of a set is") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError: one line
        raise BadJson(f"{source} is broken: not JSON ({e})") from None
    check_value(value, str(source))
    return value


def load(path: Path | str, kind: type | None = None):
    """The JSON file at path (a `kind`, when given); BadJson naming the file and the field."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BadJson(f"{path}: cannot read ({e.strerror or e})") from None
    value = loads(data, str(path))
    if kind is not None and not isinstance(value, kind):
        raise BadJson(f"{path} holds a {type(value).__name__}, not a {kind.__name__}")
    return value
