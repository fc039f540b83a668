"""The proxy's HTTP/2 side: one operator connection, many streams, each an API request.

client-go prefers HTTP/2 and multiplexes all of an operator's requests, watches included, over one
connection. Served here with the ``h2`` library: one thread reads frames; each request stream, once
whole, gets a thread that runs ``Forwarder.exchange`` as HTTP/1.1 does and forwards over an
HTTP/1.1 connection to the API server; the answer goes back as it arrives, within the operator's
flow-control windows. The ``reset`` fault resets the stream (RST_STREAM), not the connection: the
operator's other requests on it go on.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from typing import IO

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from ktest.proxy.exchange import Forwarder, UpstreamLink
from ktest.proxy.http1 import Head, ProxyProtocolError, shutdown

PROTOCOL = "HTTP/2"
_READ = 64 * 1024
_WINDOW_WAIT = 1.0
_MAX_STREAMS = 1000
_JOIN = 5.0
_IDLE_UPSTREAMS = 16
# Connection-specific header fields HTTP/2 forbids (RFC 9113, 8.2.2).
_NOT_IN_HTTP2 = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}
)


class _Connection:
    """One HTTP/2 connection of the operator: the h2 state machine, behind one lock."""

    def __init__(self, server: Forwarder, client: ssl.SSLSocket) -> None:
        self.server = server
        self.client = client
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=config)
        self.lock = threading.Condition()
        """Guards ``h2`` and writes to ``client``; notified when frames arrive (windows may open)."""
        self.closed = False
        self._requests: dict[int, tuple[list[tuple[str, str]], bytearray]] = {}
        self.streams: dict[int, _Stream] = {}
        self._threads: list[threading.Thread] = []
        self.idle: list[tuple[ssl.SSLSocket, IO[bytes]]] = []
        """API server connections free for the next stream (as HTTP/1.1 keep-alive reuses one)."""
        self.idle_lock = threading.Lock()

    def flush(self) -> None:
        """Send what the state machine has queued (call with the lock held)."""
        data = self.h2.data_to_send()
        if data:
            self.client.sendall(data)

    def serve(self) -> None:
        with self.lock:
            self.h2.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: _MAX_STREAMS})
            self.h2.initiate_connection()
            self.flush()
        try:
            while not self.server.closing:
                data = self.client.recv(_READ)
                if not data:
                    return
                with self.lock:
                    try:
                        events = self.h2.receive_data(data)
                    except h2.exceptions.ProtocolError as error:
                        # h2 (4.3.0 on) ends the connection itself for a header holding CR, LF or NUL
                        self.server.traffic.note(f"HTTP/2 connection refused (protocol error): {error}")
                        self.flush()  # the GOAWAY h2 queued
                        return
                    started = [stream for event in events if (stream := self._on(event)) is not None]
                    self.flush()
                    self.lock.notify_all()
                    if any(isinstance(event, h2.events.ConnectionTerminated) for event in events):
                        return
                for stream in started:
                    thread = threading.Thread(
                        target=stream.run, name=f"ktest-proxy-{self.server.name}-h2-{stream.id}", daemon=True
                    )
                    self._threads = [t for t in self._threads if t.is_alive()]
                    self._threads.append(thread)
                    thread.start()
        finally:
            self._end()

    def _on(self, event: h2.events.Event) -> _Stream | None:
        """Update the streams for one event; the stream to start when a request is whole."""
        if isinstance(event, h2.events.RequestReceived):
            headers = [(str(key), str(value)) for key, value in event.headers or []]
            self._requests[event.stream_id] = (headers, bytearray())
        elif isinstance(event, h2.events.DataReceived):
            request = self._requests.get(event.stream_id)
            if request is not None and event.data:
                request[1].extend(event.data)
            if event.flow_controlled_length:
                with contextlib.suppress(h2.exceptions.StreamClosedError):
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            request = self._requests.pop(event.stream_id, None)
            if request is not None:
                stream = _Stream(self, event.stream_id, *request)
                self.streams[event.stream_id] = stream
                return stream
        elif isinstance(event, h2.events.StreamReset):
            self._requests.pop(event.stream_id, None)
            reset = self.streams.get(event.stream_id)
            if reset is not None:  # its thread notices when it writes; a quiet watch, by the janitor
                reset.reset_by_client = True
        return None

    def _end(self) -> None:
        """The connection is over: end every stream's forwarding and wait for their threads."""
        with self.lock:
            self.closed = True
            streams = list(self.streams.values())
            self.lock.notify_all()
        for stream in streams:
            shutdown(stream.link.sock)  # its thread sees the end of the API server connection
        deadline = time.monotonic() + _JOIN
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.idle_lock:
            idle, self.idle = self.idle, []
        for sock, _ in idle:
            with contextlib.suppress(OSError):
                sock.close()


class _StreamLink(UpstreamLink):
    """A stream's API server connection: an idle one of the connection's when there is one, back
    to them when the answer was forwarded whole; the frame-reading thread may have to break it."""

    def __init__(self, connection: _Connection) -> None:
        super().__init__(connection.server.upstream, lambda sock: None)
        self._connection = connection

    def open(self) -> tuple[ssl.SSLSocket, IO[bytes]]:
        if self.sock is None:
            with self._connection.idle_lock:
                if self._connection.idle:
                    self.sock, self.reader = self._connection.idle.pop()
        return super().open()

    def release(self) -> None:
        """Keep the connection for the next stream (exchange drops one it cannot reuse)."""
        connection = self._connection
        if self.sock is not None and self.reader is not None and not connection.closed:
            with connection.idle_lock:
                if len(connection.idle) < _IDLE_UPSTREAMS:
                    connection.idle.append((self.sock, self.reader))
                    self.sock = self.reader = None
        self.drop()


class _Stream:
    """One request stream: its request, and where its answer is written (a ``ClientSide``)."""

    protocol = PROTOCOL

    def __init__(
        self, connection: _Connection, stream_id: int, headers: list[tuple[str, str]], body: bytearray
    ) -> None:
        self.connection = connection
        self.id = stream_id
        self.headers = headers
        self.body = bytes(body)
        self.reset_by_client = False
        self.finished = False
        self.link = _StreamLink(connection)

    def run(self) -> None:
        server = self.connection.server
        whole = False
        try:
            if not server.exchange(self, self._head(), self.body, self.link) and not self.finished:
                self.reset()  # the API server could not be reached: no answer will come
            whole = not self.reset_by_client
        except (OSError, ValueError, ProxyProtocolError, h2.exceptions.H2Error):
            if not self.finished:
                self.reset()  # a broken API server connection, or the operator gave up the stream
        except Exception as error:  # a defect must not end the run; the operator sees the stream reset
            server.errors.append(f"{type(error).__name__}: {error}")
            self.reset()
        finally:
            if whole:
                self.link.release()
            else:
                self.link.drop()
            with self.connection.lock:
                self.connection.streams.pop(self.id, None)

    def _head(self) -> Head:
        """The request as an HTTP/1.1 head (what ``exchange`` and the API server read)."""
        pseudo = {key: value for key, value in self.headers if key.startswith(":")}
        headers = [(key, value) for key, value in self.headers if not key.startswith(":")]
        if pseudo.get(":authority") and not any(key == "host" for key, _ in headers):
            headers.append(("host", pseudo[":authority"]))
        return Head(f"{pseudo.get(':method', 'GET')} {pseudo.get(':path', '/')} HTTP/1.1", headers)

    # ------------------------------------------------------------ ClientSide

    def send_head(self, answer: Head, has_body: bool) -> None:
        headers = [(":status", str(answer.status))]
        headers += [(key.lower(), value) for key, value in answer.headers if key.lower() not in _NOT_IN_HTTP2]
        with self.connection.lock:
            self._check_open()
            self.connection.h2.send_headers(self.id, headers, end_stream=not has_body)
            self.connection.flush()
        self.finished = not has_body

    def send_data(self, data: bytes) -> None:
        view = memoryview(data)
        connection = self.connection
        while view:
            with connection.lock:
                while True:
                    self._check_open()
                    window = connection.h2.local_flow_control_window(self.id)
                    if window > 0:
                        break
                    connection.lock.wait(_WINDOW_WAIT)
                size = min(window, connection.h2.max_outbound_frame_size, len(view))
                connection.h2.send_data(self.id, bytes(view[:size]))
                connection.flush()
            view = view[size:]

    def finish(self, trailer: bytes = b"") -> None:
        if self.finished or self.client_gone():
            return  # nothing left to end
        with self.connection.lock:
            self.connection.h2.end_stream(self.id)
            self.connection.flush()
        self.finished = True

    def reset(self) -> None:
        self.finished = True
        with self.connection.lock, contextlib.suppress(h2.exceptions.H2Error, OSError):
            if not self.connection.closed:
                self.connection.h2.reset_stream(self.id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                self.connection.flush()

    def client_gone(self) -> bool:
        return self.reset_by_client or self.connection.closed

    def splice(self, upstream: ssl.SSLSocket, reader: IO[bytes]) -> None:
        raise OSError("HTTP/2 has no protocol switch (101)")

    def _check_open(self) -> None:
        if self.client_gone():
            raise OSError(f"HTTP/2 stream {self.id} was closed by the operator")


def serve_http2(server: Forwarder, client: ssl.SSLSocket) -> None:
    """Serve ``client``, which chose ``h2`` in the TLS handshake, until it closes."""
    _Connection(server, client).serve()
