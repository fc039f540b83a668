"""A lock file that is removed when its holder releases it.

Conversion webhooks take one lock per API server and CRD (``install._conversion_lock``). Removing
an ``flock`` file races with a process that opened it a moment before, so the holder removes the
file while it still holds the lock, and whoever acquires checks that the name still leads to the
file it locked (else it starts over): one holder at a time, and no file left once nobody holds or
waits. A killed holder's file stays until the next holder releases that lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

_POLL = 0.05


class LockTimeout(Exception):
    """The lock stayed held by another process for the whole timeout."""


class RemovableLock:
    """An exclusive ``flock`` on ``path`` (created 0600); :meth:`release` removes the file."""

    def __init__(self, path: Path) -> None:
        self.lock_file = str(path)
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting up to ``timeout`` seconds; :class:`LockTimeout` after that."""
        deadline = time.monotonic() + timeout
        while self._fd is None:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise LockTimeout(self.lock_file) from None
                time.sleep(_POLL)
                continue
            if self._still_named(fd):
                self._fd = fd
            else:  # its last holder removed it after we opened it: lock the file the name leads to now
                os.close(fd)

    def _still_named(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.lock_file, follow_symlinks=False))
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the file, then give up the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_file)
        finally:
            os.close(fd)
