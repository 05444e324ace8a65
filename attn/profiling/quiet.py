"""Keep torch.profiler's start/stop log lines out of the reader's terminal and notebook."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

# Kineto (torch 2.13) writes "USDT: ... SyncActivityProfilerHandler.cpp:52] profiler_start" (and
# profiler_stop) to the process's stderr on every start and stop. They are not errors.
CHATTER = "SyncActivityProfilerHandler"


@contextlib.contextmanager
def without_profiler_chatter() -> Iterator[None]:
    """Collect what C++ writes to file descriptor 2 meanwhile; pass on every line but the chatter."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if CHATTER not in line)
            if kept:
                sys.stderr.write(kept)
