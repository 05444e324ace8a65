"""An example started from the fork server behaves as `python script.py` does."""

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attn.profiling.launch import last_line, run_script

ROOT = Path(__file__).resolve().parents[1]

MODES = [
    pytest.param(False, id="fresh interpreter"),
    pytest.param(
        True,
        id="fork server",
        marks=pytest.mark.skipif(
            sys.platform != "linux", reason="no fork server off Linux: examples start fresh there"
        ),
    ),
]


@pytest.mark.parametrize("preloaded", MODES)
def test_a_script_runs_as_main_with_its_flags_and_its_folder_on_the_path(tmp_path, preloaded):
    (tmp_path / "sibling.py").write_text("WHO = 'sibling'\n")
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\nimport sibling\n"
        "print(__name__, sys.argv[1:], sibling.WHO)\n"
        "os.write(2, b'written by C\\n')\n"  # below Python's streams, as torch's C++ writes
    )
    log = tmp_path / "log.txt"
    assert run_script([str(script), "--seq", "64"], log, preloaded=preloaded) == 0
    lines = log.read_text().splitlines()  # stdout and stderr, in whichever order they flushed
    assert sorted(lines) == ["__main__ ['--seq', '64'] sibling", "written by C"]


@pytest.mark.parametrize("preloaded", MODES)
@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ("raise SystemExit(3)", 3, None),
        ("raise ValueError('bad head_dim')", 1, "ValueError: bad head_dim"),
        ("import sys; sys.exit('no GPU here')", 1, "no GPU here"),
    ],
    ids=["exit status", "exception", "exit message"],
)
def test_a_failing_script_gives_its_status_and_says_why(tmp_path, preloaded, body, status, said):
    script = tmp_path / "fails.py"
    script.write_text(body + "\n")
    log = tmp_path / "log.txt"
    assert run_script([str(script)], log, preloaded=preloaded) == status
    if said:
        assert said in log.read_text().strip().splitlines()[-1]


@pytest.mark.parametrize("preloaded", MODES)
def test_a_script_given_variables_sees_them_and_starts_fresh(tmp_path, monkeypatch, preloaded):
    """Torch reads many variables as it is imported: a forked script would keep the server's."""
    monkeypatch.setenv("ATTN_KEPT", "from the caller")
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\nprint(os.environ['ATTN_GIVEN'], os.environ['ATTN_KEPT'], "
        "'torch' in sys.modules)\n"
    )
    log = tmp_path / "log.txt"
    env = {"ATTN_GIVEN": "given"}
    assert run_script([str(script)], log, preloaded=preloaded, env=env) == 0
    assert log.read_text().strip() == "given from the caller False"


@pytest.mark.skipif(sys.platform != "linux", reason="no fork server off Linux")
def test_the_fork_server_has_torch_imported_before_the_script_starts(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint('torch' in sys.modules)\n")
    log = tmp_path / "log.txt"
    assert run_script([str(script)], log, preloaded=True) == 0
    assert log.read_text().strip() == "True"


@pytest.mark.parametrize("preloaded", MODES)
def test_a_script_runs_in_the_callers_folder_even_after_it_changed(
    tmp_path, monkeypatch, preloaded
):
    """The fork server started in one folder ran a later script there: its relative paths
    named files in a folder the caller had left."""
    script = tmp_path / "script.py"
    script.write_text("import os\nprint(os.getcwd())\n")
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        assert run_script([str(script)], Path("log.txt"), preloaded=preloaded) == 0
        assert (tmp_path / folder / "log.txt").read_text().strip() == str(tmp_path / folder)


def test_the_last_line_is_read_from_the_end_and_cut(tmp_path):
    """A failing script's last line was read with the whole log, then printed whole."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"first\n" + b"z" * 200_000 + b"\x1b[2J end\n\n  \n")  # past three blocks
    line = last_line(log)
    assert line.startswith("z" * 300) and line.endswith("… (200,008 bytes)")
    log.write_bytes(b"one\ntwo \x1b]0;t\x07\n")
    assert last_line(log) == "two \\x1b]0;t\\x07"
    log.write_bytes(b" \n\n")
    assert last_line(log) == "no output"


@pytest.mark.parametrize("preloaded", MODES)
def test_a_thread_still_running_when_the_script_returns_is_waited_for(tmp_path, preloaded):
    """`python script.py` waits for its threads that are not daemons; the fork server killed them."""
    script = tmp_path / "script.py"
    script.write_text(
        "import pathlib, sys, threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    pathlib.Path(sys.argv[1]).write_text('written')\n"
        "threading.Thread(target=late).start()\n"
    )
    done = tmp_path / "done.txt"
    assert run_script([str(script), str(done)], tmp_path / "log.txt", preloaded=preloaded) == 0
    assert done.read_text() == "written"


@pytest.mark.parametrize("preloaded", MODES)
def test_a_thread_pool_left_open_ends_as_python_ends_it(tmp_path, preloaded):
    """Inductor's compile workers are a ThreadPoolExecutor left open: python tells its idle
    threads to stop as it exits; joined without that, they waited forever (profile_examples hung
    on the compiled example)."""
    script = tmp_path / "script.py"
    script.write_text(
        "import pathlib, sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "pool = ThreadPoolExecutor(2)\n"
        "pathlib.Path(sys.argv[1]).write_text(str(pool.submit(lambda: 41 + 1).result()))\n"
    )
    done = tmp_path / "done.txt"
    assert run_script([str(script), str(done)], tmp_path / "log.txt", preloaded=preloaded) == 0
    assert done.read_text() == "42"


@pytest.mark.parametrize("preloaded", MODES)
def test_the_scripts_own_keyboard_interrupt_ends_it_as_python_does(tmp_path, preloaded):
    """Python prints the traceback and ends by SIGINT (a shell sees 130); the server said 1."""
    script = tmp_path / "script.py"
    script.write_text("raise KeyboardInterrupt\n")
    log = tmp_path / "log.txt"
    assert run_script([str(script)], log, preloaded=preloaded) == -signal.SIGINT
    assert log.read_text().strip().splitlines()[-1] == "KeyboardInterrupt"


# A caller of run_script that ends on SIGTERM as `python -m attn.profiling example` does.
CALLER = """
import signal, sys
from pathlib import Path
from attn.profiling.launch import run_script
def stop(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, stop)
try:
    run_script(sys.argv[1:3], Path(sys.argv[3]), preloaded=sys.argv[4] == "1")
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
"""
# A script that starts a process of its own, says that process's pid through a FIFO, and waits.
STARTS_A_CHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as fifo:
    fifo.write(str(child.pid))
time.sleep(600)
"""


def _started_with_a_grandchild(tmp_path, preloaded, **popen) -> tuple[subprocess.Popen, int]:
    """The caller, running the script; and the pid of the process the script started."""
    script, fifo = tmp_path / "script.py", tmp_path / "fifo"
    script.write_text(STARTS_A_CHILD)
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [str(script), str(fifo), str(tmp_path / "log.txt"), "1" if preloaded else "0"]
    # As a terminal's job: one started from a shell's background job inherits SIGINT ignored, and
    # python then sets no handler (Ctrl-C's test waited out its 60 s).
    default = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, *argv], env=env, stderr=subprocess.PIPE, text=True,
        preexec_fn=default, **popen,
    )  # fmt: skip
    with open(fifo) as said:  # opens once the script does: no polling
        return caller, int(said.read())


def _ends_within(pid: int, seconds: float) -> bool:
    with contextlib.suppress(ProcessLookupError):
        fd = os.pidfd_open(pid)
        try:
            return bool(select.select([fd], [], [], seconds)[0])  # readable: it has ended
        finally:
            os.close(fd)
    return True


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on a pidfd (Linux)")
@pytest.mark.parametrize("preloaded", MODES)
def test_sigterm_ends_what_the_script_started_too(tmp_path, preloaded):
    """A grandchild outlived SIGTERM to `example`: only the script was ended."""
    caller, grandchild = _started_with_a_grandchild(tmp_path, preloaded)
    caller.send_signal(signal.SIGTERM)
    assert caller.wait(timeout=60) == 0 and "interrupted" in caller.stderr.read()
    assert _ends_within(grandchild, 10)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on a pidfd (Linux)")
@pytest.mark.parametrize("preloaded", MODES)
def test_ctrl_c_prints_no_traceback_of_the_fork_server(tmp_path, preloaded):
    """Ctrl-C reaches every process of the terminal's group: the server printed a traceback."""
    caller, grandchild = _started_with_a_grandchild(tmp_path, preloaded, start_new_session=True)
    os.killpg(caller.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
    assert caller.wait(timeout=60) == 0
    said = caller.stderr.read()
    assert said.strip() == "interrupted", said
    assert _ends_within(grandchild, 10)
