"""kube-controller-manager's start-up ``/healthz``, answered the moment the API server is ready.

kube-controller-manager starts no controller before ``GET /healthz`` returns 200 and asks once a
second, and kube-apiserver's ``/healthz`` includes two bootstrap hooks that wait a fixed second
(:data:`ktest.controlplane.apiserver.BOOTSTRAP_HOOKS`): so controllers could not run before the
API server had served for a second, and a poll just short of that cost another. The gate, where
kube-controller-manager's kubeconfig points, ends TLS itself (with the API server's serving
certificate) until it has answered one ``GET /healthz``: it holds that request until :meth:`open`
(the plane is ready) and answers ``200 ok``; any other request gets ``503`` with ``Retry-After``.
From then on every connection is relayed to the API server byte for byte, TLS end to end.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from pathlib import Path

from ktest.base.closing import Closing

_HEAD_LIMIT = 64 * 1024
_HANDSHAKE_TIMEOUT = 10.0
_HOLD_TIMEOUT = 60.0
"""Seconds the start-up ``/healthz`` is held at most; then it gets 503 and kube-controller-manager
asks again (the plane's start has its own bound, which ends in an error naming what it waited for)."""
_DRAIN_TIMEOUT = 10.0
"""Seconds a relayed connection's answers may still flow once its client stopped sending."""
_CHUNK = 64 * 1024
_HEALTHY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n"
    b"Connection: close\r\n\r\nok"
)
_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
    b"Content-Length: 40\r\nConnection: close\r\n\r\nktest: the API server is still starting\n"
)


class StartupGate(Closing):
    """A loopback listener for kube-controller-manager: see the module docstring."""

    def __init__(self, upstream_port: int, serving_cert: Path, serving_key: Path) -> None:
        self._upstream_port = upstream_port
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(str(serving_cert), str(serving_key))
        self._context.set_alpn_protocols(["http/1.1"])  # one request per connection, readable here
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._answered = False
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, name="ktest-startup-gate", daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def answered(self) -> bool:
        """Whether the start-up ``/healthz`` was answered (every connection is relayed since)."""
        return self._answered

    def open(self) -> None:
        """The API server is ready: answer the held ``/healthz``."""
        self._ready.set()

    def close(self) -> None:
        """Stop listening and end every connection (the held request gets no answer)."""
        self._closed.set()
        self._ready.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._acceptor.join(timeout=5)

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed.is_set():
                sock.close()
                return False
            self._sockets.add(sock)
            return True

    def _replace(self, old: socket.socket, new: socket.socket) -> bool:
        with self._lock:
            self._sockets.discard(old)
        return self._track(new)

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(sockets)
        for sock in sockets:
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            if not self._track(connection):
                return
            target = self._relay if self._answered else self._answer
            threading.Thread(
                target=target, args=(connection,), name="ktest-startup-gate-conn", daemon=True
            ).start()

    def _answer(self, connection: socket.socket) -> None:
        tls: ssl.SSLSocket | None = None
        try:
            connection.settimeout(_HANDSHAKE_TIMEOUT)
            tls = self._context.wrap_socket(connection, server_side=True)  # takes over the socket
            if not self._replace(connection, tls):
                return
            head = _read_head(tls)
            tls.settimeout(None)
            if head is not None and _is_health_check(head):
                if not self._ready.wait(_HOLD_TIMEOUT):
                    tls.sendall(_UNAVAILABLE)
                    return
                if self._closed.is_set():
                    return
                self._answered = True  # before the reply: the next connection is relayed
                tls.sendall(_HEALTHY)
            else:
                tls.sendall(_UNAVAILABLE)
        except OSError:  # ssl.SSLError included: a client that left or spoke no TLS
            pass
        finally:
            self._forget(connection, *([tls] if tls is not None else []))

    def _relay(self, connection: socket.socket) -> None:
        try:
            upstream = socket.create_connection(
                ("127.0.0.1", self._upstream_port), timeout=_HANDSHAKE_TIMEOUT
            )
        except OSError:
            self._forget(connection)
            return
        upstream.settimeout(None)
        for end in (connection, upstream):  # as Go does: Nagle's delays stall small HTTP/2 frames
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._track(upstream):
            self._forget(connection)
            return
        back = threading.Thread(
            target=_pipe, args=(upstream, connection), name="ktest-startup-gate-relay", daemon=True
        )
        back.start()
        _pipe(connection, upstream)
        back.join(_DRAIN_TIMEOUT)  # then closing both ends it
        self._forget(connection, upstream)


def _read_head(tls: ssl.SSLSocket) -> bytes | None:
    """The request line and headers, or None if the client went away first."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = tls.recv(_CHUNK)
        if not data or len(head) > _HEAD_LIMIT:
            return None
        head += data
    return head


def _is_health_check(head: bytes) -> bool:
    method, _, rest = head.partition(b" ")
    target = rest.partition(b" ")[0]
    return method == b"GET" and target.partition(b"?")[0] == b"/healthz"


def _pipe(source: socket.socket, destination: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``destination``'s sending side."""
    try:
        while data := source.recv(_CHUNK):
            destination.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            destination.shutdown(socket.SHUT_WR)
