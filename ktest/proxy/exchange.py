"""One request of the operator, whatever carries it: named, recorded in the traffic, held,
answered by a fault or forwarded to the API server, and its answer relayed as it arrives.

A chunked answer (every watch) is forwarded chunk by chunk, so a watch event reaches the operator
as soon as the API server sends it. Both sides of the proxy stand on this module: ``server``
(HTTP/1.1 connections) and ``http2`` (one ``exchange`` per stream); a ``ClientSide`` says how an
answer is written back, so neither side imports the other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import IO, TYPE_CHECKING, Protocol

from ktest.proxy.api_request import ApiRequest, parse_request
from ktest.proxy.faults import WatchStream
from ktest.proxy.http1 import (
    COPY,
    Head,
    ProxyProtocolError,
    buffered_reader,
    chunk_size,
    read_exactly,
    read_head,
    read_trailer,
)
from ktest.proxy.traffic import EventCounter

if TYPE_CHECKING:
    from ktest.proxy.faults import Decision, FaultSet
    from ktest.proxy.traffic import Call, Traffic

_HOP_BY_HOP = frozenset({"proxy-connection", "keep-alive", "te", "trailer", "proxy-authorization"})
_NO_BODY_STATUS = frozenset({204, 304})


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


class Forwarder:
    """What every request of the operator goes through, on either protocol: ``exchange`` names it,
    records it in ``traffic``, applies ``faults`` and forwards it to ``upstream``."""

    def __init__(self, name: str, upstream: Upstream, traffic: Traffic, faults: FaultSet) -> None:
        self.name = name
        self.upstream = upstream
        self.traffic = traffic
        self.faults = faults
        self._closing = threading.Event()
        self.errors: list[str] = []
        """Unexpected errors of connection threads (the connection was closed); empty normally."""

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
        if request.problem is not None:
            return self._refuse(side, call, request.problem, why=_UNNAMEABLE, label="malformed-path")
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
                call.latency = time.monotonic() - started
                self._answer_watch(side, call, watch.cut_by)
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
                        call.latency = time.monotonic() - started
                        self._answer_watch(side, call, watch.cut_by)
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
        status = call.status = answer.status
        if answer.get("Retry-After"):
            with contextlib.suppress(ValueError):
                call.retry_after = float(answer.get("Retry-After"))
        closing = request_head.has_token("Connection", "close") or answer.has_token("Connection", "close")
        if status == 101:
            client.send_head(answer, has_body=False)
            client.splice(upstream, reader)
            call.ended = self.traffic.now()
            return False, False
        has_body = not (
            request_head.first.startswith("HEAD ") or status in _NO_BODY_STATUS or 100 <= status < 200
        )
        client.send_head(answer, has_body=has_body)
        keep = usable = not closing
        length = answer.get("Content-Length")
        if has_body and answer.get("Transfer-Encoding").lower() == "chunked":
            # A watch cut by a fault ends cleanly for the operator, whose connection stays usable;
            # the API server's connection is spent (it was in the middle of an answer).
            usable = self._relay_chunked(client, reader, answer, call, watch) and keep
        else:
            if has_body and length:
                remaining = int(length)
                while remaining:
                    data = reader.read(min(COPY, remaining))
                    if not data:
                        raise ProxyProtocolError("the API server ended an answer early")
                    client.send_data(data)
                    remaining -= len(data)
            elif has_body:  # delimited by the end of the connection
                keep = usable = False
                while data := getattr(reader, "read1", reader.read)(COPY):
                    client.send_data(data)
            client.finish()
        call.ended = self.traffic.now()
        return keep, usable

    def _answer_watch(
        self, client: ClientSide, call: Call, closed_by: str, event: bytes = b"", fault: str | None = None
    ) -> None:
        """Answer a watch here: 200, ``event`` if any, and the end of the stream. A watch cut before
        the API server answered it ends so, empty, as a watch the server ends (the operator watches
        again, as it would then)."""
        call.status = 200
        call.closed_by = closed_by
        call.ended = self.traffic.now()
        headers = [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
        if fault is not None:
            headers.append(("X-Ktest-Fault", fault))
        client.send_head(Head("HTTP/1.1 200 OK", headers), has_body=True)
        client.send_data(event)
        client.finish()

    def _relay_chunked(
        self, client: ClientSide, reader: IO[bytes], answer: Head, call: Call, watch: WatchStream | None
    ) -> bool:
        """Forward chunks as they arrive; False if the stream was cut (the upstream connection is spent)."""
        counter = None
        if watch is not None:
            counter = EventCounter(answer.get("Content-Type"), answer.get("Content-Encoding"))
        while True:
            try:
                size_line = reader.readline(1024)
                if not size_line:
                    raise ProxyProtocolError("the API server ended a stream early")
                size = chunk_size(size_line)
                if size == 0:
                    client.finish(read_trailer(reader))
                    if watch is not None and call.closed_by is None:
                        call.closed_by = "server"
                    return True
                data = read_exactly(reader, size)
                reader.readline(1024)
            except (OSError, ValueError, ProxyProtocolError):
                if watch is None or watch.cut_by is None:
                    raise
            if watch is not None and watch.cut_by is not None:
                call.closed_by = watch.cut_by
                client.finish()  # the stream ends cleanly, as when the server ends it
                return False
            client.send_data(data)
            if counter is not None:
                counter.feed(data, call, self.traffic.now())

    # ------------------------------------------------------------ answers made here

    def _refuse(
        self, client: ClientSide, call: Call, problem: str, why: str = "", label: str = "malformed-head"
    ) -> bool:
        """Answer 400 to a request that cannot be forwarded as sent (see ``Head.problem``, and
        ``ApiRequest.problem``), and record why; nothing reaches the API server. The operator's
        connection is not kept: its framing is in doubt."""
        call.refused = problem
        call.status = 400
        call.latency = 0.0
        call.ended = self.traffic.now()
        why = why or (
            "A CR, LF or NUL in a request head would let it carry a second request past the traffic record"
        )
        message = f"ktest's operator proxy did not forward this request: {problem}. {why}"
        status = _failure(400, "BadRequest", message)
        _send_status(client, status, [("Connection", "close"), ("X-Ktest-Refused", label)])
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
            call.events = 1
            call.event_types = {"ERROR": 1}
            self._answer_watch(client, call, decision.label, event + b"\n", fault=decision.label)
        else:
            headers = [("X-Ktest-Fault", decision.label)]
            if decision.retry_after is not None:
                headers.append(("Retry-After", f"{decision.retry_after:g}"))
                call.retry_after = decision.retry_after
            call.status = decision.status
            call.ended = self.traffic.now()
            _send_status(client, status_body, headers)
        return not head.has_token("Connection", "close")


_UNNAMEABLE = "The traffic record names a request by its path, read as the API server reads it"


def _send_status(client: ClientSide, status: dict[str, object], headers: list[tuple[str, str]]) -> None:
    """Answer with a ``Status`` object made here, its code as the HTTP status."""
    body = json.dumps(status, separators=(",", ":")).encode()
    code = int(str(status["code"]))
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Error"
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers]
    client.send_head(Head(f"HTTP/1.1 {code} {phrase}", headers), has_body=True)
    client.send_data(body)
    client.finish()


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
    message = messages.get(code, f"an error on the server ({reason}) injected by ktest")
    return _failure(code, "Expired" if code == 410 else reason, message, details)


def _failure(
    code: int, reason: str, message: str, details: dict[str, object] | None = None
) -> dict[str, object]:
    """A failure ``Status`` object, its fields in the API server's order."""
    status: dict[str, object] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": reason,
    }
    if details is not None:
        status["details"] = details
    return {**status, "code": code}
