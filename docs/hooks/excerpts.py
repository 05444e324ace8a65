"""The excerpt marker of profiles.py: a section of a real source file, shown with one line.

`<!-- profile-excerpt: attn/naive.py:forward "the forward" -->` becomes the fence titled
"attn/naive.py (the forward, excerpt)" around the pymdownx.snippets line of that section, then one
note that links the whole file; a section longer than LONG lines shows in a closed block titled so.
Snippets is a Markdown extension, so it runs after this hook and puts
the file's own lines in the fence; sources.py publishes the file the note links. Fence options may
follow the title, e.g. `hl_lines="7"`. A file no spec publishes, or a section the file does not mark
with `--8<-- [start:NAME]` and `--8<-- [end:NAME]`, fails the build.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from sources import published_paths

ROOT = Path(__file__).resolve().parents[2]  # the checkout, which snippets' base path "." names
LANGUAGES = {
    ".py": "python",
    ".cpp": "cpp",
    ".cu": "cuda",
    ".yml": "yaml",
}  # a file's suffix -> its fence
OPTION = re.compile(r'(\w+)=([^"]*)')  # hl_lines="7", its quotes taken off as the marker is read
# An excerpt longer than this many lines shows closed (about two phone screens, wrapped): the page
# shows the few lines it discusses beside it, as an excerpt of their own.
LONG = 40
SECTION = re.compile(r"-+8<-+[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([a-z][-\w]*)[ \t]*\]", re.I)


def excerpt(target: str, words: tuple[str, ...], link: Callable[[str], str]) -> str:
    """The titled fence of PATH:SECTION and the note linking the whole file, or ValueError saying
    what the marker gets wrong."""
    path, _, section = target.partition(":")
    title, options = title_and_options(words)
    lines = check(path, section)
    info = [LANGUAGES[Path(path).suffix], f'title="{path} ({title}excerpt)"', *options]
    text = (
        f'```{" ".join(info)}\n--8<-- "{path}:{section}"\n```\n\n'
        f'<small class="attn-excerpt">An excerpt. The whole file: [`{path}`]({link(path)}).</small>\n'
    )
    if lines > LONG:  # closed: open, it would be screens of code on a phone
        summary = f"{path} ({title}excerpt, {lines} lines)"
        return f'??? example "{summary}"\n\n' + textwrap.indent(text, "    ")
    return text


def title_and_options(words: tuple[str, ...]) -> tuple[str, list[str]]:
    """('the forward, ', ['hl_lines="7"']) from the marker's words after PATH:SECTION: the title
    in quotes, if any, then fence options as NAME="VALUE"."""
    options = [OPTION.fullmatch(w) for w in words]
    titles = [w for w, option in zip(words, options, strict=True) if option is None]
    if len(titles) > 1 or any('"' in t for t in titles):
        raise ValueError(
            'after PATH:SECTION come one title in quotes and fence options, e.g. "the forward" '
            'hl_lines="7"'
        )
    return "".join(f"{t}, " for t in titles), [f'{o[1]}="{o[2]}"' for o in options if o]


def check(path: str, section: str) -> int:
    """The section's length in lines; ValueError unless the file is published whole and marks
    the section."""
    if not section:
        raise ValueError(f"{path!r} names no section: write PATH:SECTION")
    if Path(path).suffix not in LANGUAGES:
        raise ValueError(
            f"{path}: no fence language for its suffix (known: {', '.join(LANGUAGES)})"
        )
    if not (ROOT / path).is_file():
        raise ValueError(f"no file {path} in the repository")
    if path not in published_paths(ROOT, ROOT / "docs"):
        raise ValueError(
            f"{path} is not published, so the note cannot link it: name it in the example or the "
            "sources of a spec in attn/specs/"
        )
    text = (ROOT / path).read_text(encoding="utf-8")
    marks = SECTION.findall(text)
    names = [name for edge, name in marks if edge.lower() == "start"]
    ends = {name for edge, name in marks if edge.lower() == "end"}
    if section not in names or section not in ends:
        known = ", ".join(n for n in names if n in ends) or "none"
        raise ValueError(f"{path} has no section {section!r}; its sections: {known}")
    return section_length(text, section)


def section_length(text: str, section: str) -> int:
    """How many lines snippets includes for the section: those between its first start and the
    end after it, less the lines that mark sections (snippets leaves those out)."""
    inside, count = False, 0
    for line in text.splitlines():
        m = SECTION.search(line)
        if m and m[2] == section and m[1].lower() == ("end" if inside else "start"):
            if inside:
                break
            inside = True
        elif inside and not m:
            count += 1
    return count
