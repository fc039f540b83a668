# Over 500 lines: one request's exchange, its streaming relay and the fault answers belong together.
"""The proxy's forwarding: TLS in from the operator, TLS out to the API server (HTTP/1.1
framing in ``http1``, h2 in ``http2``).

One thread per operator connection, paired with one connection to the API
server (opened on the first request, reused while both sides keep it alive).
Requests are read whole (API request bodies are small); answers are streamed:
a chunked answer (every watch) is forwarded chunk by chunk as it arrives, so a
watch event reaches the operator as soon as the API server sends it, and is
counted on the way. Before a request is forwarded, the active fault rules may
hold it (latency), answer it themselves (409, 429, 5xx, 410) or reset the
connection.

With ``http2`` (``OperatorProxy``'s default) the proxy offers h2 besides
HTTP/1.1 and serves such connections in ``ktest.proxy.http2``, each stream
through the same ``exchange`` as an HTTP/1.1 request (a ``ClientSide`` says how
its answer is written). Without it only HTTP/1.1 is offered (ALPN ``http/1.1``):
Go's client-go, which prefers HTTP/2, falls back to HTTP/1.1, as behind any
HTTP/1.1-only load balancer, at the cost of one connection per concurrent
request (each watch holds one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Protocol

from ktest.proxy.http1 import (
    COPY,
    MAX_HEAD,
    Head,
    Http1Client,
    ProxyProtocolError,
    buffered_reader,
    read_chunked,
    read_exactly,
    read_head,
    shutdown,
)
from ktest.proxy.requests import ApiRequest, parse_request

if TYPE_CHECKING:
    from ktest.proxy.faults import Decision, FaultSet
    from ktest.proxy.traffic import Call, Traffic

_HANDSHAKE_TIMEOUT = 10.0
_HOP_BY_HOP = frozenset({"proxy-connection", "keep-alive", "te", "trailer", "proxy-authorization"})
_EVENT_TYPE = re.compile(rb'"type"\s*:\s*"([A-Z]+)"')
# The API server writes metadata's name (and generateName) before its namespace.
_EVENT_OBJECT = re.compile(
    rb'"metadata":\{"name":"([^"]+)"(?:,"generateName":"[^"]*")?(?:,"namespace":"([^"]*)")?'
)
MAX_EVENT_OBJECTS = 5000
"""Per watch: how many events' objects are remembered (namespace, name, when)."""
_NO_BODY_STATUS = frozenset({204, 304})
_JANITOR_INTERVAL = 0.5


@dataclass(frozen=True)
class Upstream:
    """The real API server and the operator's own credentials for it."""

    host: str
    port: int
    context: ssl.SSLContext
    server_hostname: str | None
    authorization: str | None = None
    """An ``Authorization`` header value (bearer token, basic) when the identity is not a certificate."""

    def connect(self, timeout: float = 10.0) -> ssl.SSLSocket:
        raw = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.context.wrap_socket(raw, server_hostname=self.server_hostname)
        except BaseException:
            raw.close()
            raise
        tls.settimeout(None)
        return tls


class WatchStream:
    """An open watch being forwarded; :meth:`cut` ends it from another thread."""

    def __init__(self, call: Call, client_gone: Callable[[], bool]) -> None:
        self.call = call
        self.request = call.request
        self._upstream: ssl.SSLSocket | None = None
        self._client_gone = client_gone
        self.cut_by: str | None = None

    def attach(self, upstream: ssl.SSLSocket) -> None:
        """The API server connection the watch is sent on (registered before it is answered, so
        a watch in flight is closed too)."""
        self._upstream = upstream
        if self.cut_by is not None:
            shutdown(upstream)

    def cut(self, reason: str) -> None:
        if self.cut_by is None:
            self.cut_by = reason
            shutdown(self._upstream)

    def client_gone(self) -> bool:
        """Whether the operator closed its end (a watch it abandoned): the forwarding thread only
        notices when the next event arrives, which on a quiet watch may be never."""
        return self._client_gone()


class ClientSide(Protocol):
    """Where one answer goes: an HTTP/1.1 connection, or one HTTP/2 stream.

    The request handling (naming, recording, faults, forwarding) is the same for
    both protocols; only how an answer's head and body are written differs.
    """

    protocol: str
    """"HTTP/1.1" or "HTTP/2", as recorded in ``Call.protocol``."""

    def send_head(self, answer: Head, has_body: bool) -> None:
        """The status line and headers (as the API server sent them, HTTP/1.1 style)."""

    def send_data(self, data: bytes) -> None:
        """A piece of the body, written at once (a watch event must not wait)."""

    def finish(self, trailer: bytes = b"") -> None:
        """The end of the body."""

    def reset(self) -> None:
        """Fail the request as a broken connection would (the ``reset`` fault)."""

    def client_gone(self) -> bool:
        """Whether the operator abandoned the request (closed its connection or stream)."""

    def splice(self, upstream: ssl.SSLSocket, reader: IO[bytes]) -> None:
        """After ``101 Switching Protocols``: copy both ways until either side ends."""


class UpstreamLink:
    """The API server connection one operator connection (HTTP/1.1) or stream (HTTP/2) uses:
    opened on the first request, reused while the API server keeps it alive."""

    def __init__(self, upstream: Upstream, registered: Callable[[ssl.SSLSocket | None], None]) -> None:
        self._upstream = upstream
        self._registered = registered
        self.sock: ssl.SSLSocket | None = None
        self.reader: IO[bytes] | None = None

    def open(self) -> tuple[ssl.SSLSocket, IO[bytes]]:
        if self.sock is None or self.reader is None:
            self.sock = self._upstream.connect()
            self.reader = buffered_reader(self.sock)
            self._registered(self.sock)
        return self.sock, self.reader

    def drop(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock = self.reader = None
        self._registered(None)


class _EventCounter:
    """Counts watch events in a JSON (one object per line) or protobuf (length-prefixed) stream,
    gzip-compressed or not (the API server compresses a watch for clients that accept gzip, as
    client-go does: every flush is a gzip member of its own)."""

    def __init__(self, content_type: str, content_encoding: str = "") -> None:
        self.protobuf = "protobuf" in content_type
        self._pending = 0  # protobuf: bytes of the current frame still to come
        self._prefix = b""
        self._gzip = content_encoding.strip().lower() == "gzip"
        self._inflater = zlib.decompressobj(31) if self._gzip else None

    def _inflate(self, data: bytes) -> bytes:
        """The uncompressed bytes of ``data`` (gzip members back to back)."""
        out: list[bytes] = []
        while data and self._inflater is not None:
            try:
                out.append(self._inflater.decompress(data))
            except zlib.error:
                self._inflater = None  # not gzip after all: stop counting rather than guess
                break
            if not self._inflater.eof:
                break
            data = self._inflater.unused_data
            self._inflater = zlib.decompressobj(31)
        return b"".join(out)

    def feed(self, data: bytes, call: Call, now: float) -> None:
        if self._gzip:
            data = self._inflate(data)
        if not self.protobuf:
            count = data.count(b"\n")
            if count:
                call.events += count
                for kind in _EVENT_TYPE.findall(data):
                    name = kind.decode()
                    call.event_types[name] = call.event_types.get(name, 0) + 1
                if len(call.event_objects) < MAX_EVENT_OBJECTS:
                    for match in _EVENT_OBJECT.finditer(data):
                        namespace = match.group(2)
                        call.event_objects.append(
                            (now, namespace.decode() if namespace else None, match.group(1).decode())
                        )
            return
        view = memoryview(data)
        while view:
            if self._pending:
                taken = min(self._pending, len(view))
                self._pending -= taken
                view = view[taken:]
                continue
            need = 4 - len(self._prefix)
            self._prefix += bytes(view[:need])
            view = view[need:]
            if len(self._prefix) == 4:
                self._pending = struct.unpack(">I", self._prefix)[0]
                self._prefix = b""
                call.events += 1


class ProxyServer:
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
        self.name = name
        self.http2 = http2
        """Serve connections whose TLS handshake chose ``h2`` as HTTP/2 (``server_context`` must
        offer it in ALPN); otherwise HTTP/1.1 only."""
        self.upstream = upstream
        self.server_context = server_context
        self.traffic = traffic
        self.faults = faults
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._janitor: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: dict[int, tuple[threading.Thread, list[socket.socket | None]]] = {}
        self._counter = 0
        self._closing = threading.Event()
        self.port = 0
        self.errors: list[str] = []
        """Unexpected errors of connection threads (the connection was closed); empty normally."""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"ktest-proxy-{self.name}", daemon=True
        )
        self._accept_thread.start()
        self._janitor = threading.Thread(
            target=self._end_abandoned_watches, name=f"ktest-proxy-{self.name}-janitor", daemon=True
        )
        self._janitor.start()
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
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        if self._janitor is not None:
            self._janitor.join(timeout)
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
        except (OSError, ssl.SSLError, ProxyProtocolError, ValueError):
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

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def exchange(self, side: ClientSide, head: Head, body: bytes, link: UpstreamLink) -> bool:
        """One request of the operator, whole, and its answer: named, recorded, held, answered by a
        fault or forwarded on ``link``. Whether the operator's connection stays usable."""
        method, target, _ = [*head.first.split(" ", 2), "", ""][:3]
        request = parse_request(method, target)
        if request.verb == "create" and request.resource and body:
            request = _named_by_body(request, body)
        call = self.traffic.begin(request, head.get("User-Agent"), side.protocol)
        problem = head.request_problem()
        if problem is not None:
            return self._refuse(side, call, problem)
        started = time.monotonic()
        # Registered from now on, so that closing watches closes those in flight too.
        watch = WatchStream(call, side.client_gone) if request.is_watch else None
        if watch is not None:
            self.faults.watch_opened(watch)
        try:
            decision = self.faults.decide(request)
            if decision is not None:
                if decision.delay:
                    call.fault = decision.label
                    time.sleep(decision.delay)
                if decision.answer is not None:
                    return self._answer_with_fault(side, head, request, call, decision)
            if watch is not None and watch.cut_by is not None:  # while it was held
                self._end_watch_unanswered(side, call, watch, started)
                return True
            message = self._forward_head(head, len(body)) + body
            answer: Head | None = None
            for attempt in (1, 2):
                fresh = link.sock is None
                try:
                    upstream, upstream_reader = link.open()
                    if watch is not None:
                        watch.attach(upstream)
                    upstream.sendall(message)
                    answer = read_head(upstream_reader)
                    if answer is None:
                        raise ProxyProtocolError("the API server closed the connection unanswered")
                    break
                except (OSError, ProxyProtocolError) as error:
                    # A kept-alive connection the server closed while idle: once more on a new one.
                    link.drop()
                    if watch is not None and watch.cut_by is not None:
                        self._end_watch_unanswered(side, call, watch, started)
                        return True
                    if fresh or attempt == 2:
                        call.error = f"API server unreachable: {error}"
                        call.ended = self.traffic.now()
                        return False
            assert answer is not None and link.sock is not None and link.reader is not None
            keep, upstream_usable = self._relay(
                side, link.sock, link.reader, head, answer, call, started, watch
            )
        finally:
            if watch is not None:
                self.faults.watch_closed(watch)
        if not upstream_usable:
            link.drop()
        return keep

    def _read_body(self, reader: IO[bytes], head: Head) -> bytes:
        if head.get("Transfer-Encoding").lower() == "chunked":
            return read_chunked(reader)
        length = head.get("Content-Length")
        return read_exactly(reader, int(length)) if length and int(length) else b""

    def _forward_head(self, head: Head, length: int) -> bytes:
        drop = _HOP_BY_HOP | {"host", "content-length", "transfer-encoding"}
        extra = [("Host", f"{self.upstream.host}:{self.upstream.port}")]
        if length or head.first.split(" ", 1)[0] in ("POST", "PUT", "PATCH"):
            extra.append(("Content-Length", str(length)))
        if self.upstream.authorization is not None:
            drop = drop | {"authorization"}
            extra.append(("Authorization", self.upstream.authorization))
        return head.encode(drop, extra)

    def _relay(
        self,
        client: ClientSide,
        upstream: ssl.SSLSocket,
        reader: IO[bytes],
        request_head: Head,
        answer: Head,
        call: Call,
        started: float,
        watch: WatchStream | None = None,
    ) -> tuple[bool, bool]:
        """Forward one answer; (keep the operator's connection, keep the upstream one)."""
        call.latency = time.monotonic() - started
        parts = answer.first.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 502
        call.status = status
        if answer.get("Retry-After"):
            with contextlib.suppress(ValueError):
                call.retry_after = float(answer.get("Retry-After"))
        closing = request_head.has_token("Connection", "close") or answer.has_token("Connection", "close")
        if status == 101:
            client.send_head(answer, has_body=False)
            client.splice(upstream, reader)
            call.ended = self.traffic.now()
            return False, False
        if request_head.first.startswith("HEAD ") or status in _NO_BODY_STATUS or 100 <= status < 200:
            client.send_head(answer, has_body=False)
            client.finish()
            call.ended = self.traffic.now()
            return not closing, not closing
        client.send_head(answer, has_body=True)
        if answer.get("Transfer-Encoding").lower() == "chunked":
            # A watch cut by a fault ends cleanly for the operator, whose connection stays usable;
            # the API server's connection is spent (it was in the middle of an answer).
            usable = self._relay_chunked(client, reader, answer, call, watch)
            call.ended = self.traffic.now()
            return not closing, (not closing) and usable
        length = answer.get("Content-Length")
        if length:
            remaining = int(length)
            while remaining:
                data = reader.read(min(COPY, remaining))
                if not data:
                    raise ProxyProtocolError("the API server ended an answer early")
                client.send_data(data)
                remaining -= len(data)
            client.finish()
            call.ended = self.traffic.now()
            return not closing, not closing
        while True:  # delimited by the end of the connection
            data = reader.read1(COPY) if hasattr(reader, "read1") else reader.read(COPY)
            if not data:
                break
            client.send_data(data)
        client.finish()
        call.ended = self.traffic.now()
        return False, False

    def _end_watch_unanswered(
        self, client: ClientSide, call: Call, watch: WatchStream, started: float
    ) -> None:
        """A watch cut before the API server answered it: it ends at once, empty, as a watch the
        server ends (the operator watches again, as it would then)."""
        call.status = 200
        call.latency = time.monotonic() - started
        call.closed_by = watch.cut_by
        call.ended = self.traffic.now()
        client.send_head(_empty_watch_head(), has_body=True)
        client.finish()

    def _relay_chunked(
        self, client: ClientSide, reader: IO[bytes], answer: Head, call: Call, watch: WatchStream | None
    ) -> bool:
        """Forward chunks as they arrive; False if the stream was cut (the upstream connection is spent)."""
        counter = None
        if watch is not None:
            counter = _EventCounter(answer.get("Content-Type"), answer.get("Content-Encoding"))
        while True:
            try:
                size_line = reader.readline(1024)
                if not size_line:
                    raise ProxyProtocolError("the API server ended a stream early")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    trailer = b""
                    while True:
                        line = reader.readline(MAX_HEAD)
                        trailer += line
                        if line in (b"\r\n", b"\n", b""):
                            break
                    client.finish(trailer)
                    if watch is not None and watch.call.closed_by is None:
                        watch.call.closed_by = "server"
                    return True
                data = read_exactly(reader, size)
                reader.readline(1024)
            except (OSError, ValueError, ProxyProtocolError):
                if watch is not None and watch.cut_by is not None:
                    call.closed_by = watch.cut_by
                    client.finish()  # the stream ends cleanly, as when the server ends it
                    return False
                raise
            if watch is not None and watch.cut_by is not None:
                call.closed_by = watch.cut_by
                client.finish()
                return False
            client.send_data(data)
            if counter is not None:
                counter.feed(data, call, self.traffic.now())

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

    # ------------------------------------------------------------ answers made here

    def _refuse(self, client: ClientSide, call: Call, problem: str) -> bool:
        """Answer 400 to a request whose head cannot be forwarded as sent (see ``Head.problem``),
        and record why; nothing reaches the API server. The operator's connection is not kept:
        its framing is in doubt."""
        call.refused = problem
        call.status = 400
        call.latency = 0.0
        call.ended = self.traffic.now()
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"ktest's operator proxy did not forward this request: {problem}. A CR, LF or NUL "
            "in a request head would let it carry a second request past the traffic record",
            "reason": "BadRequest",
            "code": 400,
        }
        body = json.dumps(status, separators=(",", ":")).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
            ("X-Ktest-Refused", "malformed-head"),
        ]
        client.send_head(Head("HTTP/1.1 400 Bad Request", headers), has_body=True)
        client.send_data(body)
        client.finish()
        return False

    def _answer_with_fault(
        self, client: ClientSide, head: Head, request: ApiRequest, call: Call, decision: Decision
    ) -> bool:
        """Answer ``request`` as the fault says; whether the connection stays usable."""
        call.fault = decision.label
        call.answered_by_fault = True
        call.latency = 0.0
        answer = decision.answer
        if answer == "reset":
            call.error = "connection reset"
            call.ended = self.traffic.now()
            client.reset()
            return False
        assert decision.status is not None
        wants_protobuf = "protobuf" in head.get("Accept")
        status_body = _status(request, decision.status, decision.reason, decision.retry_after)
        if answer == "gone" and request.is_watch and not wants_protobuf:
            event = json.dumps({"type": "ERROR", "object": status_body}, separators=(",", ":")).encode()
            event += b"\n"
            call.status = 200
            call.events = 1
            call.event_types = {"ERROR": 1}
            call.closed_by = decision.label
            call.ended = self.traffic.now()
            head_out = _empty_watch_head()
            head_out.headers.append(("X-Ktest-Fault", decision.label))
            client.send_head(head_out, has_body=True)
            client.send_data(event)
            client.finish()
        else:
            body = json.dumps(status_body, separators=(",", ":")).encode()
            headers = [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("X-Ktest-Fault", decision.label),
            ]
            if decision.retry_after is not None:
                headers.append(("Retry-After", f"{decision.retry_after:g}"))
                call.retry_after = decision.retry_after
            call.status = decision.status
            call.ended = self.traffic.now()
            status_line = f"HTTP/1.1 {decision.status} {_REASON_PHRASES.get(decision.status, 'Error')}"
            client.send_head(Head(status_line, headers), has_body=True)
            client.send_data(body)
            client.finish()
        return not head.has_token("Connection", "close")


def _empty_watch_head() -> Head:
    """The head of a watch answered here (an empty one, or one carrying an injected ERROR event)."""
    return Head(
        "HTTP/1.1 200 OK", [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
    )


def _named_by_body(request: ApiRequest, body: bytes) -> ApiRequest:
    """A create names its object in the body: take the name from there (JSON bodies)."""
    if not body.lstrip().startswith(b"{") or len(body) > 4 * 1024 * 1024:
        return request
    try:
        metadata = json.loads(body).get("metadata") or {}
    except (ValueError, AttributeError):
        return request
    name = metadata.get("name")
    if isinstance(name, str) and name:
        return dataclasses.replace(request, name=name)
    return request


_REASON_PHRASES = {
    409: "Conflict",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _status(request: ApiRequest, code: int, reason: str, retry_after: float | None) -> dict[str, object]:
    """A ``Status`` object like the API server's for this error."""
    what = request.qualified_resource or "the request"
    name = request.name or ""
    messages = {
        409: f'Operation cannot be fulfilled on {what} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        410: "too old resource version (injected by ktest)",
        429: "Too many requests, please try again later.",
    }
    details: dict[str, object] = {"name": name, "group": request.group, "kind": request.resource}
    if retry_after is not None:
        details["retryAfterSeconds"] = int(retry_after)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": messages.get(code, f"an error on the server ({reason}) injected by ktest"),
        "reason": "Expired" if code == 410 else reason,
        "details": details,
        "code": code,
    }
