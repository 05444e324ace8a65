"""`python -m attn.profiling`: its subcommands, and one line naming the flag for every bad flag."""

import dataclasses
import errno
import gc
import gzip
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import torch
from committed import CPU_SET  # the committed set, as HEAD holds it
from rank_traces import write_ring

from attn import specs
from attn.profiling import cli
from attn.profiling import config as config_module
from attn.profiling.cli import config_from, main, parser
from attn.profiling.environment import hardware_slug

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--batch", "1", "--heads", "2", "--seq", "32", "--head-dim", "16", "--no-screenshot"]


def parse(*argv):
    return config_from(parser().parse_args(["run", "--device", "cpu", *argv]))


def test_flags_override_the_device_defaults():
    config = parse("--seq", "100", "--seq-k", "50", "--no-causal", "--dtype", "bfloat16")
    assert (config.seq_q, config.seq_k, config.is_causal, config.dtype) == (
        100,
        50,
        False,
        "bfloat16",
    )
    assert parse().seq_q == parse().seq_k == 1024


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--seq", "0"], ["--seq", ">= 1"]),
        (["--seq-k", "0"], ["--seq-k", ">= 1"]),
        (["--seq", "-1"], ["--seq", ">= 1"]),
        (["--heads", "two"], ["--heads", "whole number"]),
        (["--device", "bogus"], ["--device", "cpu or cuda"]),
        (["--device", "meta"], ["--device", "cpu or cuda"]),
        (["--dtype", "int8"], ["--dtype", "float32"]),
        (["--out", ""], ["--out", "empty"]),
        (["--out", "/proc/attn"], ["--out", "cannot be written"]),
        (["--variants", "fast"], ["--variants", "naive"]),
    ],
)
def test_a_bad_flag_gets_one_line_naming_it(argv, names, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", *argv])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    for name in names:
        assert name in last, last


def test_out_at_a_file_is_refused(tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(SystemExit):
        main(["run", "--out", str(file), "--device", "cpu"])
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_without_a_gpu_is_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--device", "cuda"])
    assert "cannot use CUDA" in capsys.readouterr().err


def test_run_profiles_the_named_variants(tmp_path):
    argv = [
        "run",
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        "--variants",
        "sdpa_flash",
        "sdpa_efficient",
        *TINY,
    ]
    assert main(argv) == 0
    cpu = tmp_path / hardware_slug("cpu")
    assert (cpu / "environment.json").exists() and (cpu / "index.json").exists()
    assert json.loads((cpu / "sdpa_flash" / "summary.json").read_text())["available"]
    assert not json.loads((cpu / "sdpa_efficient" / "summary.json").read_text())["available"]


def test_example_runs_the_script_and_analyses_its_trace(tmp_path):
    argv = [
        "example",
        "sdpa_math",
        "--out",
        str(tmp_path),
        "--device",
        "cpu",
        *TINY,
    ]
    assert main(argv) == 0
    summary = json.loads(
        (tmp_path / hardware_slug("cpu") / "sdpa_math" / "summary.json").read_text()
    )
    assert summary["shape"]["seq_q"] == 32 and all(c["holds"] is True for c in summary["claims"])


def test_recheck_reports_and_fixes_a_stale_claim(tmp_path):
    assert (
        main(
            [
                "run",
                "--out",
                str(tmp_path),
                "--device",
                "cpu",
                "--variants",
                "naive",
                *TINY,
            ]
        )
        == 0
    )
    path = tmp_path / hardware_slug("cpu") / "naive" / "summary.json"
    summary = json.loads(path.read_text())
    fresh = summary["claims"]
    path.write_text(json.dumps({**summary, "claims": [{**fresh[0], "holds": False}]}))
    assert main(["recheck", str(tmp_path), "--check"]) == 1  # differs: CI would fail
    assert main(["recheck", str(tmp_path)]) == 0  # rewrites it from the committed trace
    assert json.loads(path.read_text())["claims"] == fresh
    assert main(["recheck", str(tmp_path), "--check"]) == 0


CUDA_FIXTURE = ROOT / "tests" / "fixtures" / "cuda_naive_trace.json"


def write_trace(path: Path, edit=None) -> Path:
    """The CUDA fixture at `path`, after `edit(events)` if given."""
    trace = json.loads(CUDA_FIXTURE.read_text())
    if edit is not None:
        edit(trace["traceEvents"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace))
    return path


def test_analyze_refuses_to_replace_a_folder_it_did_not_write(tmp_path, capsys):
    """An example's folder holds its raw trace and table (and here a file of the user's): analysing
    that trace with --out at its parent would have replaced the folder, and lost all three."""
    runs = tmp_path / "runs"
    trace = write_trace(runs / "naive" / "trace.json")
    (runs / "naive" / "table.txt").write_text("the profiler's table\n")
    (runs / "naive" / "notes.md").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in (runs / "naive").iterdir()}
    assert main(["analyze", str(trace), "--variant", "naive", "--out", str(runs)]) == 1
    assert "did not write" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (runs / "naive").iterdir()} == before


def test_analyze_replaces_a_folder_it_wrote(tmp_path):
    trace = write_trace(tmp_path / "trace.json")
    for _ in range(2):
        assert main(["analyze", str(trace), "--variant", "naive", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "naive" / "summary.json").read_text())["variant"] == "naive"


def test_a_trace_read_by_main_from_python_is_the_collectors_again(tmp_path):
    """The command keeps a trace it read out of the cyclic collector (gc.freeze) till it exits;
    called from Python, main hands it back, or every trace analysed would stay for good."""
    trace = write_trace(tmp_path / "trace.json")
    assert main(["analyze", str(trace), "--out", str(tmp_path / "out")]) == 0
    assert main(["diagnose", str(trace)]) == 0
    assert gc.get_freeze_count() == 0


def test_two_traces_of_one_name_get_a_folder_each(tmp_path, capsys):
    """Every example writes trace.json.gz: two analysed together must not land in one folder."""

    def longer(events):  # every kernel of the second trace twice as long
        for e in events:
            if e.get("cat") == "kernel":
                e["dur"] *= 2

    a = write_trace(tmp_path / "a" / "trace.json")
    b = write_trace(tmp_path / "b" / "trace.json", longer)
    out = tmp_path / "out"
    assert main(["analyze", str(a), str(b), "--out", str(out)]) == 0
    times = [json.loads((out / n / "summary.json").read_text()) for n in ("a-trace", "b-trace")]
    assert times[1]["device_time_us"] > times[0]["device_time_us"]
    assert times[0]["source"] == times[1]["source"] == "trace.json"


@pytest.mark.parametrize("markup", ["[bold red]", "[link=x]"])
def test_names_holding_rich_markup_print_as_text(tmp_path, markup, capsys):
    """A trace's name reaches the console; rich would take it for markup and swallow it."""
    trace = write_trace(tmp_path / f"{markup}x.json")
    assert main(["analyze", str(trace), "--out", str(tmp_path / "out")]) == 0
    assert f"{markup}x: 2 range(s)" in capsys.readouterr().err


def test_a_full_disk_is_one_line_and_keeps_the_previous_set(tmp_path, monkeypatch, capsys):
    from attn.traces.sets import analyze

    trace = write_trace(tmp_path / "trace.json")
    argv = ["analyze", str(trace), "--variant", "naive", "--out", str(tmp_path)]
    assert main(argv) == 0
    before = (tmp_path / "naive" / "summary.json").read_text()

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(analyze, "write_trace", full)
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("No space left on device")
    assert (tmp_path / "naive" / "summary.json").read_text() == before


@pytest.fixture(scope="module")
def committed_set(tmp_path_factory):
    """Two variants of the committed CPU set, with their environment, diff and manifest."""
    root = tmp_path_factory.mktemp("profiles")
    cpu = root / "cpu"
    cpu.mkdir()
    for name in ("naive", "inplace", "environment.json"):
        source = CPU_SET / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, cpu / name)
    assert main(["recheck", str(root)]) == 0  # its manifest and diff, for these two
    assert main(["recheck", str(root), "--check"]) == 0
    return root


def edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def stale_overview(path: Path) -> None:
    """The overview as a run killed before redrawing it leaves it: other times on the bars."""
    path.write_text(re.sub(r">[0-9.]+ ms<", ">1.23 ms<", path.read_text()))


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (lambda cpu: (cpu / "naive" / "trace.json.gz").unlink(), "naive/trace.json.gz"),
        (lambda cpu: edit_json(cpu / "naive/summary.json", cpu_time_us=1.0), "naive/summary.json"),
        (lambda cpu: edit_json(cpu / "naive/summary.json", ops=["aten::mm"]), "naive/summary.json"),
        (lambda cpu: edit_json(cpu / "naive/summary.json", shape={}), "cpu/index.json"),
        (lambda cpu: (cpu / "naive/summary.json").write_text("{}"), "naive/summary.json"),
        (lambda cpu: (cpu / "index.json").unlink(), "cpu/index.json"),
        (lambda cpu: edit_json(cpu / "index.json", variants={}), "cpu/index.json"),
        (lambda cpu: (cpu / "environment.json").unlink(), "cpu/environment.json"),
        (lambda cpu: edit_json(cpu / "diff/naive__inplace.json", a="x"), "naive__inplace.json"),
        (lambda cpu: (cpu / "diff/naive__inplace.json").unlink(), "naive__inplace.json"),
        (lambda cpu: (cpu / "overview.svg").unlink(), "cpu/overview.svg"),
        (lambda cpu: stale_overview(cpu / "overview.svg"), "cpu/overview.svg"),
        (lambda cpu: shutil.rmtree(cpu), "no hardware set"),
    ],
    ids=[
        "trace gone",
        "numbers",
        "ops",
        "shape",
        "empty summary",
        "index gone",
        "index edited",
        "environment gone",
        "diff edited",
        "diff gone",
        "overview gone",
        "overview stale",
        "no set",
    ],  # fmt: skip
)
def test_recheck_check_fails_on_any_difference_naming_the_file(
    committed_set, tmp_path, tamper, named, capsys
):
    root = tmp_path / "profiles"
    shutil.copytree(committed_set, root)
    tamper(root / "cpu")
    assert main(["recheck", str(root), "--check"]) == 1
    said = capsys.readouterr()
    assert named in (said.out + said.err).replace("\n", "")


def test_recheck_after_a_trace_swap_rewrites_the_numbers(committed_set, tmp_path):
    root = tmp_path / "profiles"
    shutil.copytree(committed_set, root)
    cpu = root / "cpu"
    shutil.copy(cpu / "inplace/trace.json.gz", cpu / "naive/trace.json.gz")
    assert main(["recheck", str(root)]) == 0
    naive, inplace = (
        json.loads((cpu / n / "summary.json").read_text()) for n in ("naive", "inplace")
    )
    assert naive["ops"] == inplace["ops"] and naive["cpu_time_us"] == inplace["cpu_time_us"]
    assert main(["recheck", str(root), "--check"]) == 0


def test_impossible_event_data_is_one_line_naming_the_file(tmp_path, capsys):
    def null_ts(events):
        for e in events:
            if e.get("name") == "aten::softmax":
                e["ts"] = None

    trace = write_trace(tmp_path / "t.json", null_ts)
    assert main(["analyze", str(trace), "--out", str(tmp_path / "out")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(trace) in line and "'aten::softmax' has ts None" in line


# --- nothing a command did not write is replaced or removed ---------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)  # not a plain file, as a device is: never to be replaced by one
    return path


@pytest.mark.parametrize("out", ["input", "fifo"])
def test_diagnose_json_never_replaces_its_input_or_a_device(tmp_path, out, capsys):
    trace = write_trace(tmp_path / "t.json")
    before = trace.read_bytes()
    target = trace if out == "input" else _fifo(tmp_path / "pipe")
    assert main(["diagnose", str(trace), "--json", str(target)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and str(target) in line
    assert trace.read_bytes() == before and (out == "input" or target.is_fifo())


def test_analyze_into_the_set_its_trace_is_from_removes_nothing(tmp_path, capsys):
    """--out at the set the trace is read from: table.txt (which a trace cannot give back) and
    viewer.png were deleted, and recheck then failed on the summary."""
    folder = tmp_path / "cpu" / "naive"
    trace = write_trace(folder / "trace.json.gz")
    (folder / "table.txt").write_text("the profiler's table\n")
    (folder / "summary.json").write_text('{"variant": "naive"}')
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    argv = ["analyze", str(trace), "--variant", "naive", "--out", str(tmp_path / "cpu")]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(trace) in line and "another folder" in line
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    (folder / "trace.json.gz").rename(tmp_path / "trace.json.gz")  # read from elsewhere: table.txt
    argv[1] = str(tmp_path / "trace.json.gz")
    assert main(argv) == 1 and "table.txt" in capsys.readouterr().err


def test_traces_whose_names_would_clash_get_distinct_folders(tmp_path):
    """x/t.json, x/t.json.gz and x-t-1.json: two folders were both x-t-1, one trace's numbers."""

    def longer(events):
        for e in events:
            if e.get("cat") == "kernel":
                e["dur"] *= 2

    traces = [
        write_trace(tmp_path / "x" / "t.json"),
        write_trace(tmp_path / "x" / "t.json.gz", longer),
        write_trace(tmp_path / "x-t-1.json", longer),
    ]
    traces[1].write_bytes(gzip.compress(traces[1].read_bytes()))
    out = tmp_path / "out"
    assert main(["analyze", *map(str, traces), "--out", str(out)]) == 0
    sources = sorted(
        (json.loads((f / "summary.json").read_text())["source"], f.name) for f in out.iterdir()
    )
    assert [s for s, _ in sources] == ["t.json", "t.json.gz", "x-t-1.json"]
    assert len({n for _, n in sources}) == 3


ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"  # a window title, a cleared screen, a colour


def test_escape_sequences_in_a_trace_never_reach_the_terminal(tmp_path, capsys):
    """Names from a trace reached the terminal as they were: rich removes only BEL and CR."""
    name = f"attn_fwd{ESCAPES}"

    def rename(events):
        for e in events:
            if e.get("name") == "attn_fwd":
                e["name"] = name
            elif e.get("name") == "aten::softmax":
                e["name"] = f"aten::softmax{ESCAPES}"

    trace = write_trace(tmp_path / "t.json", rename)
    assert main(["analyze", str(trace), "--range", name, "--out", str(tmp_path / "o")]) == 0
    assert main(["diagnose", str(trace)]) == 0
    said = capsys.readouterr()
    assert "\x1b" not in said.out + said.err and "\x07" not in said.out + said.err
    assert "\\x1b]0;pwned" in said.err  # shown, as its escapes


OSC8 = "\x1b]8;;https://example.com\x1b\\click\x1b]8;;\x1b\\"  # a terminal hyperlink


def test_a_sets_range_never_reaches_the_terminal_raw(committed_set, tmp_path, capsys):
    """A summary's `range` was printed as it was on recheck: it could clear the screen."""
    root = tmp_path / "profiles"
    shutil.copytree(committed_set, root)
    edit_json(root / "cpu/naive/summary.json", range=f"attn_fwd{ESCAPES}{OSC8}" + "x" * 5000)
    assert main(["recheck", str(root), "--check"]) == 1
    said = capsys.readouterr()
    (line,) = said.err.strip().splitlines()
    assert "\x1b" not in said.out + said.err and "\x07" not in said.out + said.err
    assert "attn_fwd\\x1b]0;pwned" in line and "(5," in line and len(line) < 1200  # cut


def test_a_failing_examples_last_line_is_one_safe_line(tmp_path, monkeypatch, capsys):
    """`example` printed a failing script's last line raw (escapes, links) and whole (100 MB)."""
    script = tmp_path / "fails.py"
    script.write_text(f"import sys; sys.exit({ESCAPES + OSC8!r} + 'y' * 5_000_000)\n")
    spec = dataclasses.replace(specs.spec("naive"), example=(str(script),))
    monkeypatch.setattr(specs, "spec", lambda name: spec if name == "naive" else None)
    monkeypatch.setattr(cli, "CHECKOUT", tmp_path)
    argv = ["example", "naive", "--device", "cpu", "--out", str(tmp_path / "o"), *TINY]
    assert main(argv) == 1
    said = capsys.readouterr()
    (line,) = [line for line in said.err.splitlines() if line.startswith("error:")]
    assert "\x1b" not in said.out + said.err and "\x07" not in said.out + said.err
    assert "\\x1b]8;;https://example.com" in line and len(line) < 1500
    assert re.search(r"… \(5,000,0\d\d bytes\)$", line)


def test_a_stale_diff_is_removed_and_a_stray_file_named(committed_set, tmp_path, capsys):
    """A stray file in diff/ failed --check forever, and the write mode left it and exited 0."""
    root = tmp_path / "profiles"
    shutil.copytree(committed_set, root)
    stale = root / "cpu/diff/inplace__naive.json"  # a pair whose sides once both ran
    shutil.copy(root / "cpu/diff/naive__inplace.json", stale)
    assert main(["recheck", str(root), "--check"]) == 1
    assert main(["recheck", str(root)]) == 0 and not stale.exists()
    assert main(["recheck", str(root), "--check"]) == 0
    (root / "cpu/diff/notes.json").write_text("{}")  # not ours: named, left where it is
    capsys.readouterr()
    for check in ([], ["--check"]):
        assert main(["recheck", str(root), *check]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "diff/notes.json is no diff of two variants" in line
    assert (root / "cpu/diff/notes.json").read_text() == "{}"


def _drop(path: Path, *keys: str) -> None:
    path.write_text(
        json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k not in keys})
    )


def test_recheck_mends_a_summary_missing_its_numbers(committed_set, tmp_path, capsys):
    """KeyError: 'cpu_time_us' (--check) and KeyError: 'shape' (write mode) were tracebacks."""
    root = tmp_path / "profiles"
    shutil.copytree(committed_set, root)
    numbers = ("cpu_time_us", "ops_per_forward", "forwards", "range", "claims", "kernels", "ops")
    _drop(root / "cpu/naive/summary.json", *numbers)
    assert main(["recheck", str(root), "--check"]) == 1
    assert "naive/summary.json" in capsys.readouterr().err.replace("\n", "")
    assert main(["recheck", str(root)]) == 0
    assert main(["recheck", str(root), "--check"]) == 0
    _drop(root / "cpu/naive/summary.json", "shape")  # what ran: no trace says it again
    capsys.readouterr()
    for check in ([], ["--check"]):
        assert main(["recheck", str(root), *check]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "naive/summary.json has no shape" in line


@pytest.mark.parametrize(
    "flag", [["--batch", "1000000000"], ["--seq-k", "99999999999999999999"]], ids=["batch", "seq-k"]
)
def test_a_shape_that_cannot_fit_is_one_line_before_anything_runs(tmp_path, flag, capsys):
    """--batch 100000 was killed by the kernel with no message; a huge --seq-k printed C++."""
    argv = ["run", "--device", "cpu", "--variants", "naive", "--out", str(tmp_path), *flag]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the shape") and "GiB free" in line
    assert not (tmp_path / "cpu").exists()


def test_an_example_whose_shape_cannot_fit_is_one_line_before_it_runs(
    tmp_path, monkeypatch, capsys
):
    """`example naive --batch 100000 --seq 64` grew to 24 GB until the kernel killed it: `run`
    checked the shape, `example` did not. The memory free is made small, not the shape large."""
    monkeypatch.setattr(config_module, "available_bytes", lambda device: 2**16)
    argv = ["example", "naive", "--device", "cpu", "--out", str(tmp_path), *TINY]
    assert main([*argv, "--batch", "64"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the shape 64 x 2 x 32 x 32 x 16 (float32) needs")
    assert not (tmp_path / hardware_slug("cpu")).exists()


# --- the installed command and each subcommand's --help ------------------------------------------

COMMANDS = ("run", "example", "analyze", "diff", "diagnose", "recheck")


def test_the_console_command_is_this_main():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"attn-profile": "attn.profiling.cli:main"}
    assert set(COMMANDS) == set(parser()._subparsers._group_actions[0].choices)


def test_help_names_the_command_as_it_was_called(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/attn-profile", "diff", "--help"])
    with pytest.raises(SystemExit) as exit_:
        main()  # as the console script calls it: no arguments
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: attn-profile diff ")


def help_examples(command: str, capsys) -> list[list[str]]:
    """The argv of each example a subcommand's --help gives (the lines that start with its prog)."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    prog = f"python -m attn.profiling {command} "
    lines = capsys.readouterr().out.splitlines()
    return [
        shlex.split(line.strip()[len(prog) :]) for line in lines if line.startswith(f"  {prog}")
    ]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """The files the examples name: two runs of the examples (runs/), a baseline, a folder of
    ranks (job-traces/), the committed set (profiles/) and a copy of it (before/)."""
    committed = CPU_SET
    for name in ("naive", "inplace"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        shutil.copy(committed / name / "trace.json.gz", tmp_path / "runs" / name)
    shutil.copytree(committed / "inplace", tmp_path / "baseline" / "inplace")
    write_ring(tmp_path / "job-traces")  # a folder of rank traces, as the ring example writes
    for root in ("profiles", "before"):
        shutil.copytree(committed, tmp_path / root / "cpu-amd-epyc")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_example_runs(command, workspace, capsys):
    examples = help_examples(command, capsys)
    assert examples, f"{command} --help gives no example"
    for argv in examples:
        assert main([command, *argv]) == 0, f"{command} {shlex.join(argv)}: {capsys.readouterr()}"


def test_analyze_writes_a_folder_of_ranks_as_one_variant(tmp_path, capsys):
    """A folder given to analyze: every rank analysed into OUT/<folder>/rank<r>/, then the summary
    across the ranks, with the variant's claims when --variant names one."""
    write_ring(tmp_path / "ring_contiguous")
    argv = ["analyze", str(tmp_path / "ring_contiguous"), "--variant", "ring_contiguous"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    folder = tmp_path / "out" / "ring_contiguous"
    assert sorted(p.name for p in folder.iterdir()) == [
        "rank0",
        "rank1",
        "ranks.svg",
        "summary.json",
    ]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["straggler"] == 1 and [r["blocks"] for r in summary["ranks"]] == [1, 2]
    verdicts = {c["key"]: c["holds"] for c in summary["claims"]}
    assert verdicts.pop("send-is-one-kv-block") is None  # a bare trace holds no shape to size by
    assert verdicts and all(verdicts.values())
    out = " ".join(capsys.readouterr().err.split())  # the console is stderr's
    assert "ring_contiguous: 3 range(s) named attn_fwd" in out and "holds: Every rank sends" in out


def test_diagnose_a_folder_of_ranks_as_json(tmp_path, capsys):
    write_ring(tmp_path / "job")
    assert main(["diagnose", str(tmp_path / "job"), "--json", str(tmp_path / "d.json")]) == 0
    result = json.loads((tmp_path / "d.json").read_text())
    assert [r["rank"] for r in result["ranks"]] == [0, 1] and result["imbalance"]["straggler"] == 1
    assert result["ranks"][1]["diagnosis"]["attention"] == []  # no product-softmax-product here
    assert "Straggler: rank 1." in capsys.readouterr().out
    assert (
        main(["diagnose", str(tmp_path / "job"), "--json", str(tmp_path / "job" / "d.json")]) == 1
    )


def test_diagnose_and_analyze_refuse_a_rank_without_the_others_range_in_one_line(tmp_path, capsys):
    """A rank with no attn_fwd was compared over its whole trace: both commands name it in one
    line (exit 1, as for any trace refused), and analyze writes nothing."""
    job = write_ring(tmp_path / "job")
    trace = json.loads(gzip.decompress((job / "rank1/trace.json.gz").read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "attn_fwd"]
    (job / "rank1/trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    assert main(["diagnose", str(job)]) == 1
    assert main(["analyze", str(job), "--out", str(tmp_path / "set")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    diagnosed, analysed = [ln for ln in lines if ln.startswith("error:")]
    assert diagnosed.startswith("error: rank 1 (rank1/trace.json.gz) has no attn_fwd range")
    # analyze refuses the rank as it analyses it, as it would the trace alone: naming it
    assert analysed.startswith("error: rank1/trace.json.gz: ") and "no 'attn_fwd'" in analysed
    assert not (tmp_path / "set" / "job").exists()


def test_a_stop_swallowed_in_a_weakref_callback_is_taken_up_at_the_next_check(monkeypatch, capsys):
    """SIGTERM's KeyboardInterrupt raised inside a weakref's callback (a garbage collection) is
    ignored by Python, which printed it as a traceback and ran on: now it prints nothing, and the
    run's next check stops it."""
    import signal
    import weakref

    monkeypatch.setattr(sys, "unraisablehook", cli._unraisable)
    cli._stop_asked.clear()

    class Owner:
        pass

    owner = Owner()
    ref = weakref.ref(owner, lambda _: cli._stop(signal.SIGTERM, None))  # noqa: F841
    try:
        del owner  # the callback runs here, and its KeyboardInterrupt is swallowed
        assert "Traceback" not in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):
            cli.stop_if_asked()
    finally:
        cli._stop_asked.clear()
    cli.stop_if_asked()  # no stop asked: nothing happens


@pytest.mark.parametrize("command", ["diagnose", "diff"])
def test_diagnose_and_diff_print_160_columns_into_a_pipe(command, monkeypatch, capsys):
    """Into a pipe or a log both printed rich's 80 columns: "implementati", "shar", the where and
    shapes columns gone. Now 160, as the README says and every other command prints."""
    monkeypatch.delenv("COLUMNS", raising=False)
    naive, inplace = CPU_SET / "naive", CPU_SET / "inplace"
    argv = [str(naive / "trace.json.gz")] if command == "diagnose" else [str(naive), str(inplace)]
    assert main([command, *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 80 < max(map(len, lines)) <= 160
    if command == "diagnose":
        assert any("implementation" in x and "shapes" in x and "where" in x for x in lines)
    assert "COLUMNS" not in os.environ  # diff's width is set for its own run only
