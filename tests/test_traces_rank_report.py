"""diagnose's report of a folder of ranks (attn.traces.diagnosis.rank_report), as the terminal shows it."""

import gzip
import json

from rank_traces import gpu_step, write_ring
from rich.console import Console

from attn.traces.common.terminal import UNSAFE
from attn.traces.diagnosis.diagnose import diagnose_ranks
from attn.traces.diagnosis.rank_report import report_ranks


def shown(result) -> str:
    console = Console(width=100, record=True)
    report_ranks(result, console)
    return console.export_text()


def test_a_row_per_rank_then_the_imbalance_and_the_straggler(tmp_path):
    text = shown(diagnose_ranks(write_ring(tmp_path / "job"), workers=1))
    assert "2 ranks of a world of 2: job" in text
    lines = [line for line in text.splitlines() if line.startswith(("│ 0 ", "│ 1 "))]
    assert len(lines) == 2 and "100.0 µs" in lines[0] and "200.0 µs" in lines[1]
    assert "1 × 4.0 MiB" in lines[0]
    assert "compute is the attention's" in " ".join(text.split())
    assert "Imbalance: the slowest rank computes 1.33× (1.33–1.33×)" in " ".join(text.split())
    assert "Straggler: rank 1." in text


def test_one_rank_cannot_tell_an_imbalance(tmp_path):
    text = shown(diagnose_ranks(write_ring(tmp_path / "job", world=1), workers=1))
    assert "Imbalance: cannot tell" in text


def test_names_from_the_folder_and_the_traces_reach_the_terminal_as_text(tmp_path):
    """A folder's name and a step's are anything: escape sequences and rich markup are shown,
    not done."""
    folder = tmp_path / "job\x1b[2J[bold red]x\udcff"  # \udcff: the byte 0xff, not UTF-8
    for rank in (0, 1):
        trace = gpu_step(rank, steps=1)
        trace["traceEvents"][0]["name"] = "ProfilerStep#\x1b]0;owned\x07[blink]"
        folder.mkdir(exist_ok=True)
        (folder / f"r{rank}.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    text = shown(diagnose_ranks(folder, workers=1))
    assert not any(UNSAFE.search(line) for line in text.splitlines()), repr(text)
    flat = "".join(text.split())  # the table may fold a long name
    assert (
        "job\\x1b[2J[boldred]x\\udcff" in flat
        and "eachProfilerStep#\\x1b]0;owned\\x07[blink]" in flat
    )
