"""The report (attn.traces.diagnosis.report) as `python -m attn.profiling diagnose` prints it."""

import json
import re
import sys
from pathlib import Path

from attn.profiling import cli
from attn.traces.diagnosis.diagnose import diagnose
from attn.traces.diagnosis.findings import FINDINGS
from attn.traces.diagnosis.report import CHAPTERS, HEADERS, markdown
from attn.traces.read.trace import Trace, read_trace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from diagnose_cases import CPU_SET, REAL, fixture  # noqa: E402

# --- the command line -----------------------------------------------------------------------------


def test_cli_writes_the_json_shape_and_prints_a_table(tmp_path, capsys):
    path = next((REAL / "tracelens-h100-bert-small-sdpa-flash").glob("*.json.gz"))
    out = tmp_path / "diagnosis.json"
    assert cli.main(["diagnose", str(path), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (row,) = result["attention"]
    assert set(row) >= {
        "implementation", "compiled", "where", "calls", "kernels_per_call",
        "device_time_us_per_call",
    }  # fmt: skip
    assert result["findings"] == [] and result["trace"]["device_name"] == "NVIDIA H100 80GB HBM3"
    printed = capsys.readouterr().out
    assert "sdpa_flash" in printed and "pytorch_flash::flash_fwd_kernel" in printed


def test_cli_names_a_finding_and_its_chapter(capsys):
    assert cli.main(["diagnose", str(CPU_SET / "naive/trace.json.gz")]) == 0
    printed = capsys.readouterr().out
    assert "out_of_place_masked_fill" in printed and "In-place masking (inplace.md)" in printed


def test_what_a_graph_replay_cannot_tell_is_said_once(capsys):
    trace = REAL / "tracelens-mi300x-sglang-decode-graph/sglang_Qwen3-8B_decode.json.gz"
    assert cli.main(["diagnose", str(trace)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.count("not checked") == 1 and "sync_in_forward: not checked" in printed


def test_a_trace_with_no_attention_says_so(tmp_path, capsys):
    trace = fixture()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "softmax" not in e.get("name", "")]
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    assert cli.main(["diagnose", str(tmp_path / "trace.json")]) == 0
    first, *lint = capsys.readouterr().out.strip().splitlines()
    assert first == "No attention found in this trace."
    assert "no input shapes were recorded" in " ".join(lint)  # the fixture has none


def test_each_row_says_what_its_device_time_is_and_what_no_row_explains(capsys):
    """The multi-query trace: a call's 4.11 ms are its attention kernels and the rest by kind; the
    extra terms on its scores; the GEMMs outside attention, the largest first."""
    path = next((REAL / "switchtransformers-a100-eager-mqa-fp32").glob("*.json*"))
    assert cli.main(["diagnose", str(path)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "4.11 ms per call: attention kernels 2.85 ms, score terms 1.04 ms (2 kernels)" in printed
    assert "extra terms on the scores: aten::mul 316.3 µs, aten::masked_fill 722.4 µs" in printed
    assert "Unattributed: kernels outside the rows above" in printed
    assert "53.5% 41 x, under aten::addmm: ampere_sgemm_128x64_tn" in printed


def test_a_trace_whose_kernels_the_rows_hold_says_nothing_is_left(tmp_path, capsys):
    kernel = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >"
    trace = {"traceEvents": [{"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": kernel,
                              "ts": 100 * i, "dur": 50} for i in range(2)]}  # fmt: skip
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    assert cli.main(["diagnose", str(tmp_path / "trace.json")]) == 0
    assert "Unattributed: no kernel outside the rows above" in capsys.readouterr().out


def test_a_name_of_200k_characters_is_cut_before_it_is_printed(tmp_path, monkeypatch, capsys):
    """A 10-million-character kernel name made diagnose run past 600 s (200k: 260 s): rich's
    highlighter re-scanned the whole name as it printed it. No timing here: the name is cut to a
    line's worth, which the old report never did (it takes minutes there, and fails)."""
    monkeypatch.setenv("COLUMNS", "3000")  # wide enough that rich's own ellipsis cuts nothing
    trace = fixture()
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] += "<" + "1, " * 70_000 + ">"
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    assert cli.main(["diagnose", str(tmp_path / "trace.json")]) == 0
    printed = capsys.readouterr().out.splitlines()
    kernels = [line for line in printed if "eager forward:" in line and "1, 1, 1" in line]
    assert kernels and all(line.endswith(" characters)") for line in kernels)
    assert all(len(line) < 1100 for line in kernels)


# --- as Markdown (a notebook) --------------------------------------------------------------------


def table(text: str, title: str) -> list[list[str]]:
    """The rows of the Markdown table under **title**, the header first."""
    block = text.split(f"**{title}**\n\n", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines()]
    return [rows[0], *rows[2:]]


def test_markdown_names_each_findings_chapter_as_diagnose_alone_finds_it():
    """diagnose as a reader calls it (a notebook: no argument but the trace) names the chapter of
    each finding, and the Markdown report shows it."""
    text = markdown(diagnose(read_trace(CPU_SET / "naive/trace.json.gz")))
    header, *rows = table(text, "Findings")
    assert header == ["finding", "count", "chapter", "advice"]
    assert {row[0]: row[2] for row in rows} == {  # read "sdpa.md": a link titled with its chapter
        "out_of_place_masked_fill": "[In-place masking](inplace.md)",
        "eager_attention": "[SDPA backends](sdpa.md)",
    }


def test_markdown_links_the_published_pages_from_where_a_notebook_shows_it():
    """A notebook's output is not rewritten by mkdocs: given the site's root from the notebook's
    page, each chapter links the page as published."""
    text = markdown(diagnose(read_trace(CPU_SET / "naive/trace.json.gz")), site="../../")
    _, *rows = table(text, "Findings")
    assert {row[2] for row in rows} == {
        "[In-place masking](../../inplace/)",
        "[SDPA backends](../../sdpa/)",
    }


def test_every_chapter_a_finding_names_is_titled_as_the_nav_titles_it():
    """The titles the report shows are mkdocs.yml's, for every page a finding names."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")  # its !!python tags: no safe_load
    titles = {page: title for title, page in re.findall(r"^  - (.+): ([\w/.-]+\.md)$", nav, re.M)}
    assert {page: titles[page] for page in CHAPTERS} == CHAPTERS
    assert {f.page for f in FINDINGS} <= set(CHAPTERS)


def test_markdown_leaves_out_the_columns_a_trace_cannot_fill():
    """A CPU trace has no kernels, no device time and no share: its table has no such columns; its
    time per call is the host's, said as CPU time; a GPU trace's has them all (this one, recorded
    without shapes, has no shapes)."""
    cpu = markdown(diagnose(read_trace(CPU_SET / "naive/trace.json.gz")))
    assert table(cpu, "Attention")[0] == ["implementation", "pass", "compiled", "where", "shapes",
                                          "calls", "time"]  # fmt: skip
    gpu = markdown(diagnose(Trace(fixture())))
    assert table(gpu, "Attention")[0] == [h for h in HEADERS if h != "shapes"]
    assert "Kernels, time (on the device, else CPU time) and share: per call." in gpu


def test_a_cpu_trace_shows_its_cpu_time_per_call(capsys):
    """diagnose on a CPU trace showed no time per call: it shows the calls' host time, labelled."""
    result = diagnose(read_trace(CPU_SET / "naive/trace.json.gz"))
    (row,) = result["attention"]
    assert row["device_time_us_per_call"] is None and row["cpu_time_us_per_call"] > 0
    time = table(markdown(result), "Attention")[1][-1]
    assert time.endswith(" CPU time") and time != "– CPU time"
    assert cli.main(["diagnose", str(CPU_SET / "naive/trace.json.gz")]) == 0
    assert " CPU time" in capsys.readouterr().out


def test_markdown_shows_a_name_as_text():
    """A name from a trace is text in the Markdown: no table cell it ends, no tag, no list."""
    result = diagnose(Trace(fixture()))
    result["attention"][0]["where"] = "a | b <script>"
    result["findings"][0]["advice"] = "1. *x* [y](z)"
    text = markdown(result)
    assert "a \\| b &lt;script>" in table(text, "Attention")[1][3]
    assert r"1. *x* \[y\](z)" in text
