"""One writer per output, and where a running job keeps its state.

* :class:`OutputLock`: an exclusive lock on a dataset folder, a run directory or an export target; a second
  writer is refused with :class:`LockHeldError`, one line naming the holder (pid, host, start time, command)
  and the lock file; :meth:`OutputLock.check_free` refuses a held folder without taking its lock;
* :func:`note_state` / :func:`noted_state` / :func:`noting_state`: where the running job keeps its state and
  how to continue it, for the one line an interrupted job prints (:func:`dandelion.cli.common.guard`).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["LockHeldError", "OutputLock", "note_state", "noted_state", "noting_state"]


class LockHeldError(FileExistsError):
    """Another process is writing the same output; the message names it, its lock file and what to do."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True


class OutputLock:
    """An exclusive lock on one output (a folder, or a file or store beside its lock), held by this process.

    The lock file (``<folder>/.dandelion.lock`` for :meth:`folder`, ``.<name>.lock`` beside the output for
    :meth:`beside`) holds JSON ``{pid, host, started, command}``. It is taken with ``os.open(O_CREAT)`` and an
    exclusive non-blocking ``fcntl.flock``, which the kernel drops when the process ends however it ends: a lock
    file left by a killed process is taken over, a lock held by a live process refuses the second writer.
    :meth:`release` (leaving the ``with`` block) deletes the file.

    Raises
    ------
    LockHeldError
        From :meth:`acquire`, when another process holds the lock; one line naming the output, the holder
        (pid, host, start time, command), whether that pid is alive on this host, and the lock file.
    """

    NAME = ".dandelion.lock"

    def __init__(self, lock_file, target, prog: str):
        self.path, self.target, self.prog = Path(lock_file), Path(target), str(prog)
        self.fd: int | None = None

    @classmethod
    def folder(cls, folder, prog: str) -> OutputLock:
        """The lock of a folder written by one job (a dataset folder, a run directory); the folder is created."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder / cls.NAME, folder, prog)

    @classmethod
    def beside(cls, target, prog: str) -> OutputLock:
        """The lock of a file or store written by one job, kept beside it (its folder is created)."""
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        return cls(target.with_name(f".{target.name}.lock"), target, prog)

    @classmethod
    def check_free(cls, folder, prog: str) -> None:
        """Refuse (:class:`LockHeldError`) a folder whose :meth:`folder` lock another process holds now;
        nothing is created (a lock file whose holder has ended is taken over and deleted)."""
        folder = Path(folder)
        if (folder / cls.NAME).is_file():
            lock = cls(folder / cls.NAME, folder, prog).acquire()
            lock.release()

    def holder(self) -> dict:
        """What the lock file says of its holder (empty when unreadable)."""
        try:
            data = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> OutputLock:
        """Take the lock (see the class). Returns self."""
        if self.fd is not None:
            return self
        for _ in range(10):  # another process may delete the file between our open and flock: open it again
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise  # flock not supported here (some network file systems): not a lock held by another process
                raise LockHeldError(self._held_message()) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        else:  # pragma: no cover - ten lost races in a row
            raise LockHeldError(f"{self.target} is being locked and unlocked by other processes: retry")
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join([self.prog, *sys.argv[1:]]),
        }
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def _held_message(self) -> str:
        h = self.holder()
        pid, host = h.get("pid"), h.get("host")
        here = host == socket.gethostname()
        alive = (
            "alive on this host"
            if here and isinstance(pid, int) and _pid_alive(pid)
            else "not running on this host"
            if here
            else "on another host"
        )
        return (
            f"{self.target} is being written by another process (pid {pid} on {host}, {alive}, started "
            f"{h.get('started')}: {h.get('command')}; lock {self.path}): wait for it to finish or stop it, "
            "then rerun"
        )

    def release(self) -> None:
        """Delete the lock file and drop the lock (nothing when not held)."""
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


_STATE: list = []


def note_state(describe: Callable[[], str] | str | None) -> None:
    """Say where the running job keeps its state and how to continue it: a string, or a function giving one
    when asked (``"state in DIR; rerun ... to continue"``); None forgets it. Read by :func:`noted_state`."""
    _STATE[:] = [] if describe is None else [describe]


def noted_state() -> str | None:
    """The text :func:`note_state` was given (a function's is computed now), or None."""
    if not _STATE:
        return None
    d = _STATE[0]
    return str(d() if callable(d) else d)


@contextlib.contextmanager
def noting_state(describe: Callable[[], str] | str):
    """:func:`note_state` for the duration of a ``with`` block. The previous note is restored when the block ends
    normally; when it raises (Ctrl-C among others) the note stays, for the handler up the stack to read."""
    saved = list(_STATE)
    note_state(describe)
    yield
    _STATE[:] = saved
