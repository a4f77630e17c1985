"""The disk under a job's outputs: free space before a write, one line when a write runs out of it or is refused, and
the temporary files of writers that died.

* :func:`check_free_space` refuses a write whose size estimate exceeds the free space of the target's file system
  (``shutil.disk_usage``), naming the path, the estimate and the free space;
* :func:`disk_error` turns an ``OSError`` of a write (``ENOSPC`` no space, ``EDQUOT`` quota, ``EFBIG`` file size limit,
  ``EROFS`` read-only, ``EACCES``/``EPERM`` refused; and h5py/netCDF's wrapped forms) into :class:`DiskFullError` or
  ``PermissionError`` with that line, or returns None for another error;
* :func:`remove_dead_temps` removes a folder's temporary files (``.<name>.<pid>.tmp``,
  :func:`dandelion.runtime.temp_path`) whose writer process is no longer alive, as a rerun of generation does under
  its lock.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import shutil
from pathlib import Path

__all__ = ["DiskFullError", "free_bytes", "check_free_space", "disk_error", "remove_dead_temps", "format_bytes"]

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_REFUSED = {errno.EROFS, errno.EACCES, errno.EPERM}
_WORDS_FULL = ("no space left", "disk quota", "file too large", "file size limit")
#: What torch's checkpoint writer says when a write fails (it drops the errno).
_WORDS_STREAM = ("iostream error", "unexpected pos", "file write failed")


class DiskFullError(OSError):
    """A write ran out of space (or over a size limit); the message names the path, the free space and the fix."""


def format_bytes(n: float) -> str:
    """``n`` bytes as ``1.2 GB`` / ``3.4 MB`` / ``12 kB`` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def _existing(path: Path) -> Path:
    path = Path(path).expanduser().absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path) -> int:
    """Free bytes of the file system holding ``path`` (or its nearest existing folder)."""
    return int(shutil.disk_usage(_existing(Path(path))).free)


def check_free_space(path, needed: float, what: str = "output") -> None:
    """Refuse to write about ``needed`` bytes at ``path`` when its file system has less free.

    Raises
    ------
    DiskFullError
        Naming ``what``, the path, the estimate and the free space.
    """
    free = free_bytes(path)
    if needed > free:
        raise DiskFullError(
            f"{what} {path} needs about {format_bytes(needed)} but its file system has {format_bytes(free)} free: "
            "free some space or choose another folder"
        )


def disk_error(err: BaseException, path, what: str = "output") -> OSError | None:
    """The one-line error for ``err`` raised while writing ``path``: :class:`DiskFullError` (no space, quota, size
    limit) or ``PermissionError`` (read-only or refused), each naming the path and the free space; None when ``err`` is
    neither (a bug or a damaged input)."""
    chain = []
    while isinstance(err, BaseException) and err not in chain:
        chain.append(err)
        err = err.__cause__ or err.__context__
    chain = [e for e in chain if isinstance(e, OSError | RuntimeError)]
    if not chain:
        return None
    code = next((e.errno for e in chain if getattr(e, "errno", None)), None)
    text = " ".join(" ".join(str(e).split()).lower() for e in chain)
    try:
        free_n = free_bytes(path)
        free = format_bytes(free_n)
    except OSError:
        free_n, free = None, "unknown"
    if free_n is not None and free_n < _NEARLY_FULL and ("hdf error" in text or "write failed" in text):
        code = errno.ENOSPC  # netCDF's "HDF error" drops the errno: a nearly full disk is the cause
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and any(w in text for w in _WORDS_STREAM):  # torch's zip writer: no errno
        return DiskFullError(
            f"{what} {path} could not be written: the file size limit (ulimit -f) is {format_bytes(limit)} "
            f"({free} free): raise the limit or choose another folder (the partial file was removed)"
        )
    if code in _FULL or any(w in text for w in _WORDS_FULL + _WORDS_STREAM):
        return DiskFullError(
            f"{what} {path}: the disk is full or over a size limit ({free} free): free some space or choose another "
            "folder (the partial file was removed; complete files are untouched)"
        )
    if code in _REFUSED or "read-only file system" in text or "permission denied" in text:
        return PermissionError(
            f"{what} {path} cannot be written (read-only or refused; {free} free): choose a writable folder"
        )
    return None


_NEARLY_FULL = 1_000_000  # bytes

_TEMP = re.compile(r"^\..+\.(\d+)\.tmp$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_dead_temps(folder) -> list[Path]:
    """Remove the temporary files and stores (``.<name>.<pid>.tmp``) in ``folder`` whose writer ``pid`` is not alive;
    returns what was removed. Files of live processes (a concurrent writer) stay."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for p in folder.iterdir():
        m = _TEMP.match(p.name)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed
