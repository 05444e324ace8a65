"""attn.traces.common.terminal: whatever text comes from data, one line that only shows itself."""

import pytest

from attn.traces.common.terminal import MAX_CHARS, one_line, shown

UNSAFE = {
    "escape sequence": ("a\x1b[2Jb", "a\\x1b[2Jb"),
    "window title": ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    "OSC 8 link": ("\x1b]8;;https://x\x1b\\go\x1b]8;;\x1b\\", "\\x1b]8;;https://x\\x1b\\go"),
    "newline": ("one\ntwo\r", "one\\ntwo\\r"),
    "C1 control": ("\x9b2J", "\\x9b2J"),
    "bidi override": ("abc\u202edef", "abc\\u202edef"),
    "a name's byte that is not UTF-8": ("job\udcff", "job\\udcff"),  # no stream could write it
}


@pytest.mark.parametrize("text, starts", UNSAFE.values(), ids=UNSAFE)
def test_control_and_format_characters_are_shown_as_their_escapes(text, starts):
    line = one_line(text)
    assert line.startswith(starts) and line.isprintable()


def test_a_long_text_is_cut_first_saying_how_long_it_was():
    line = one_line("x" * 10_000_000)
    assert line == "x" * MAX_CHARS + "… (10,000,000 characters)"


def test_rich_markup_is_escaped_after_the_cut():
    assert shown("[bold]x[/bold]") == "\\[bold]x\\[/bold]"
