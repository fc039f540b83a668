"""The proxy's listener and its HTTP/1.1 connections: TLS in from the operator, TLS out to the
API server (framing in ``http1``, h2 in ``http2``, one request's handling in ``exchange``).

One thread per operator connection, paired with one API server connection (opened on the first
request, reused while both sides keep it alive); requests are read whole, answers streamed. With
``http2`` the proxy also offers h2; without it, Go clients fall back to HTTP/1.1 as behind any
HTTP/1.1-only load balancer, at the cost of one connection per concurrent request (each watch).

Other local users can connect too (only the operator holds the client certificate the handshake
requires): the listener holds at most ``MAX_CONNECTIONS``, the oldest connection that has not
completed its handshake makes room at the cap, a handshaken one (the operator's) never does, and
accepting goes on through ``EMFILE`` and the like (:mod:`ktest.base.connection_cap`).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from ktest.base.connection_cap import (
    EVICTION_PAUSE,
    SHORTAGE_ERRORS,
    SHORTAGE_PAUSE,
    TRANSIENT_ACCEPT_ERRORS,
    ConnectionCap,
)
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
MAX_CONNECTIONS = 512
"""Connections one proxy holds at most (each has a thread while open). Over HTTP/1.1 the operator
opens one per request in flight (every watch holds one); HTTP/2 needs one in all."""
LISTEN_BACKLOG = 128
"""Connections the kernel queues for the proxy before it accepts them."""


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
        self.cap = ConnectionCap(MAX_CONNECTIONS)
        """The connections held; ``cap.evicted`` counts those closed in their handshake to make room."""
        self.accept_errors: list[str] = []
        """``accept()`` errors the listener went on after (the first of each kind)."""
        self.cut_off = False
        """A network cut (:meth:`cut`): every connection is closed as soon as it is accepted."""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(LISTEN_BACKLOG)
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

    def cut(self) -> None:
        """Cut the operator off, as a network partition would: end every open connection (its
        watches too) and close every new one as soon as it is accepted, until :meth:`mend`."""
        self.cut_off = True
        with self._lock:
            connections = list(self._connections.values())
        for _, sockets in connections:
            for sock in sockets:
                shutdown(sock)
        for watch in self.faults.open_watches():
            watch.cut("partition")

    def mend(self) -> None:
        """End the cut: new connections are served again (the operator reconnects by itself)."""
        self.cut_off = False

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closing.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError as error:
                if self._closing.is_set() or error.errno not in TRANSIENT_ACCEPT_ERRORS:
                    return
                self._note_accept_error(error)
                if error.errno in SHORTAGE_ERRORS:
                    # its thread closes it at once, freeing a descriptor; else wait for one
                    evicted = self.cap.evict_oldest_new()
                    self._closing.wait(EVICTION_PAUSE if evicted else SHORTAGE_PAUSE)
                continue
            if self._closing.is_set():
                raw.close()
                return
            if self.cut_off:
                raw.close()
                continue
            try:
                self._take(raw)
            except (OSError, RuntimeError) as error:  # no thread or descriptor to spare: dropped
                self._note_accept_error(error)
                raw.close()

    def _note_accept_error(self, error: BaseException) -> None:
        kind = errno.errorcode.get(getattr(error, "errno", None) or 0, type(error).__name__)
        if not any(seen.startswith(kind) for seen in self.accept_errors):
            self.accept_errors.append(f"{kind}: {error}")

    def _take(self, raw: socket.socket) -> None:
        """Hold ``raw`` within the cap and give it a thread; its handshake runs there."""
        client = self.server_context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        if not self.cap.admit(client):
            client.close()
            return
        with self._lock:
            self._counter += 1
            number = self._counter
            sockets: list[socket.socket | None] = [client, None]
            thread = threading.Thread(
                target=self._serve, args=(number, client, sockets),
                name=f"ktest-proxy-{self.name}-{number}", daemon=True,
            )
            self._connections[number] = (thread, sockets)
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self._connections.pop(number, None)
            self.cap.release(client)
            client.close()
            raise

    # ------------------------------------------------------------ one connection

    def _serve(self, number: int, client: ssl.SSLSocket, sockets: list[socket.socket | None]) -> None:
        link: UpstreamLink | None = None
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.settimeout(_HANDSHAKE_TIMEOUT)
            client.do_handshake()  # the operator's client certificate, or an SSLError
            self.cap.trust(client)
            client.settimeout(None)
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
            self.cap.release(client)
            with contextlib.suppress(OSError):
                client.close()
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
