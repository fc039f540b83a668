"""The holder's side of the janitor (see :mod:`ktest.base.janitor`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from ktest.base import janitor
from ktest.base.process import spawn

_REAP_TIMEOUT = 5.0
"""Seconds to reap the janitor after SIGKILL (it ends at once; an unreaped one is a zombie only)."""

_fork_lock = threading.Lock()
_fork_hook_installed = False
# Write ends of janitor pipes held by this process. A child made by os.fork()
# (multiprocessing's default start method) would otherwise keep them open and
# delay the janitor's cleanup until that child exits too.
_pipe_fds: set[int] = set()


def _detach_pipes_after_fork() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in _pipe_fds:
            os.dup2(devnull, fd)  # the fd number stays valid; the pipe end is gone
    finally:
        os.close(devnull)
        _pipe_fds.clear()


def _track(fd: int) -> None:
    global _fork_hook_installed
    with _fork_lock:
        if not _fork_hook_installed:
            os.register_at_fork(after_in_child=_detach_pipes_after_fork)
            _fork_hook_installed = True
        _pipe_fds.add(fd)


def _untrack(fd: int) -> None:
    with _fork_lock:
        _pipe_fds.discard(fd)


class JanitorHandle:
    """A running janitor that cleans ``directory`` up if this process dies."""

    def __init__(self, directory: Path | None, *, keep_directory: bool = False) -> None:
        script = str(Path(janitor.__file__).resolve())
        # -I -S: no site-packages and no ktest import, so it starts in milliseconds.
        self._process = spawn(
            [sys.executable, "-I", "-S", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=Path("/"),
            bind_to_parent=False,  # it must outlive us: that is its job
        )
        assert self._process.stdin is not None
        self._stdin = self._process.stdin
        _track(self._stdin.fileno())
        if directory is not None:
            self._send(f"dir {directory}")
        if keep_directory:
            self._send("keep")

    def on_death(self, argv: Sequence[str]) -> None:
        """If this process dies, the janitor runs ``argv`` (to its end) before it removes the
        directory: a backend's clean-up rule, e.g. deleting the cluster this process holds."""
        if any("\t" in word or "\n" in word for word in argv):
            raise ValueError(f"an on-death command line cannot hold tabs or newlines: {list(argv)!r}")
        self._send("on-death " + "\t".join(argv))

    @property
    def pid(self) -> int:
        return self._process.pid

    def _send(self, line: str) -> None:
        try:
            self._stdin.write(line.encode("utf-8", "surrogateescape") + b"\n")
            self._stdin.flush()
        except OSError:
            pass  # the janitor died: nothing else to do

    def release(self) -> None:
        """The holder cleaned up itself: let the janitor exit without doing anything."""
        if self._stdin.closed:
            return
        self._send("release")
        _untrack(self._stdin.fileno())
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILLed: it ends; not reaped yet
                self._process.wait(_REAP_TIMEOUT)
