"""nbconvert's settings while the site is built (nox points JUPYTER_CONFIG_PATH here).

The notebook page runs its notebook in a kernel on this machine. Over TCP (Jupyter's default) the
kernel warns that anything on the host could listen in; over IPC its sockets are files in
Jupyter's runtime folder, which only this user can open, and it has nothing to warn about.
"""

import os

from jupyter_core.paths import jupyter_runtime_dir

c = get_config()  # noqa: F821 (traitlets provides it to a config file)
c.KernelManager.transport = "ipc"
os.makedirs(jupyter_runtime_dir(), exist_ok=True)
c.KernelManager.ip = os.path.join(jupyter_runtime_dir(), f"attention-profiled-{os.getpid()}")
