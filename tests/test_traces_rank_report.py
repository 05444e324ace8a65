"""diagnose's report of a folder of ranks (attn.traces.diagnosis.rank_report), as the terminal shows it."""

from rank_traces import write_ring
from rich.console import Console

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
