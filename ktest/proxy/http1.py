"""HTTP/1.1 framing for the proxy (heads, whole or chunked bodies) and the operator's HTTP/1.1
connection as a ``ClientSide``: the proxy streams answers and needs the raw bytes on both sides,
so this small reader/writer stands in for a full HTTP library.
"""

from __future__ import annotations

import contextlib
import io
import re
import select
import socket
import ssl
import struct
from collections.abc import Callable
from typing import IO

MAX_HEAD = 256 * 1024
COPY = 64 * 1024
_TLS_ALERT = b"\x15"  # the record type of a TLS alert (close_notify)
# What ends a line (CR, LF) or a C string (NUL): in a head the proxy writes, one of them would let
# the sender end the request early and start another the API server runs unrecorded.
_LINE_BREAKING = re.compile(r"[\r\n\x00]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.6.2: methods and header names
_CHARACTER_NAMES = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\x00": "a NUL byte"}


class ProxyProtocolError(Exception):
    """The operator sent something that is not HTTP/1.1."""


class UnsafeHeadError(ProxyProtocolError):
    """A head that cannot be written as HTTP/1.1 as it is (see :meth:`Head.problem`)."""


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

    @property
    def status(self) -> int:
        """A status line's code (502 when it has none)."""
        parts = self.first.split(" ", 2)
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 502

    def has_token(self, name: str, token: str) -> bool:
        return any(part.strip().lower() == token for part in self.get(name).split(","))

    def problem(self) -> str | None:
        """Why this head cannot be written as HTTP/1.1 as it is (what, where), or None.

        A CR, LF or NUL in the first line, a header name or a value, or a name that is not a
        token, would change where the API server sees the request (or a header) end: an HTTP/2
        header value holding ``\\r\\n\\r\\nDELETE ...`` becomes a second request on the
        upstream connection. HTTP/2 libraries before h2 4.3.0 let such values through.
        """
        found = _LINE_BREAKING.search(self.first)
        if found is not None:
            return f"the first line {self.first[:200]!r} holds {_CHARACTER_NAMES[found.group()]}"
        for key, value in self.headers:
            if _TOKEN.fullmatch(key) is None:
                return f"the header name {key[:200]!r} is not a token (RFC 9110, 5.6.2)"
            found = _LINE_BREAKING.search(value)
            if found is not None:
                return f"the value of header {key!r} holds {_CHARACTER_NAMES[found.group()]}"
        return None

    def request_problem(self) -> str | None:
        """:meth:`problem`, and for a request line: a method that is not a token, or a target
        holding whitespace (either would add words to the line the API server reads)."""
        problem = self.problem()
        if problem is not None:
            return problem
        parts = self.first.split(" ")
        if len(parts) != 3 or _TOKEN.fullmatch(parts[0]) is None or not parts[1] or any(
            character.isspace() for character in parts[1]
        ):
            return f"the request line {self.first[:200]!r} is not 'METHOD target HTTP/version'"
        return None

    def encode(self, drop: frozenset[str] = frozenset(), extra: list[tuple[str, str]] | None = None) -> bytes:
        """The head as HTTP/1.1 bytes, without the headers named in ``drop`` (lower case) and with
        ``extra`` added. Raises :class:`UnsafeHeadError` for a head :meth:`problem` refuses,
        whichever side built it: nothing is written that could split into two messages."""
        kept = Head(self.first, [(key, value) for key, value in self.headers if key.lower() not in drop])
        kept.headers += extra or []
        problem = kept.problem()
        if problem is not None:
            raise UnsafeHeadError(problem)
        lines = [kept.first] + [f"{key}: {value}" for key, value in kept.headers]
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
    while size := chunk_size(stream.readline(1024)):
        parts.append(read_exactly(stream, size))
        stream.readline(1024)
    read_trailer(stream)
    return b"".join(parts)


def chunk_size(line: bytes) -> int:
    """The size a chunk's first line gives (extensions ignored; none: the last chunk)."""
    return int(line.split(b";")[0].strip() or b"0", 16)


def read_trailer(stream: IO[bytes]) -> bytes:
    """What follows the last chunk, up to and including the empty line that ends the message."""
    trailer = b""
    while True:
        line = stream.readline(MAX_HEAD)
        trailer += line
        if line in (b"\r\n", b"\n", b""):
            return trailer


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
