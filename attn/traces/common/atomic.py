"""Writes that a reader, a crash or a second run never sees half done.

Files are written under a unique scratch name and renamed over the target. A folder is built as a
scratch folder `.<name>.<pid>.attn-scratch-<random>` beside its target and swapped in whole;
scratch left by a run that was killed is removed by the next run (its process is gone). The tag
keeps a user's own `.<name>.<number>.<x>` out of that: only what these writers named is removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

SCRATCH = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.attn-scratch-(?P<old>old-)?.*", re.S)


def scratch_prefix(name: str, old: bool = False) -> str:
    """The start of a scratch name for `name` of this process (`remove_stale_scratch` knows it)."""
    return f".{name}.{os.getpid()}.attn-scratch-{'old-' if old else ''}"


class RefusedOutput(ValueError):
    """An output path that would replace an input or something that is not a plain file."""


def check_output(path: Path, inputs: tuple[Path, ...] = ()) -> Path:
    """`path`, if a command may write a file there: not one of its inputs nor in an input folder,
    and absent or a regular file (a device, a pipe or a folder is never replaced by a file).
    RefusedOutput else."""
    path = Path(path)
    for given in map(Path, inputs):
        if (
            path.resolve() == given.resolve()
            or (given.is_dir() and given.resolve() in path.resolve().parents)
            or (path.exists() and given.exists() and os.path.samefile(path, given))
        ):
            raise RefusedOutput(f"{path} is an input of this command: give another output file")
    if path.is_symlink() or (path.exists() and not stat.S_ISREG(path.stat().st_mode)):
        raise RefusedOutput(f"{path} is not a plain file: give a file name to write")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())  # rest: made
    if not folder.is_dir():
        raise RefusedOutput(f"{path} cannot be written: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RefusedOutput(f"{path} cannot be written: {folder} is not writable")
    return path


def replace_file(path: Path, write: Callable[[Path], None]) -> Path:
    """Call `write` on a scratch file of its own beside `path`, then rename it over `path`.

    Each call has a unique scratch name, so concurrent writers never share one; the last rename
    wins and a reader sees one whole file or the other.
    """
    replace_files({path: write})
    return Path(path)


def replace_files(writes: dict[Path, Callable[[Path], None]]) -> None:
    """replace_file for several files that go together (a figure's rows and its drawing): each is
    checked, then each written to scratch, and only when all are written is any renamed over its
    target, so a failure in one leaves every target as it was."""
    paths = [check_output(path) for path in writes]
    scratch: list[Path] = []
    try:
        for path, write in zip(paths, writes.values(), strict=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                prefix=scratch_prefix(path.stem), suffix=path.suffix, dir=path.parent
            )
            os.close(fd)
            scratch.append(with_umask(Path(name)))
            write(scratch[-1])
        for tmp, path in zip(scratch, paths, strict=True):
            os.replace(tmp, path)
    finally:
        for tmp in scratch:
            tmp.unlink(missing_ok=True)


def with_umask(path: Path) -> Path:
    """The scratch file or folder given the mode a plain open() or mkdir() would have given it
    (tempfile makes them private, 0600 and 0700, whatever the user's umask)."""
    umask = os.umask(0o022)
    os.umask(umask)
    path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
    return path


_libc = ctypes.CDLL(None, use_errno=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE), so a reader never finds
    neither; False where the system cannot, and the caller renames twice."""
    renameat2 = getattr(_libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_cwd, exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One writer at a time swaps folders in `folder` (an advisory lock on the folder itself)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_json(path: Path, data) -> Path:
    """Write JSON atomically."""
    return replace_file(path, lambda p: p.write_text(json.dumps(data, indent=2) + "\n"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_scratch(folder: Path) -> list[Path]:
    """Remove scratch files and folders (`.<name>.<pid>.attn-scratch-<random>`) whose process
    has ended."""
    removed = []
    if not Path(folder).is_dir():
        return removed
    for p in Path(folder).iterdir():
        m = SCRATCH.fullmatch(p.name)
        if m is None or _alive(int(m["pid"])):
            continue
        if p.is_dir() and not p.is_symlink():
            if m["old"]:  # killed mid-swap: the previous set goes back
                for kept in p.iterdir():
                    if not (p.parent / kept.name).exists():
                        kept.rename(p.parent / kept.name)
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


@contextlib.contextmanager
def atomic_folder(dest: Path) -> Iterator[Path]:
    """Yield a scratch folder beside `dest`; on success it replaces `dest`, on failure it vanishes.

    The swap is one exchange of the two names where Linux offers it; elsewhere two renames (dest ->
    old, scratch -> dest): killed between them, the previous set is in the `.old` scratch folder,
    which the next run puts back if dest is missing.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(dest.parent)
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(dest.name), dir=dest.parent))
    try:
        yield with_umask(scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    _swap_in(scratch, dest)


@contextlib.contextmanager
def staged_set(dest: Path) -> Iterator[Path]:
    """Yield a scratch root beside the set `dest` holding a copy of it under its own name
    (`root/<dest.name>`), for a run to write into as it would into dest's parent; when the run
    ends whole, the copy replaces dest in one swap; interrupted or failed, dest is as it was."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(dest.parent)  # a killed run's root: its pid is gone
    root = with_umask(Path(tempfile.mkdtemp(prefix=scratch_prefix(dest.name), dir=dest.parent)))
    try:
        if dest.is_dir():
            shutil.copytree(dest, root / dest.name, symlinks=True)
        yield root
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        if (root / dest.name).is_dir():
            _swap_in(root / dest.name, dest)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _swap_in(scratch: Path, dest: Path) -> None:
    """Put the folder scratch at dest, the previous dest removed; never neither on disk."""
    with _locked(dest.parent):  # two runs writing one set: each swap whole, one after the other
        if dest.exists() and _exchange(scratch, dest):
            shutil.rmtree(scratch, ignore_errors=True)  # the previous set, now under scratch's name
            return
        old = Path(tempfile.mkdtemp(prefix=scratch_prefix(dest.name, old=True), dir=dest.parent))
        try:
            if dest.exists():
                dest.rename(old / dest.name)
            scratch.rename(dest)
        except BaseException:
            if not dest.exists() and (old / dest.name).exists():
                (old / dest.name).rename(dest)  # put the previous set back
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(old, ignore_errors=True)


def write_rows(folder: Path, stem: str, rows: list[dict], draw: Callable[[Path], None]) -> Path:
    """Write `<stem>.json` (the rows) and `<stem>.svg` (drawn by `draw`) into folder, the pair
    whole or neither (a folder at benchmark.svg left benchmark.json new beside the old picture)."""
    folder = Path(folder)
    replace_files({
        folder / f"{stem}.json": lambda p: p.write_text(json.dumps(rows, indent=1) + "\n"),
        folder / f"{stem}.svg": draw,
    })  # fmt: skip
    return folder
