"""Names and sentences read from a trace or a profile set, as Markdown that shows them as text.

A name can hold anything a program called its op or kernel: tags, a backtick, a link, an attribute
list, a snippet include, a control character. Whatever Markdown or HTML shows of a trace or a set
goes through here, and only here, so it is never HTML, a link, attributes, an include, a block of
Markdown's extensions, or a code span it breaks out of; a name with none of these is unchanged.
"""

from __future__ import annotations

import html as html_module
import re

from attn.traces.common.terminal import escaped
from attn.traces.read.patterns import OP_NAME

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # and a name's bytes not UTF-8
MARKS = re.compile(r"([\\`\[\]{}])")  # escapes, code, links and images, attribute lists
EMPHASIS = re.compile(r"([*_])")  # left alone in text (a stray * or _ only slants words)
# In an attribute list's quoted value, what would end it ('}', '"'), or start inline Markdown
# that runs before attribute lists are read: a link, code, emphasis, an escape, an entity, a tag.
ATTRIBUTE_MARKS = re.compile(r"""[&<>"'{}\[\]`*\\]|(?<!\w)_|_(?!\w)""")
# At the start of a line, three of these open an admonition (!!!), a closed block (???), a tab
# (===) or a generic block (///). Text is one line (see visible), so only its start matters.
BLOCK_OPENER = re.compile(r"^([ \t]*)([!?=/])(?=\2\2)")
OP = re.compile(OP_NAME)


def visible(name: str) -> str:
    """Control characters (a newline, an escape sequence) and lone surrogates (a file name's bytes
    that are not UTF-8) as their Python escapes: one line that any file or page can hold."""
    return escaped(str(name), CONTROL)


def text(value: object) -> str:
    """Plain text: no tag, entity, link, attribute list, code span, include or block of its own.

    `<` as an entity also breaks a snippet include (`--8<--`) and a hook marker (`<!-- profile`)."""
    escaped = MARKS.sub(r"\\\1", visible(str(value)))
    escaped = escaped.replace("&", "&amp;").replace("<", "&lt;")  # no tag can open: ">" stays
    return BLOCK_OPENER.sub(lambda m: f"{m[1]}&#{ord(m[2])};", escaped)


def label(value: object) -> str:
    """A tab's or an admonition's title, written inside double quotes: text, its emphasis marks
    shown as they are, and no quote that would end it."""
    return EMPHASIS.sub(r"\\\1", text(value)).replace('"', "&quot;")


def attribute(value: object) -> str:
    """A value written inside an attribute list's double quotes (`{ data-x="..." }`): its marks
    as character references, which the page's HTML reads back as the characters."""
    return ATTRIBUTE_MARKS.sub(lambda m: f"&#{ord(m[0])};", visible(str(value)))


def html(value: object) -> str:
    """Text inside raw HTML, which Markdown leaves alone: an element's content or an attribute."""
    return html_module.escape(visible(str(value)))


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
