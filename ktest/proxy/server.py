"""The proxy's listener and its HTTP/1.1 connections: TLS in from the operator, TLS out to the
API server (framing in ``http1``, h2 in ``http2``, one request's handling in ``exchange``).

One thread per operator connection, paired with one API server connection (opened on the first
request, reused while both sides keep it alive); requests are read whole, answers streamed. With
``http2`` the proxy also offers h2; without it, Go clients fall back to HTTP/1.1 as behind any
HTTP/1.1-only load balancer, at the cost of one connection per concurrent request (each watch).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from ktest.proxy.exchange import Forwarder, Upstream, UpstreamLink
from ktest.proxy.http1 import (
    COPY,
    Head,
    Http1Client,
    ProxyProtocolError,
    buffered_reader,
    read_chunked,
    read_exactly,
    read_head,
    shutdown,
)

if TYPE_CHECKING:
    from ktest.proxy.faults import FaultSet
    from ktest.proxy.traffic import Traffic

_HANDSHAKE_TIMEOUT = 10.0
_JANITOR_INTERVAL = 0.5


class ProxyServer(Forwarder):
    """Listens on 127.0.0.1 and forwards every request of the operator to ``upstream``."""

    def __init__(
        self,
        name: str,
        upstream: Upstream,
        server_context: ssl.SSLContext,
        traffic: Traffic,
        faults: FaultSet,
        http2: bool = False,
    ) -> None:
        super().__init__(name, upstream, traffic, faults)
        self.http2 = http2
        """Serve connections whose TLS handshake chose ``h2`` as HTTP/2 (``server_context`` must
        offer it in ALPN); otherwise HTTP/1.1 only."""
        self.server_context = server_context
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._connections: dict[int, tuple[threading.Thread, list[socket.socket | None]]] = {}
        self._counter = 0
        self.port = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._threads = [
            threading.Thread(target=self._accept_loop, name=f"ktest-proxy-{self.name}", daemon=True),
            threading.Thread(
                target=self._end_abandoned_watches, name=f"ktest-proxy-{self.name}-janitor", daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()
        return self.port

    def _end_abandoned_watches(self) -> None:
        while not self._closing.wait(_JANITOR_INTERVAL):
            for watch in self.faults.open_watches():
                if watch.cut_by is None and watch.client_gone():
                    watch.cut("client")

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection, and wait for their threads. Idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()
        if self._listener is not None:
            shutdown(self._listener)
            self._listener.close()
        for thread in self._threads:
            thread.join(timeout)
        with self._lock:
            connections = list(self._connections.values())
        for _, sockets in connections:
            for sock in sockets:
                shutdown(sock)
        deadline = time.monotonic() + timeout
        for thread, _ in connections:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closing.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            if self._closing.is_set():
                raw.close()
                return
            with self._lock:
                self._counter += 1
                number = self._counter
                sockets: list[socket.socket | None] = [raw, None]
                thread = threading.Thread(
                    target=self._serve, args=(number, raw, sockets),
                    name=f"ktest-proxy-{self.name}-{number}", daemon=True,
                )
                self._connections[number] = (thread, sockets)
            thread.start()

    # ------------------------------------------------------------ one connection

    def _serve(self, number: int, raw: socket.socket, sockets: list[socket.socket | None]) -> None:
        client: ssl.SSLSocket | None = None
        link: UpstreamLink | None = None
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.settimeout(_HANDSHAKE_TIMEOUT)
            client = self.server_context.wrap_socket(raw, server_side=True)
            client.settimeout(None)
            sockets[0] = client
            if self.http2 and client.selected_alpn_protocol() == "h2":
                from ktest.proxy.http2 import serve_http2

                serve_http2(self, client)
                return
            reader = buffered_reader(client)
            side = Http1Client(client, self._splice)

            def registered(sock: ssl.SSLSocket | None) -> None:
                sockets[1] = sock

            link = UpstreamLink(self.upstream, registered)
            while not self._closing.is_set():
                head = read_head(reader)
                if head is None:
                    return
                body = self._read_body(reader, head)
                if not self.exchange(side, head, body, link):
                    return
        except (OSError, ProxyProtocolError, ValueError):  # ssl.SSLError is an OSError
            return
        except Exception as error:  # a defect must not end the run; the operator sees the connection close
            self.errors.append(f"{type(error).__name__}: {error}")
            return
        finally:
            if link is not None:
                link.drop()
            with contextlib.suppress(OSError):
                (client or raw).close()
            with self._lock:
                self._connections.pop(number, None)

    def _read_body(self, reader: IO[bytes], head: Head) -> bytes:
        if head.get("Transfer-Encoding").lower() == "chunked":
            return read_chunked(reader)
        length = head.get("Content-Length")
        return read_exactly(reader, int(length)) if length and int(length) else b""

    def _splice(self, client: ssl.SSLSocket, upstream: ssl.SSLSocket, reader: IO[bytes]) -> None:
        """After ``101 Switching Protocols`` (exec, port-forward): copy both ways until either ends."""

        def pump(read: Callable[[int], bytes], write: socket.socket) -> None:
            with contextlib.suppress(OSError, ValueError):
                while data := read(COPY):
                    write.sendall(data)
            shutdown(write)

        out = threading.Thread(target=pump, args=(client.recv, upstream), daemon=True,
                               name=f"ktest-proxy-{self.name}-upgrade")
        out.start()
        pump(getattr(reader, "read1", reader.read), client)
        shutdown(client)
        out.join(5)
