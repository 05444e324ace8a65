"""Text from a trace, a profile set or a child process, as a terminal may show it.

A name or a line of output can hold anything: an escape sequence that clears the screen or sets
the window title, an OSC 8 link, a newline, a right-to-left override, rich markup, ten million
characters. Everything printed from data goes through here: cut first (so nothing after it, rich's
highlighter and wrapping included, scans more than a line's worth), then each control or format
character written as its escape, so the text is one line that does nothing but show itself.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

MAX_CHARS = 1000  # a C++ kernel name of hundreds of characters stays whole; ten million do not
# C0 and C1 controls (ESC starts every escape sequence, OSC 8's too), and the format characters
# that reorder or hide text: zero-width ones, line and paragraph separators, bidi overrides; and
# lone surrogates, which are a file name's bytes that are not UTF-8 (no stream can write them).
UNSAFE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def escaped(text: str, unsafe: re.Pattern = UNSAFE) -> str:
    """Each character `unsafe` matches written as its Python escape (`\x1b`, `\n`, `\u202e`)."""
    return unsafe.sub(lambda m: m[0].encode("unicode_escape").decode(), text)


def one_line(text: object, limit: int = MAX_CHARS) -> str:
    """The text cut to `limit` characters (saying how long it was), each control or format
    character written as its Python escape: one line, no escape sequence."""
    text = str(text)
    cut = f"… ({len(text):,} characters)" if len(text) > limit else ""
    return escaped(text[:limit]) + cut


def shown(text: object, limit: int = MAX_CHARS) -> str:
    """one_line, with rich markup escaped: for rich's print and tables."""
    return escape(one_line(text, limit))


def say(text: object, *, err: bool = False) -> None:
    """Print a line made from data (a message naming a file, a child's last words): one_line."""
    print(one_line(text), file=sys.stderr if err else sys.stdout)


WIDTH = 160  # the README's: into a pipe or a log, no table is cut at rich's 80


def wide_console(stderr: bool = True) -> Console:
    """The console every command prints to: rich on stderr (or stdout), at least 160 columns wide
    in a log or a pipe (a wider COLUMNS of one's own is kept); a terminal's own width."""
    from rich.console import Console  # rich's console is only needed once something prints

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    # Test runners and CI wrappers export COLUMNS=80 for their pipes: never narrower than the
    # README's 160, where tables would cut names ("custom_c…") and drop columns.
    given = os.environ.get("COLUMNS", "")
    return Console(stderr=stderr, width=max(WIDTH, int(given) if given.isdigit() else 0))
