"""Shared files and folders under concurrent, failing and killed runs."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from attn.profiling.environment import hardware_slug
from attn.traces.common import artifacts
from attn.traces.common.atomic import (
    RefusedOutput,
    atomic_folder,
    check_output,
    remove_stale_scratch,
    replace_file,
    write_json,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "32", "--head-dim", "16"]


def dead_pid() -> int:
    """The pid of a process that has ended."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_concurrent_writers_of_one_file_never_leave_half_a_file(tmp_path):
    target = tmp_path / "overview.json"
    errors = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                write_json(target, {"writer": n, "i": i, "pad": "x" * 5000})
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_text())["i"] == 39
    assert [p.name for p in tmp_path.iterdir()] == ["overview.json"]  # no scratch left


def test_a_failed_write_leaves_the_old_file(tmp_path):
    target = replace_file(tmp_path / "a.txt", lambda p: p.write_text("old"))

    def broken(p: Path) -> None:
        p.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        replace_file(target, broken)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_scratch_of_a_killed_run_is_removed_by_the_next(tmp_path):
    (tmp_path / "naive").mkdir()
    (tmp_path / "naive" / "summary.json").write_text("{}")
    pid = dead_pid()
    stale = tmp_path / f".inplace.{pid}.attn-scratch-abc123"
    stale.mkdir()
    (stale / "summary.json").write_text("half")
    mine = tmp_path / f".sdpa.{os.getpid()}.attn-scratch-xyz"  # a live run's is left alone
    mine.mkdir()
    assert remove_stale_scratch(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["naive", mine.name])
    assert [p.name for p in artifacts.variant_dirs(tmp_path)] == [
        "naive"
    ]  # scratch is never a variant


@pytest.mark.parametrize("name", [".naive.{pid}.x", ".naive.{pid}.old4242", ".a.{pid}.b.c"])
def test_a_users_folder_named_like_scratch_is_kept(tmp_path, name):
    """Only names these writers made are scratch: a user's `.naive.999999.x` was deleted."""
    kept = tmp_path / name.format(pid=dead_pid())
    (kept / "naive").mkdir(parents=True)
    assert remove_stale_scratch(tmp_path) == []
    with atomic_folder(tmp_path / "naive") as out:
        (out / "summary.json").write_text("{}")
    assert (kept / "naive").is_dir() and not (tmp_path / "naive" / "naive").exists()


def test_killed_between_the_two_renames_the_old_set_comes_back(tmp_path):
    """The swap moved the old folder aside and died before moving the new one in."""
    pid = dead_pid()
    aside = tmp_path / f".naive.{pid}.attn-scratch-old-4242"
    (aside / "naive").mkdir(parents=True)
    (aside / "naive" / "summary.json").write_text('{"variant": "naive"}')
    with atomic_folder(tmp_path / "other") as out:
        (out / "x").write_text("x")
    assert json.loads((tmp_path / "naive" / "summary.json").read_text())["variant"] == "naive"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["naive", "other"]


def test_an_interrupted_folder_write_keeps_the_previous_one(tmp_path):
    with atomic_folder(tmp_path / "naive") as out:
        (out / "summary.json").write_text("first")
    with pytest.raises(KeyboardInterrupt), atomic_folder(tmp_path / "naive") as out:
        (out / "summary.json").write_text("second, half")
        raise KeyboardInterrupt
    assert (tmp_path / "naive" / "summary.json").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["naive"]


def run_cli(out: Path, *variants: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "attn.profiling",
        "run",
        "--out",
        str(out),
        *TINY,
        "--no-screenshot",
        "--variants",
        *variants,
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_two_runs_into_one_folder_end_with_one_consistent_set(tmp_path):
    first, second = run_cli(tmp_path, "naive", "inplace"), run_cli(tmp_path, "inplace", "naive")
    for proc in (first, second):
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    cpu = tmp_path / hardware_slug("cpu")
    manifest = json.loads((cpu / "index.json").read_text())
    assert set(manifest["variants"]) == {"naive", "inplace"}
    assert not [p for p in cpu.iterdir() if p.name.startswith(".")]
    import xml.etree.ElementTree as ElementTree

    ElementTree.parse(cpu / "overview.svg")  # whole, valid XML


@pytest.mark.slow
def test_sigterm_ends_a_run_without_a_traceback_and_leaves_no_scratch(tmp_path):
    proc = run_cli(tmp_path, "naive", "inplace", "sdpa_math", "sdpa_flash")
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob(f"{hardware_slug('cpu')}/.*")) and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err
    cpu = tmp_path / hardware_slug("cpu")
    assert not cpu.exists() or not [p for p in cpu.iterdir() if p.name.startswith(".")]


def test_files_and_folders_follow_the_umask(tmp_path):
    """tempfile makes scratch private (0600, 0700); what is published must be readable as any
    file the user writes is."""
    old = os.umask(0o022)
    try:
        with atomic_folder(tmp_path / "set") as out:
            (out / "a.txt").write_text("x")
        write_json(tmp_path / "b.json", {})
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"set": 0o755, "b.json": 0o644}


def test_two_writers_swapping_one_folder_never_fail_nor_leave_it_missing(tmp_path):
    dest, errors, missing, done = tmp_path / "set", [], [], threading.Event()

    def writer(tag: str) -> None:
        for i in range(150):
            try:
                with atomic_folder(dest) as out:
                    (out / "summary.json").write_text(json.dumps({"by": tag, "i": i}))
            except OSError as e:
                errors.append(e)

    def reader() -> None:
        while not done.is_set():
            if not (dest / "summary.json").exists():
                missing.append(1)

    with atomic_folder(dest) as out:
        (out / "summary.json").write_text("{}")
    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    watcher = threading.Thread(target=reader)
    for t in [watcher, *threads]:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert (errors, len(missing)) == ([], 0)
    assert [p.name for p in tmp_path.iterdir()] == ["set"]  # no scratch left


def test_an_output_under_a_file_is_refused_before_any_work(tmp_path):
    """Checked first, said in one line: the work is not lost to a crash at the end."""
    (tmp_path / "notes").write_text("x")
    with pytest.raises(RefusedOutput, match="notes is a file, not a folder"):
        check_output(tmp_path / "notes" / "set" / "timing.json")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_an_output_in_a_read_only_folder_is_refused_before_any_work(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir(mode=0o555)
    with pytest.raises(RefusedOutput, match="set is not writable"):
        check_output(folder / "timing.json")
