"""HTTP/1.1 framing for the proxy: message heads, bodies (whole or chunked), and the
operator's HTTP/1.1 connection as a ``ClientSide`` (answers written as bytes).

The proxy forwards answers as they stream (watches chunk by chunk) and needs the raw
bytes on both sides, so the framing is this small reader/writer rather than a full
HTTP library; ``server`` does the forwarding, ``http2`` the h2 side.
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import ssl
import struct
from collections.abc import Callable
from typing import IO

MAX_HEAD = 256 * 1024
COPY = 64 * 1024
_TLS_ALERT = b"\x15"  # the record type of a TLS alert (close_notify)


class ProxyProtocolError(Exception):
    """The operator sent something that is not HTTP/1.1."""


class Head:
    """A request or status line and its headers (names kept as sent, looked up case-insensitively)."""

    def __init__(self, first: str, headers: list[tuple[str, str]]) -> None:
        self.first = first
        self.headers = headers

    def get(self, name: str, default: str = "") -> str:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return default

    def has_token(self, name: str, token: str) -> bool:
        return any(part.strip().lower() == token for part in self.get(name).split(","))

    def encode(self, drop: frozenset[str] = frozenset(), extra: list[tuple[str, str]] | None = None) -> bytes:
        lines = [self.first]
        lines += [f"{key}: {value}" for key, value in self.headers if key.lower() not in drop]
        lines += [f"{key}: {value}" for key, value in extra or []]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_head(stream: IO[bytes]) -> Head | None:
    """The next head, or None at a clean end of the connection."""
    first = stream.readline(MAX_HEAD)
    while first in (b"\r\n", b"\n"):  # tolerated between requests
        first = stream.readline(MAX_HEAD)
    if not first:
        return None
    headers: list[tuple[str, str]] = []
    size = len(first)
    while True:
        line = stream.readline(MAX_HEAD)
        size += len(line)
        if not line:
            raise ProxyProtocolError("connection ended inside a message head")
        if size > MAX_HEAD:
            raise ProxyProtocolError("message head too large")
        if line in (b"\r\n", b"\n"):
            break
        key, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ProxyProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((key.strip(), value.strip()))
    return Head(first.decode("latin-1").rstrip("\r\n"), headers)


def read_chunked(stream: IO[bytes]) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int(stream.readline(1024).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline(MAX_HEAD) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(read_exactly(stream, size))
        stream.readline(1024)


def read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if data is None or len(data) != size:
        raise ProxyProtocolError("connection ended inside a message body")
    return data


def buffered_reader(sock: socket.socket) -> io.BufferedReader:
    return io.BufferedReader(socket.SocketIO(sock, "rb"), COPY)


def shutdown(sock: socket.socket | None) -> None:
    """Unblock whatever thread reads ``sock`` (shutdown acts on the connection, not the descriptor)."""
    if sock is None:
        return
    with contextlib.suppress(OSError, ValueError):
        duplicate = socket.socket(fileno=socket.dup(sock.fileno()))
        with duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)


def reset_connection(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0): the peer sees 'connection reset by peer'."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def socket_closed_by_peer(client: socket.socket) -> bool:
    """Whether the peer of an idle HTTP/1.1 connection closed it (or is closing it)."""
    try:
        readable, _, _ = select.select([client], [], [], 0)
        if not readable:
            return False
        with socket.socket(fileno=socket.dup(client.fileno())) as raw:
            waiting = raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        return waiting in (b"", _TLS_ALERT)  # closed, or closing (Go sends close_notify first)
    except (OSError, ValueError):
        return True


class Http1Client:
    """An HTTP/1.1 connection of the operator: answers written as bytes on the TLS socket."""

    protocol = "HTTP/1.1"

    def __init__(
        self, client: ssl.SSLSocket, splice: Callable[[ssl.SSLSocket, ssl.SSLSocket, IO[bytes]], None]
    ) -> None:
        self._splice = splice
        self._client = client
        self._chunked = False

    def send_head(self, answer: Head, has_body: bool) -> None:
        self._chunked = has_body and answer.get("Transfer-Encoding").lower() == "chunked"
        self._client.sendall(answer.encode())

    def send_data(self, data: bytes) -> None:
        if not data:
            return
        self._client.sendall(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)

    def finish(self, trailer: bytes = b"") -> None:
        if self._chunked:
            self._client.sendall(b"0\r\n" + (trailer or b"\r\n"))

    def reset(self) -> None:
        reset_connection(self._client)

    def client_gone(self) -> bool:
        return socket_closed_by_peer(self._client)

    def splice(self, upstream: ssl.SSLSocket, reader: IO[bytes]) -> None:
        self._splice(self._client, upstream, reader)
