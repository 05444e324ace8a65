"""attn.profiling.overhead: the profiler's cost and the first-touch copy, timed interleaved into a
set's overhead.json; rows go only into a set of this CPU; the claims on them, and their table."""

from __future__ import annotations

import json

import pytest

from attn.profiling import overhead
from attn.profiling.environment import cpu_model
from attn.traces.claims.benchmark_checks import BenchmarkEvidence, row_takes_longer
from attn.traces.claims.figure_tables import OVERHEAD_KINDS, overhead_table
from attn.traces.common.set_schema import FIGURES


def _set(root, name: str, model: str):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "environment.json").write_text(json.dumps({"cpu_model": model}))
    return folder


def test_rows_go_only_into_a_set_of_this_cpu_model(tmp_path):
    bare = overhead.BARE_NAME.sub("", cpu_model())  # a set made before family and model were added
    assert overhead.target(tmp_path, None).name.startswith("cpu")
    assert overhead.target(tmp_path, _set(tmp_path, "old", bare).name) == tmp_path / "old"
    _set(tmp_path, "other", "Imaginary CPU 9000")
    with pytest.raises(overhead.WrongSet) as e:
        overhead.target(tmp_path, "other")
    assert "\n" not in str(e.value) and "'Imaginary CPU 9000'" in str(e.value)
    assert overhead.main(["--out", str(tmp_path), "--set", "other"]) == 1
    assert not (tmp_path / "other" / "overhead.json").exists()


def test_the_step_writes_both_kinds_timed_and_the_claims_on_them(tmp_path):
    assert overhead.main(["--out", str(tmp_path), "--set", _set(tmp_path, "s", cpu_model()).name,
                          "--budget", "0.5"]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "s/overhead.json").read_text())
    FIGURES["overhead"](rows, "")  # fits the schema the site checks it with
    names = {(r["kind"], r["name"]) for r in rows}
    assert names == {("profiler", n) for n in ("alone", *overhead.SWITCHES, overhead.START_STOP)} | {
        ("first_touch", "clone"), ("first_touch", "copy_")}  # fmt: skip
    assert all(0 < r["low_us"] <= r["time_us"] <= r["high_us"] and "load" in r for r in rows)
    assert all(n in OVERHEAD_KINDS[k][2] for k, n in names)  # each row has its words on the page
    faults = {r["name"]: r["page_faults"] for r in rows if r["kind"] == "first_touch"}
    assert faults["clone"] > faults["copy_"]  # fresh memory faults its pages in (4 KiB or huge)
    assert (tmp_path / "s/overhead.svg").read_text().lstrip().startswith("<?xml")
    decided = json.loads((tmp_path / "s/claims.json").read_text())["variants"]["naive"]
    assert {"profiler-costs-time", "first-touch-costs-the-copy-time"} <= set(decided)


def _row(name: str, t: float, spread: float = 0.05, busy: bool = False, **extra) -> dict:
    return {"kind": "first_touch", "variant": "naive", "name": name, "time_us": t,
            "low_us": t * (1 - spread), "high_us": t * (1 + spread), "repeats": 9,
            "load": {"busy": busy, "others_share": 0.4 if busy else 0.0, "cpu_count": 2},
            "batch": 2, "heads": 8, "seq": 1024, "head_dim": 64, "dtype": "float32",
            "bytes": 2**26, "cpu_model": "Some CPU", "date": "2026-12-04", "threads": 2,
            **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("clone", "copy", "busy", "holds", "says"),
    [
        (_row("clone", 20000), _row("copy_", 6000), False, True, "clone ÷ copy_: 3.33×"),
        (_row("clone", 5000), _row("copy_", 6000), False, False, "clone ÷ copy_: 0.83×"),
        (_row("clone", 6100, 0.2), _row("copy_", 6000, 0.2), False, None, "1.02×"),
        (_row("clone", 20000), _row("copy_", 6000), True, None, "cannot tell on a busy machine"),
    ],
)
def test_a_copy_claim_says_cannot_tell_where_the_spread_or_the_load_allows_either(
    clone, copy, busy, holds, says
):
    if busy:
        clone["load"] = copy["load"] = _row("x", 1, busy=True)["load"]
    got, observed = row_takes_longer("first_touch", "clone", "copy_")(
        BenchmarkEvidence("naive", [clone, copy])
    )
    assert got is holds and says in observed


def test_a_set_without_the_rows_cannot_tell():
    got, observed = row_takes_longer("first_touch", "clone", "copy_")(
        BenchmarkEvidence("naive", [_row("clone", 1.0)])
    )
    assert got is None and observed.startswith("not measured in this set")


def test_the_copies_table_shows_each_time_with_its_spread_and_the_bytes_moved():
    rows = [_row("clone", 20000.0, page_faults=16384), _row("copy_", 5000.0, page_faults=0)]
    table = overhead_table(rows, "first_touch")
    assert "20.00 ms<br><small>19.00 ms–21.00 ms</small>" in table
    assert "| 6.7 | 16,384 |" in table and "| 26.8 | 0 |" in table  # GB/s of 2 × 64 MiB; faults
    assert "4.00×<br><small>3.62–4.42×</small>" in table  # clone ÷ copy_, its widest interval
    assert "Measured 2026-12-04 on Some CPU, 2 threads" in table and "Busy" not in table
    busy = [_row("clone", 20000.0, busy=True), _row("copy_", 5000.0, busy=True)]
    assert "**Busy machine:** other work used 40% of its 2 cores" in overhead_table(
        busy, "first_touch"
    )
