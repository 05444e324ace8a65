"""Run an example script as a reader would, `python script.py flags...`, in a process of its own.

On a CPU most of an example's run is imports: torch (2 s on two cores) and, when the profiler starts,
Inductor (another 2 s: the profiler asks whether Inductor's CUDA graphs are on), against about 1 s
of work. So on Linux a CPU run starts its scripts from a fork server: a process that imported both
once and forks a copy of itself for each script. Each script still runs in a process of its own, as
`__main__`, with its folder first on `sys.path`, its own output and its own exit status.

On a GPU each script starts from a fresh interpreter: a server whose imports had touched CUDA would
leave every process forked from it unable to use the GPU.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from attn.profiling.flags import ProfilingError
from attn.traces.common.terminal import one_line

PRELOAD = ("torch", "torch._inductor")
BLOCK = 64 * 1024  # a log is read back from its end this much at a time
LAST_LINE_CHARS = 300  # of a failing script's last line: its message, in an error line of ours
_server: subprocess.Popen | None = None


def run_script(
    argv: Sequence[str], log: Path, *, preloaded: bool, env: Mapping[str, str] | None = None
) -> int:
    """Run `python *argv` with its stdout and stderr into `log`; its exit status (negative: the
    signal that ended it). `preloaded`: start it from the fork server (on Linux). `env`: variables
    set for the script on top of this process's; a script given some starts fresh, since torch
    reads many at import (a forked one would keep the server's).

    The script runs in a process group of its own (the fork server's), so that Ctrl-C or SIGTERM
    here ends it and every process it started (a grandchild outlived them), and the terminal's
    Ctrl-C reaches this process only: the server never prints a traceback of its own.
    """
    if env or not preloaded or sys.platform != "linux":
        with open(log, "wb") as out:
            child = subprocess.Popen(
                [sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent,
                start_new_session=True,
            )  # fmt: skip
            try:
                return child.wait()
            except BaseException:
                _end_group(child)
                raise
    server = _started()
    try:
        # The caller's folder too: the server was started from whatever folder was current then.
        server.stdin.write(json.dumps([list(argv), str(log), os.getcwd()]) + "\n")
        server.stdin.flush()
        status = server.stdout.readline()
        if not status:
            raise ProfilingError(f"the fork server ended (status {server.poll()}) before {argv[0]}")
        return int(status)
    except BaseException:  # Ctrl-C or SIGTERM here too: the server ends, and the script with it
        _stop_server()
        raise


def _started() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-c", "from attn.profiling.launch import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_die_with_parent,
            start_new_session=True,
        )  # fmt: skip
    return _server


def _stop_server() -> None:
    global _server
    if _server is not None:
        _end_group(_server)
        _server = None


def _end_group(leader: subprocess.Popen) -> None:
    """Kill a process and every process of its group (its script, what that script started)."""
    try:
        os.killpg(leader.pid, signal.SIGKILL)
    except ProcessLookupError:  # gone already, and its group with it
        pass
    leader.wait()


def serve() -> None:
    """The fork server: import PRELOAD once, then for each request line (JSON `[argv, log, cwd]`)
    fork a process that runs the script in `cwd`, and answer with its exit status. Ends when its
    input does (the caller ended), and with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's: no traceback here
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # the script imports what it needs, at its own cost
            pass
    for line in sys.stdin:
        argv, log, cwd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh python
            _exit(_as_main(argv, log, cwd))
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


def _exit(status: int) -> None:
    """End the forked process with its status; a negative one by that signal, as python ends
    on an unhandled KeyboardInterrupt (killed by SIGINT, so a shell sees 130)."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


def _as_main(argv: list[str], log: str, cwd: str) -> int:
    """In the forked process: what `python argv...` run in `cwd` does, down to its exit status and
    atexit handlers (Inductor's compile workers end in one)."""
    _die_with_parent()
    try:
        os.chdir(cwd)
    except OSError:  # the caller's folder is gone: its relative paths name nothing
        return 1
    inputs = os.open(os.devnull, os.O_RDONLY)  # not the server's requests
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((inputs, 0), (out, 1), (out, 2)):  # torch's C++ output lands there too
        os.dup2(fd, target)
    os.close(inputs), os.close(out)
    sys.argv = list(argv)
    sys.path[0] = str(Path(argv[0]).resolve().parent)
    try:
        runpy.run_path(argv[0], run_name="__main__")
        status = 0
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException as e:
        traceback.print_exc()
        status = -signal.SIGINT if isinstance(e, KeyboardInterrupt) else 1
    _join_threads()  # what python does as the script returns, before atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def _join_threads() -> None:
    """Wait for every thread that is not a daemon, as python does before it exits (one still
    writing when the script returned was killed mid-write). First, as python's exit does, tell
    concurrent.futures' thread pools to stop: Inductor's compile workers are one, and their idle
    threads, joined without it, wait forever."""
    pools = sys.modules.get("concurrent.futures.thread")
    if pools is not None:
        pools._python_exit()  # the exit callback concurrent.futures registers with threading
    me = threading.current_thread()
    while alive := [t for t in threading.enumerate() if t is not me and not t.daemon]:
        for thread in alive:
            thread.join()


def _exit_status(code: object) -> int:
    """SystemExit's code as the interpreter turns it into a status: None is 0, a message 1, a
    number kept to a byte as the system keeps it (-1 is 255)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _die_with_parent() -> None:
    """In the child: end it when its parent ends, even by SIGKILL (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "prctl"):
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def last_line(log: Path) -> str:
    """The last line a script wrote that is not blank, as a terminal may show it: read from the
    log's end, its start only (a line of 100 MB is neither read whole nor printed whole)."""
    with open(log, "rb") as f:
        start, end = _last_line_span(f)
        f.seek(start)
        head = f.read(min(end - start, 4 * LAST_LINE_CHARS)).decode(errors="replace").strip()
    if not head:
        return "no output"
    if end - start <= 4 * LAST_LINE_CHARS:
        return one_line(head, LAST_LINE_CHARS)
    return one_line(head[:LAST_LINE_CHARS]) + f"… ({end - start:,} bytes)"


def _last_line_span(f) -> tuple[int, int]:
    """Where the last line that is not blank starts and ends, found a block at a time."""
    end = f.seek(0, os.SEEK_END)
    while end > 0:  # back past the blank space at the end
        f.seek(max(0, end - BLOCK))
        block = f.read(end - max(0, end - BLOCK))
        kept = len(block.rstrip())
        end -= len(block) - kept
        if kept:
            break
    start = end
    while start > 0:  # back to the newline before it
        f.seek(max(0, start - BLOCK))
        block = f.read(start - max(0, start - BLOCK))
        newline = block.rfind(b"\n")
        start -= len(block) - newline - 1 if newline >= 0 else len(block)
        if newline >= 0:
            break
    return start, end
