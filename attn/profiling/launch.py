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
import traceback
from collections.abc import Sequence
from pathlib import Path

from attn.profiling.flags import ProfilingError

PRELOAD = ("torch", "torch._inductor")
_server: subprocess.Popen | None = None


def run_script(argv: Sequence[str], log: Path, *, preloaded: bool) -> int:
    """Run `python *argv` with its stdout and stderr into `log`; its exit status (negative: the
    signal that ended it). `preloaded`: start it from the fork server (on Linux)."""
    if not preloaded or sys.platform != "linux":
        with open(log, "wb") as out:
            return subprocess.run(
                [sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            ).returncode  # fmt: skip
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
        )  # fmt: skip
    return _server


def _stop_server() -> None:
    global _server
    if _server is not None:
        _server.kill()
        _server.wait()
        _server = None


def serve() -> None:
    """The fork server: import PRELOAD once, then for each request line (JSON `[argv, log, cwd]`)
    fork a process that runs the script in `cwd`, and answer with its exit status. Ends when its
    input does (the caller ended), and with its parent."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # the script imports what it needs, at its own cost
            pass
    for line in sys.stdin:
        argv, log, cwd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_as_main(argv, log, cwd))
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


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
    except BaseException:
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def _exit_status(code: object) -> int:
    """SystemExit's code as the interpreter turns it into a status: None is 0, a message 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _die_with_parent() -> None:
    """In the child: end it when its parent ends, even by SIGKILL (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "prctl"):
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
