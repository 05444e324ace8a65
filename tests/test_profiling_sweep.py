"""What the sweeps share: each stamps its rows with the machine's load while it ran."""

import pytest

from attn.profiling import sweep


def _sample(total: int, idle: int, own_cpu_s: float, at: float) -> dict:
    return {"load_avg": [3.0, 2.0, 1.0], "ticks": {"total": total, "idle": idle, "steal": 0},
            "own_cpu_s": own_cpu_s, "at": at}  # fmt: skip


@pytest.mark.parametrize(("idle", "busy"), [(1300, True), (1800, False)])
def test_a_sweep_stamps_every_row_with_its_load_and_says_when_busy(idle, busy, monkeypatch, capsys):
    """The benchmark, scaling, decoding and training sweeps recorded no load of their own."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    samples = iter([_sample(1000, 800, 0.0, 0.0), _sample(2000, idle, 0.0, 5.0)] * 2)
    monkeypatch.setattr(sweep, "load_now", lambda: next(samples))
    monkeypatch.setattr(
        sweep, "load_before_a_run", lambda: sweep.load_over(next(samples), next(samples))
    )
    rows = sweep.stamped(
        lambda: [{"variant": "naive", "seq": 256}, {"variant": "inplace", "seq": 256}]
    )
    assert [r["variant"] for r in rows] == ["naive", "inplace"]
    assert all(r["load"]["busy"] is busy and r["load"]["cpu_count"] == 2 for r in rows)
    said = capsys.readouterr().err
    assert ("busy machine: other work used 50% of its 2 cores" in said) is busy, said
