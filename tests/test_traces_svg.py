"""attn.traces.figures.svg: a panel drawn where matplotlib draws the same one, without importing it."""

import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

from matplotlib.patches import Patch

from attn.traces.figures.plot import figure
from attn.traces.figures.svg import Panel, Text

TEXT = re.compile(r'<text [^>]*?x="([-\d.]+)" y="([-\d.]+)"[^>]*>([^<]*)</text>')
LEGEND = [("#d62728", "copy of the scores"), ("#5f5f5f", "many short events"),
          ("#ff9f1c", "kernel launch"), ("#8e6c8a", "synchronize")]  # fmt: skip


def panel() -> Panel:
    """A timeline's parts: rows named on the left, time ticks, labels in and beside bars, an
    idle stretch's note above them, a title, and a legend of two rows under it all."""
    return Panel(
        7.2, 1.5 + 0.32 * 4, xlim=(0, 101), ylim=(0, 4.6), title="naive on cpu: one attn_fwd",
        xlabel="µs since the attn_fwd range began", xgrid=True,
        xticks=[(0, "0"), (40, "40,000"), (99.5, "80,000")],
        yticks=[(3.5, "CPU"), (2.5, ""), (1.5, ""), (0.5, "GPU 0 stream 7")],
        texts=[Text(30, 3.5, "aten::matmul"), Text(60, 2.5, " ← bmm", ha="left"),
               Text(50, 4.05, "+1,234 µs idle", va="bottom", color="#555555", clip=False)],
        legend=LEGEND, legend_columns=3, legend_share=0.12,
    )  # fmt: skip


def matplotlibs(p: Panel) -> str:
    """The same panel as attn.traces.figures.plot draws it with matplotlib, as SVG text."""
    fig, ax = figure(p.height_in)
    ax.set_xlim(*p.xlim)
    ax.set_ylim(*p.ylim)
    for t in p.texts:
        ax.text(t.x, t.y, t.text, ha=t.ha, va=t.va, color=t.color, clip_on=t.clip)
    ax.set_xticks(*zip(*p.xticks, strict=True))
    ax.set_yticks(*zip(*p.yticks, strict=True))
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel(p.xlabel)
    ax.set_title(p.title, loc="left", fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.legend(
        handles=[Patch(color=c, label=t) for c, t in p.legend], loc="lower left", frameon=False,
        ncol=p.legend_columns, bbox_to_anchor=(0.0, 0.0),
    )  # fmt: skip
    fig.tight_layout(rect=(0, p.legend_share, 1, 1))
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    return out.getvalue()


def test_every_text_stands_where_matplotlib_puts_it(tmp_path):
    p = panel()
    p.write(tmp_path / "p.svg")
    ours = {t: (float(x), float(y)) for x, y, t in TEXT.findall((tmp_path / "p.svg").read_text())}
    theirs = {t: (float(x), float(y)) for x, y, t in TEXT.findall(matplotlibs(p))}
    assert set(ours) == set(theirs) and len(ours) == 14
    for text, (x, y) in theirs.items():  # within 0.75 pt: less than a pixel on the page
        assert abs(ours[text][0] - x) < 0.75 and abs(ours[text][1] - y) < 0.75, text


def test_the_panel_box_is_tight_layouts():
    p = panel()
    left, right, top, bottom = p.box()
    clip = re.search(r'<clipPath id="\w+">\s*<rect x="([\d.]+)" y="([\d.]+)" '
                     r'width="([\d.]+)" height="([\d.]+)"', matplotlibs(p))  # fmt: skip
    x, y, w, h = map(float, clip.groups())  # the axes matplotlib clips its bars to
    assert abs(left - x) < 0.5 and abs(top - y) < 0.5
    assert abs(right - (x + w)) < 0.5 and abs(bottom - (y + h)) < 0.5


def test_text_is_escaped_and_the_svg_is_xml(tmp_path):
    p = Panel(7.2, 2, title="a <b> & c", texts=[Text(0.5, 0.5, "void f<float>(int&)")])
    p.write(tmp_path / "p.svg")
    svg = ElementTree.fromstring((tmp_path / "p.svg").read_bytes())
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert texts == ["void f<float>(int&)", "a <b> & c"]


def test_drawing_a_timeline_imports_no_matplotlib():
    code = "import sys, attn.profiling.cli, attn.traces.figures.timeline; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
