"""Client connections held open against ktest's servers, for tests of how the servers end them
(``import connections``: tests/ is on ``sys.path``)."""

from __future__ import annotations

import socket


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the server ended ``connection`` (which never sent a byte): EOF or a reset. Reads
    without blocking (``connection`` is made non-blocking)."""
    connection.setblocking(False)
    try:
        return connection.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
