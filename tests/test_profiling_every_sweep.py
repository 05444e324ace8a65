"""attn.profiling.every_sweep: each step's own main, in order, in one process; failures said."""

from __future__ import annotations

import importlib

from attn.profiling import every_sweep


def _record(monkeypatch, statuses: dict[str, int]) -> list[tuple[str, list[str]]]:
    calls = []
    for step in every_sweep.STEPS:
        module = importlib.import_module(f"attn.profiling.{step}")
        status = statuses.get(step, 0)
        monkeypatch.setattr(
            module, "main", lambda argv, s=step, r=status: calls.append((s, argv)) or r
        )
    return calls


def test_every_step_runs_in_order_with_the_out_folder_and_device(tmp_path, monkeypatch, capsys):
    calls = _record(monkeypatch, {})
    assert every_sweep.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    assert [s for s, _ in calls] == list(every_sweep.STEPS)
    assert all(argv == ["--out", str(tmp_path), "--device", "cpu"] for _, argv in calls)
    out = capsys.readouterr().out
    assert all(f"{step}: " in out for step in every_sweep.STEPS)  # a time per step


def test_a_failed_step_is_named_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    calls = _record(monkeypatch, {"decoding": 1})
    assert every_sweep.main(["--out", str(tmp_path), "--device", "cpu"]) == 1
    assert [s for s, _ in calls] == list(every_sweep.STEPS)
    captured = capsys.readouterr()
    assert "decoding: " in captured.out and ", failed" in captured.out
    assert "error: decoding failed" in captured.err
