"""attn.traces.compare.diff: a hand-made pair with a known answer, real CPU runs, the CUDA fixture."""

import copy
import json
from pathlib import Path

import pytest

import attn
from attn import specs
from attn.profiling.capture import capture
from attn.profiling.config import ProfileConfig
from attn.traces.common import artifacts
from attn.traces.compare.diff import diff, render_diff, write_diffs
from attn.traces.compare.gate import main
from attn.traces.read.trace import TraceFormatError
from attn.traces.sets.analyze import write_artifacts

FIXTURE = Path(__file__).parent / "fixtures" / "cuda_naive_trace.json"
TINY = ProfileConfig(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=32)
MIB = 2**20
MEMCPY = "Memcpy DtoD (Device -> Device)"


# --- a hand-made pair: naive-like and inplace-like forwards on a pretend GPU ------------------------


def _op(name, ts, dur):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def _launch(ts, corr):
    args = {"correlation": corr}
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
            "pid": 1, "tid": 1, "args": args}  # fmt: skip


def _device(name, ts, dur, corr, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"correlation": corr}}  # fmt: skip


def _memory(ts, nbytes):
    return {"ph": "i", "name": "[memory]", "ts": ts, "pid": 1, "tid": 1,
            "args": {"Device Type": 1, "Bytes": nbytes}}  # fmt: skip


def _forward(t0, corr, inplace):
    """One attn_fwd at t0: mul (or mul_), then masked_fill -> clone -> copy_ (or masked_fill_)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "ts": t0, "dur": 90,
               "pid": 1, "tid": 1}]  # fmt: skip
    events += [_op("aten::mul_" if inplace else "aten::mul", t0 + 1, 10), _launch(t0 + 2, corr)]
    events += [_device("mul_kernel", t0 + 3, 5, corr), _memory(t0 + 2, MIB)]  # the product
    if not inplace:
        events += [_op("aten::masked_fill", t0 + 20, 20), _op("aten::clone", t0 + 21, 8)]
        events += [_memory(t0 + 22, MIB), _op("aten::copy_", t0 + 23, 5)]
        events += [_launch(t0 + 24, corr + 1), _device(MEMCPY, t0 + 25, 4, corr + 1, "gpu_memcpy")]
        events += [_op("aten::masked_fill_", t0 + 30, 6), _launch(t0 + 31, corr + 2)]
        events += [_device("fill_kernel", t0 + 32, 3, corr + 2), _memory(t0 + 80, -MIB)]
    else:
        events += [_op("aten::masked_fill_", t0 + 30, 6), _launch(t0 + 31, corr + 2)]
        events.append(_device("fill_kernel", t0 + 32, 3, corr + 2))
    return events + [_memory(t0 + 85, -MIB)]


def _trace(inplace):
    events = _forward(0, 10, inplace) + _forward(100, 20, inplace)
    return {"traceEvents": events}


@pytest.fixture
def pair(tmp_path):
    a, b = tmp_path / "before.json", tmp_path / "after.json"
    a.write_text(json.dumps(_trace(False)))
    b.write_text(json.dumps(_trace(True)))
    return a, b


def rows_by_name(data):
    return {(r["name"], r["kind"]): r for r in data["rows"]}


def test_hand_made_pair_gives_the_known_answer(pair):
    data = diff(*pair)
    rows = rows_by_name(data)
    assert rows[(MEMCPY, "memcpy")] == {
        "name": MEMCPY, "kind": "memcpy", "calls_a": 1.0, "calls_b": 0.0,
        "time_us_a": 4.0, "time_us_b": 0.0, "change": "removed",
    }  # fmt: skip
    expected = {
        ("aten::masked_fill", "op"): (1, 0, 20, "removed"),
        ("aten::clone", "op"): (1, 0, 8, "removed"),
        ("aten::copy_", "op"): (1, 0, 5, "removed"),
        ("aten::mul", "op"): (1, 0, 10, "removed"),
        ("aten::mul_", "op"): (0, 1, 0, "added"),
        ("aten::masked_fill_", "op"): (1, 1, 6, "same"),
        ("mul_kernel", "kernel"): (1, 1, 5, "same"),
        ("fill_kernel", "kernel"): (1, 1, 3, "same"),
    }
    assert set(rows) == set(expected) | {(MEMCPY, "memcpy")}
    for key, (calls_a, calls_b, time_a, change) in expected.items():
        row = rows[key]
        assert (row["calls_a"], row["calls_b"], row["time_us_a"], row["change"]) == (
            calls_a, calls_b, time_a, change,
        ), key  # fmt: skip
    assert [r["change"] for r in data["rows"]][:1] == ["removed"]  # removed rows lead
    assert data["a"]["peak_memory_bytes"] == 2 * MIB and data["b"]["peak_memory_bytes"] == MIB
    assert data["a"]["kernels_per_forward"] == 2 and data["b"]["kernels_per_forward"] == 2
    # Device work leads the headline, then what copies, then the other ops.
    assert data["headline"] == (
        f"{MEMCPY}, aten::clone, aten::copy_ and aten::masked_fill (and 1 more) gone; "
        "aten::mul_ new; peak memory 2.0 -> 1.0 MiB"
    )


def test_a_changed_count_is_named_with_its_difference(tmp_path, pair):
    more = _trace(False)
    more["traceEvents"].append(_op("aten::clone", 150, 2))  # a second clone in the 2nd forward
    path = tmp_path / "more.json"
    path.write_text(json.dumps(more))
    data = diff(pair[0], path)
    clone = rows_by_name(data)[("aten::clone", "op")]
    assert clone["change"] == "changed" and clone["calls_b"] == 1.5  # 1 and 2: 1.5 per forward
    assert data["headline"] == "0.50 aten::clone new; peak memory 2.0 -> 2.0 MiB"


def test_a_trace_against_itself_is_the_same(pair):
    data = diff(pair[0], pair[0])
    assert {r["change"] for r in data["rows"]} == {"same"}
    assert data["headline"].startswith("the same ops and kernels per forward")


# --- real CPU runs: the in-place chapter's finding ------------------------------------------------


@pytest.fixture(scope="module")
def cpu_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cpu")
    for name in ("naive", "inplace"):
        trace, table = capture(attn.get_variant(name), TINY)
        base = {"variant": name, "hardware": "cpu", "shape": TINY.shape(), "dtype": TINY.dtype}
        write_artifacts(
            trace, root / name, spec=specs.spec(name), base=base, device_type="cpu", table_txt=table
        )
    return root


def test_inplace_diff_shows_the_clone_and_its_copy_gone(cpu_folders):
    data = diff(cpu_folders / "naive", cpu_folders / "inplace")
    rows = rows_by_name(data)
    assert rows[("aten::clone", "op")]["change"] == "removed"
    copy_ = rows[("aten::copy_", "op")]
    assert copy_["calls_a"] - copy_["calls_b"] == 1
    assert "aten::clone" in data["headline"] and "1 aten::copy_" in data["headline"]
    assert data["a"]["label"] == "naive" and data["b"]["label"] == "inplace"
    assert data["a"]["peak_memory_bytes"] > 0 and data["notes"] == []
    assert all(r["kind"] == "op" for r in data["rows"])  # a CPU run has no device rows


def test_render_diff_shows_only_what_changed(cpu_folders):
    data = diff(cpu_folders / "naive", cpu_folders / "inplace")
    text = render_diff(data)
    assert text.startswith(f"**naive → inplace:** {data['headline']}.")
    table = [line for line in text.splitlines() if line.startswith("| `")]
    changed = [r for r in data["rows"] if r["change"] != "same"]
    assert len(table) == len(changed) and any("`aten::clone`" in line for line in table)
    assert "| gone |" in text and "| removed |" not in text and "| same |" not in text
    assert len([ln for ln in render_diff(data, everything=True).splitlines() if ln.startswith("| `")]) == len(data["rows"])  # fmt: skip
    assert "peak memory" in text.splitlines()[-1]


def test_write_diffs_writes_the_pairs_that_ran(cpu_folders, tmp_path):
    hardware = tmp_path / "cpu"
    for name in ("naive", "inplace"):
        (hardware / name).mkdir(parents=True)
        for f in (artifacts.SUMMARY, artifacts.TRACE):
            (hardware / name / f).write_bytes((cpu_folders / name / f).read_bytes())
    (hardware / "sdpa_math").mkdir()  # a variant that could not run here
    (hardware / "sdpa_math" / artifacts.SUMMARY).write_text(json.dumps({"available": False}))
    stale = hardware / artifacts.DIFF_DIR / "inplace__sdpa_math.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    written = write_diffs(hardware, specs.diff_pairs())
    assert written == [hardware / artifacts.DIFF_DIR / "naive__inplace.json"]
    assert not stale.exists()
    saved = json.loads(written[0].read_text())
    assert saved["headline"] == diff(hardware / "naive", hardware / "inplace")["headline"]
    assert ("decode_repeat_kv", "decode_enable_gqa") in specs.diff_pairs()
    assert not [p for p in written[0].parent.iterdir() if p.name.startswith(".")]  # no scratch


# --- the CUDA fixture: the Memcpy DtoD is the news ------------------------------------------------


def _without_the_clone(trace):
    """The fixture as an in-place forward would record it: no clone, its copy_ or the Memcpy."""
    trace = copy.deepcopy(trace)
    events = trace["traceEvents"]
    memcpy = {e["args"]["correlation"] for e in events if e.get("cat") == "gpu_memcpy"}
    drop = [e for e in events if e.get("name") in ("aten::masked_fill", "aten::clone")]
    inside = lambda e: any(  # noqa: E731
        d["ts"] <= e.get("ts", -1) <= d["ts"] + d["dur"] and e.get("tid") == d.get("tid")
        for d in drop
        if d["name"] == "aten::clone"
    )
    kept = []
    for e in events:
        if e in drop or (e.get("args") or {}).get("correlation") in memcpy:
            continue
        if e.get("cat") == "cpu_op" and inside(e):
            continue
        kept.append(e)
    trace["traceEvents"] = kept
    return trace


def test_cuda_fixture_diff_shows_the_memcpy_gone(tmp_path):
    after = tmp_path / "inplace.json"
    after.write_text(json.dumps(_without_the_clone(json.loads(FIXTURE.read_text()))))
    data = diff(FIXTURE, after)
    rows = rows_by_name(data)
    assert rows[(MEMCPY, "memcpy")]["change"] == "removed"
    assert rows[("aten::clone", "op")]["change"] == "removed"
    assert data["headline"].startswith(MEMCPY)
    kernels = [r for r in data["rows"] if r["kind"] == "kernel"]
    assert kernels and all(r["change"] == "same" for r in kernels)
    assert data["a"]["device_type"] == "cuda"
    assert "| memcpy |" in render_diff(data)


def test_cuda_fixture_against_a_cpu_run_carries_a_note(cpu_folders):
    data = diff(FIXTURE, cpu_folders / "naive")
    assert any("different devices" in n for n in data["notes"])
    assert "Note: different devices" in render_diff(data)


# --- command line ----------------------------------------------------------------------------------


def test_command_line_prints_and_writes(pair, tmp_path, capsys):
    out = tmp_path / "diff" / "a__b.json"
    assert main([str(pair[0]), str(pair[1]), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "aten::clone" in printed and "gone" in printed
    written = json.loads(out.read_text())
    assert written["schema"] == 1 and written["passed"] is None  # no --fail-on: a report
    assert [p["headline"] for p in written["pairs"]] == [diff(*pair)["headline"]]


def test_command_line_names_a_bad_input(tmp_path, capsys):
    bad = tmp_path / "nope.json"
    bad.write_text("{}")
    assert main([str(bad), str(bad)]) == 2  # bad input: 1 is a regression
    assert "nope.json" in capsys.readouterr().err
    with pytest.raises(TraceFormatError, match="no trace.json.gz"):
        diff(tmp_path, tmp_path)


@pytest.mark.parametrize("summary", ["nope", "[]", '{"cpu_time_us": "fast"}'])
def test_command_line_names_a_summary_that_is_not_one(pair, tmp_path, summary, capsys):
    a, b = pair
    bad = tmp_path / "bad"
    write_artifacts(json.loads(a.read_text()), bad)
    (bad / "summary.json").write_text(summary)
    assert main([str(bad), str(b)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(bad / "summary.json") in line


def test_command_line_names_an_out_it_cannot_write(pair, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    assert main([*map(str, pair), "--out", str(tmp_path / "a-file" / "d.json")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error:")


@pytest.mark.parametrize("out", ["b", "a-folder", "fifo"])
def test_command_line_never_writes_over_an_input_or_a_device(pair, tmp_path, out, capsys):
    """`diff a.json b.json --out b.json` replaced b and exited 0; a device became a file."""
    import os

    a, b = pair
    folder = tmp_path / "run"
    write_artifacts(json.loads(a.read_text()), folder)
    before = {p: p.read_bytes() for p in (b, *folder.iterdir())}
    if out == "fifo":
        os.mkfifo(tmp_path / "pipe")
    target = {"b": b, "a-folder": folder / "summary.json", "fifo": tmp_path / "pipe"}[out]
    assert main([str(folder), str(b), "--out", str(target)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and str(target) in line
    assert {p: p.read_bytes() for p in before} == before


def test_an_edited_summary_does_not_change_the_counts(pair, tmp_path):
    """Rows come from the traces; the totals came from the summary, so an edit said 45 -> 1."""
    a, b = pair
    folders = []
    for side in (a, b):
        folder = tmp_path / side.stem
        write_artifacts(json.loads(side.read_text()), folder)
        folders.append(folder)
    truth = diff(*folders)
    summary = folders[1] / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "ops_per_forward": 1,
                                   "kernels_per_forward": 99, "forwards": 7}))  # fmt: skip
    edited = diff(*folders)
    for key in ("ops_per_forward", "kernels_per_forward", "forwards"):
        assert edited["b"][key] == truth["b"][key]


def test_a_summary_whose_range_is_not_a_name_is_one_line(pair, tmp_path, capsys):
    a, b = pair
    folder = tmp_path / "run"
    write_artifacts(json.loads(a.read_text()), folder)
    summary = folder / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "range": 5}))
    assert main([str(folder), str(b)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(summary) in line and "range is 5" in line


def test_command_line_out_is_scrubbed(tmp_path, capsys):
    """diff --out wrote every path the traces held, which a published trace never does."""
    traces = []
    for name, inplace in (("a", False), ("b", True)):
        trace = _trace(inplace)
        for e in trace["traceEvents"]:
            if e.get("name") == "aten::clone":
                e["name"] = "/home/bob.jones/p/model.py(12): clone"
        traces.append(tmp_path / f"{name}.json")
        traces[-1].write_text(json.dumps(trace))
    out = tmp_path / "d.json"
    assert main([*map(str, traces), "--out", str(out)]) == 0
    assert "bob.jones" not in out.read_text() and "<redacted>" in out.read_text()


def _nested(path: Path, depth: int) -> Path:
    """Two forwards, no attn_fwd: each an aten::baddbmm whose own dispatch nests `depth` deep,
    then one aten::softmax."""
    events = []
    for t0 in (0, 100):
        events += [_op("aten::baddbmm", t0 + i, 40 - 2 * i) for i in range(depth)]
        events.append(_op("aten::softmax", t0 + 50, 10))
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_trace_without_attn_fwd_is_refused_naming_range(tmp_path, capsys):
    trace = _nested(tmp_path / "a.json", 1)
    assert main([str(trace), str(trace)]) == 2
    assert "--range" in capsys.readouterr().err


def test_a_range_counts_once_however_deep_its_name_nests(tmp_path):
    a, b = _nested(tmp_path / "a.json", 1), _nested(tmp_path / "b.json", 3)
    data = diff(a, b, "aten::baddbmm")
    assert data["a"]["forwards"] == data["b"]["forwards"] == 2
    rows = rows_by_name(data)
    assert rows[("aten::baddbmm", "op")]["calls_b"] == 2  # the two nested under each range
    assert "aten::softmax" not in {name for name, _ in rows}  # outside every range


def test_diff_prints_160_columns_into_a_pipe(pair, monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main([str(pair[0]), str(pair[1])]) == 0
    assert 80 < max(map(len, capsys.readouterr().out.splitlines())) <= 160
