"""Names and sentences read from a trace or a profile set, as Markdown that shows them as text.

A name can hold anything a program called its op or kernel: tags, a backtick, a link, an attribute
list, a control character. Whatever Markdown shows of a trace goes through here, so it is never
HTML, a link, attributes, or a code span it breaks out of; a name with none of these is unchanged.
"""

from __future__ import annotations

import re

from attn.traces.patterns import OP_NAME

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MARKS = re.compile(r"([\\`\[\]{}])")  # escapes, code, links and images, attribute lists
OP = re.compile(OP_NAME)


def visible(name: str) -> str:
    """Control characters (a newline, an escape sequence) as their Python escapes: one line."""
    return CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode(), str(name))


def text(value: object) -> str:
    """Plain text: no tag, entity, link, attribute list or code span of its own."""
    escaped = MARKS.sub(r"\\\1", visible(str(value)))
    return escaped.replace("&", "&amp;").replace("<", "&lt;")  # no tag can open: ">" stays


def code(name: object) -> str:
    """A code span that holds the name whole: its fence longer than any run of backticks in it."""
    name = visible(str(name))
    fence = "`" * (max(map(len, re.findall("`+", name)), default=0) + 1)
    pad = " " if "`" in name else ""
    return f"{fence}{pad}{name}{pad}{fence}"


def prose(sentence: object) -> str:
    """A sentence as text, its op names (aten::..., attn::...) as code."""
    sentence, parts, last = str(sentence), [], 0
    for m in OP.finditer(sentence):
        parts += [text(sentence[last : m.start()]), code(m[0])]
        last = m.end()
    return "".join([*parts, text(sentence[last:])])
