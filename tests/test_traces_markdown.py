"""attn.traces.common.markdown: whatever a trace or a set names shows as text, in Markdown and in HTML."""

import html.parser

import markdown
import pytest

from attn.traces.common import markdown as md

EXTENSIONS = ["admonition", "attr_list", "md_in_html", "pymdownx.details", "pymdownx.tabbed"]


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags, self.attrs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs


def rendered(text: str) -> str:
    return markdown.markdown(text, extensions=EXTENSIONS)


@pytest.mark.parametrize(
    "value",
    [
        '!!! danger "x"',  # an admonition where a line starts
        "??? note",  # a closed block
        '=== "tab"',  # a content tab
        "<!-- profile: naive -->",  # the docs hook's own marker
        '--8<-- "LICENSE"',  # a snippet include (pymdownx.snippets)
        "x{: onclick=alert(1) }",  # an attribute list
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
    ],
)
def test_text_at_the_start_of_a_line_opens_no_block_and_makes_no_element(value):
    """Where a page puts a set's sentence first on a line, inside an admonition as outside it."""
    reader = Tags()
    reader.feed(rendered(f"{md.text(value)}\n\n!!! note\n\n    {md.text(value)}"))
    assert reader.tags == ["p", "div", "p", "p"], reader.tags  # the note and its title: ours
    assert not any(k.startswith("on") or "javascript:" in (v or "") for k, v in reader.attrs)
    assert "8<-" not in md.text(value)  # pymdownx.snippets never sees an include


def test_text_leaves_a_plain_name_as_it_is():
    for name in ("AMD EPYC", "Intel(R) Xeon(R) Processor", "2.13.0+cpu", "a == b", "x!!!"):
        assert md.text(name) == name


def test_a_label_stays_inside_its_quotes_and_shows_its_marks():
    label = md.label('GPU "x" *fast* <b>')
    assert '"' not in label and "<b>" not in label
    assert rendered(f'!!! note "{label}"\n\n    body').count("<b>") == 0


def test_html_escapes_tags_quotes_and_control_characters():
    assert md.html('<a title="x">\n') == "&lt;a title=&quot;x&quot;&gt;\\n"


def test_a_code_span_holds_a_name_with_backticks_whole():
    assert rendered(md.code("a`<b>`c")) == "<p><code>a`&lt;b&gt;`c</code></p>"


def test_an_attribute_value_keeps_its_attribute_list_whole():
    """A `}` ended the attribute list early, and the `[y](javascript:...)` after it was a link."""
    value = "x}[y](javascript:alert(1)){z \"q\" 's' `c` *e* _u_ a_b & <b>"
    reader = Tags()
    reader.feed(rendered(f'[Open](t.gz){{ data-title="{md.attribute(value)}" }}'))
    assert reader.tags == ["p", "a"] and ("data-title", value) in reader.attrs
    assert (
        md.attribute("sdpa_flash on CPU: Intel(R) Xeon(R)") == "sdpa_flash on CPU: Intel(R) Xeon(R)"
    )
