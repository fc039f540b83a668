"""The connections one of ktest's listeners holds (the operator proxy, the webhook front server):
at most a fixed number, each with a thread, so that a local user who opens thousands cannot pin
the test process's threads and file descriptors.

A connection is *new* until it proves it is the expected client (a verified client certificate,
or a request carrying the path secret); then it is *trusted*. At the cap the oldest new
connection is closed to make room; a trusted one never is (the API server's kept-alive
connection, the operator's watches): when every connection held is trusted, the newcomer is
refused instead.

Accepting goes on through the errors ``accept()`` reports for one connection or for a momentary
shortage (:data:`TRANSIENT_ACCEPT_ERRORS`): a listener must not stop for good because another
user used up the process's descriptors for a moment; out of descriptors, it closes its oldest new
connection to make room (:meth:`ConnectionCap.evict_oldest_new`).
"""

from __future__ import annotations

import contextlib
import errno
import resource
import socket
import threading

TRANSIENT_ACCEPT_ERRORS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO, errno.EPERM,
     errno.EINTR, errno.EAGAIN}
)
"""``accept()`` errors after which the listener goes on accepting (errno values)."""
SHORTAGE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""Of those, the ones that say the process is short of descriptors or memory: wait a moment."""
SHORTAGE_PAUSE = 0.05
"""Seconds a listener pauses after a shortage before it accepts again (not to spin meanwhile)."""
EVICTION_PAUSE = 0.002
"""Seconds it pauses once it closed a connection for a descriptor (its thread frees it at once)."""


class ConnectionCap:
    """The open connections of one listener, at most ``limit``, oldest first (module docstring)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a connection cap must admit at least one connection, not {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._trusted: dict[socket.socket, bool] = {}
        self.evicted = 0
        """New connections closed to make room (never trusted ones)."""
        self.refused = 0
        """Connections refused because every connection held was trusted."""

    def admit(self, connection: socket.socket) -> bool:
        """Take ``connection`` in as new, closing the oldest new one at the cap; False (the
        caller closes it) when every connection held is trusted."""
        with self._lock:
            if len(self._trusted) >= self.limit:
                oldest = next((held for held, trusted in self._trusted.items() if not trusted), None)
                if oldest is None:
                    self.refused += 1
                    return False
                del self._trusted[oldest]
                self.evicted += 1
                end_connection(oldest)  # its thread sees the end of the connection and finishes
            self._trusted[connection] = False
            return True

    def evict_oldest_new(self) -> bool:
        """Close the oldest new connection (the process is out of descriptors); False if none."""
        with self._lock:
            oldest = next((held for held, trusted in self._trusted.items() if not trusted), None)
            if oldest is None:
                return False
            del self._trusted[oldest]
            self.evicted += 1
        end_connection(oldest)
        return True

    def trust(self, connection: socket.socket) -> None:
        """``connection`` proved it is the expected client: it is never closed to make room."""
        with self._lock:
            if connection in self._trusted:
                self._trusted[connection] = True

    def release(self, connection: socket.socket) -> None:
        """``connection`` ended (its thread is done with it)."""
        with self._lock:
            self._trusted.pop(connection, None)

    def held(self) -> list[socket.socket]:
        with self._lock:
            return list(self._trusted)

    def __len__(self) -> int:
        with self._lock:
            return len(self._trusted)

    def close_all(self) -> None:
        """End every connection held (their threads close the sockets) and forget them."""
        with self._lock:
            held, self._trusted = list(self._trusted), {}
        for connection in held:
            end_connection(connection)


def end_connection(connection: socket.socket | None) -> None:
    """Shut ``connection`` down both ways, waking the thread that reads it (which closes it).

    The socket-level call on the descriptor itself: a TLS socket's own ``shutdown`` would drop
    its TLS state under the reading thread, and a duplicate descriptor may not be available when
    the process is out of them."""
    if connection is None:
        return
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(connection, socket.SHUT_RDWR)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) to its hard limit, as
    Go programs do at start: a test process holds many connections (the operators', their
    proxies', watches), and another user's connections must not make it run out. Returns the
    (soft, hard) limits now in force; an environment that forbids the change keeps its limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft, hard
    wanted = hard
    if hard == resource.RLIM_INFINITY:  # Linux refuses an infinite soft limit above nr_open
        wanted = _nr_open() or soft
    with contextlib.suppress(ValueError, OSError):
        if wanted > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return 0
