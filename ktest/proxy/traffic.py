"""The traffic record: every request an operator sent through its proxy, and what came back.

A :class:`Call` is one request (verb, resource, object, user agent, field manager), its answer
(status, latency), for a watch the events it delivered and how it ended, and the fault that
answered it if any. :class:`Traffic` is the thread-safe record tests filter and count::

    op.traffic.writes(kind="WebApp", name="shop")        # the operator's writes of one object
    op.traffic.per_second(verb="patch", window=2)         # its recent write rate
    op.traffic.calls(verb="watch", resource="webapps")    # every watch it opened
"""

from __future__ import annotations

import re
import struct
import threading
import time
import weakref
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields

from ktest.proxy.api_request import WRITE_VERBS, ApiRequest

TAIL_CALLS = 30
"""How many of the operator's last calls a failure report shows."""
MAX_CALLS = 50_000
"""The record keeps this many most recent calls (a long session's operator does not grow it forever)."""

_EVENT_TYPE = re.compile(rb'"type"\s*:\s*"([A-Z]+)"')
# The API server writes metadata's name (and generateName) before its namespace.
_EVENT_OBJECT = re.compile(
    rb'"metadata":\{"name":"([^"]+)"(?:,"generateName":"[^"]*")?(?:,"namespace":"([^"]*)")?'
)
MAX_EVENT_OBJECTS = 5000
"""Per watch: how many events' objects are remembered (namespace, name, when)."""

KindResolver = Callable[[str], set[str]]
"""Maps a kind (``WebApp``) to the resource names that serve it (``{"webapps"}``)."""

RequestObserver = Callable[[str, ApiRequest], None]
"""Told ``(operator name, request)`` of every request any operator's proxy records."""
_observers: list[RequestObserver] = []


def observe_requests(observer: RequestObserver) -> Callable[[], None]:
    """Call ``observer`` for every request every proxy records from now on (the door of an add-on
    that needs a whole session's requests, which no one record keeps: the RBAC audit). Returns
    the function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer) if observer in _observers else None


@dataclass(kw_only=True)
class Call(ApiRequest):
    """One request of the operator (its verb, resource, object... are the call's own) and its
    answer (mutable while a watch streams)."""

    at: float
    """Seconds since the record started (monotonic clock)."""
    user_agent: str = ""
    status: int | None = None
    """The answer's status code; None while waiting for it, or when the connection was reset."""
    latency: float | None = None
    """Seconds until the answer's headers arrived."""
    ended: float | None = None
    """When the answer (for a watch: the stream) ended, seconds since the record started."""
    events: int = 0
    """Watch events delivered to the operator."""
    event_types: dict[str, int] = field(default_factory=dict)
    event_objects: list[tuple[float, str | None, str]] = field(default_factory=list)
    """(when, namespace, name) of the objects the watch events were about (JSON streams)."""
    fault: str | None = None
    """The injected fault that answered (or delayed) this request, if any."""
    closed_by: str | None = None
    """Why a watch stream ended early: the fault that closed it, or "server"/"client"."""
    answered_by_fault: bool = False
    """The answer came from ktest (an injected error, 410 or reset), not from the API server."""
    refused: str | None = None
    """Why the proxy refused to forward the request and answered 400 itself: a head holding CR, LF
    or NUL (in the request line, a header name or value), which could smuggle a second request."""
    retry_after: float | None = None
    error: str | None = None
    protocol: str = "HTTP/1.1"
    """How the operator sent the request to the proxy: "HTTP/1.1", or "HTTP/2" (one stream)."""

    @classmethod
    def of(cls, request: ApiRequest, at: float, user_agent: str = "", protocol: str = "HTTP/1.1") -> Call:
        """The call of ``request``, sent ``at`` seconds into the record, not answered yet."""
        named = {part.name: getattr(request, part.name) for part in fields(ApiRequest)}
        return cls(**named, at=at, user_agent=user_agent, protocol=protocol)

    @property
    def request(self) -> ApiRequest:
        """The request alone, as the proxy named it (the call is that request)."""
        return self

    def object_key(self) -> tuple[str, str | None, str | None]:
        """(resource, namespace, name): the object a request is about."""
        return (self.resource, self.namespace, self.name)

    def describe(self, origin: float = 0.0) -> str:
        """``+1.23s patch webapps ns/shop (status) -> 409 [fault: conflict] 2.1ms``."""
        answer = "no answer" if self.status is None else str(self.status)
        if self.error:
            answer += f" ({self.error})"
        text = f"+{self.at - origin:.2f}s {self.verb_and_target()} -> {answer}"
        if self.latency is not None:
            text += f" {self.latency * 1000:.1f}ms"
        if self.is_watch:
            ended = "open" if self.ended is None else f"ended +{self.ended - origin:.2f}s"
            text += f", {self.events} events, {ended}"
            if self.closed_by:
                text += f" (closed by {self.closed_by})"
        if self.fault:
            text += f" [fault: {self.fault}]"
        if self.refused:
            text += f" [refused by the proxy: {self.refused}]"
        if self.user_agent:
            text += f" ua={self.user_agent.split(' ')[0]}"
        if self.field_manager:
            text += f" fm={self.field_manager}"
        return text


class EventCounter:
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


class Traffic:
    """Every call of one operator, in order; safe to read while the operator runs."""

    live: weakref.WeakSet[Traffic] = weakref.WeakSet()
    """Every record still in use (a timeline recording reads the operators running meanwhile)."""

    def __init__(self, name: str, resolve_kind: KindResolver | None = None) -> None:
        self.name = name
        self._resolve_kind = resolve_kind
        self._calls: list[Call] = []
        self._dropped = 0  # calls forgotten from the front; marks stay absolute positions
        self._watches: list[Call] = []  # the watch calls not seen ended yet (open_watches reads no other)
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self._notes: list[tuple[float, str]] = []
        Traffic.live.add(self)

    # ------------------------------------------------------------ recording

    def now(self) -> float:
        return time.monotonic() - self.started

    def begin(self, request: ApiRequest, user_agent: str, protocol: str = "HTTP/1.1") -> Call:
        call = Call.of(request, self.now(), user_agent=user_agent, protocol=protocol)
        for observer in tuple(_observers):
            observer(self.name, request)
        with self._lock:
            self._calls.append(call)
            if request.verb == "watch":
                self._watches.append(call)
            if len(self._calls) > MAX_CALLS:
                excess = len(self._calls) - MAX_CALLS // 2
                del self._calls[:excess]
                self._dropped += excess
        return call

    def note(self, text: str) -> None:
        """A line in the record (a fault injected or ended, a restart)."""
        with self._lock:
            self._notes.append((self.now(), text))

    # ------------------------------------------------------------ reading

    def notes(self) -> list[tuple[float, str]]:
        """The record's lines besides calls (faults injected or ended, restarts, HTTP/2
        connections refused), as (seconds since the record started, text), in order."""
        with self._lock:
            return list(self._notes)

    def __len__(self) -> int:
        """Calls recorded so far (forgotten ones included)."""
        with self._lock:
            return self._dropped + len(self._calls)

    def mark(self) -> int:
        """A position in the record: ``calls(since=mark)`` returns what came after it."""
        return len(self)

    def calls(
        self,
        *,
        verb: str | Iterable[str] | None = None,
        resource: str | None = None,
        kind: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        since: int = 0,
        faulted: bool | None = None,
    ) -> list[Call]:
        """The calls matching every filter given (``subresource=""`` means the object itself)."""
        verbs = {verb} if isinstance(verb, str) else set(verb) if verb is not None else None
        resources = self._resources(resource, kind)
        with self._lock:
            calls = self._calls[max(0, since - self._dropped) :]
        found = []
        for call in calls:
            request = call.request
            if verbs is not None and request.verb not in verbs:
                continue
            if resources is not None and not {request.resource, request.qualified_resource} & resources:
                continue
            if namespace is not None and request.namespace != namespace:
                continue
            if name is not None and request.name != name:
                continue
            if subresource is not None and (request.subresource or "") != subresource:
                continue
            if faulted is not None and (call.fault is not None) != faulted:
                continue
            found.append(call)
        return found

    def writes(
        self,
        *,
        kind: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        since: int = 0,
    ) -> list[Call]:
        """The operator's writes (create, update, patch, delete), optionally of one kind or object."""
        return self.calls(
            verb=WRITE_VERBS, kind=kind, resource=resource, namespace=namespace, name=name, since=since
        )

    def count(self, **filters: object) -> int:
        return len(self.calls(**filters))  # type: ignore[arg-type]

    def per_second(self, *, window: float | None = None, **filters: object) -> float:
        """Requests per second matching ``filters``: over the last ``window`` seconds, or since the
        record started."""
        now = self.now()
        start = 0.0 if window is None else max(0.0, now - window)
        span = max(now - start, 1e-3)
        matching = [call for call in self.calls(**filters) if call.at >= start]  # type: ignore[arg-type]
        return len(matching) / span

    def events_about(
        self, namespace: str | None, name: str, *, after: float = 0.0, before: float | None = None
    ) -> list[tuple[float, str]]:
        """Watch events delivered to the operator about objects named ``namespace/name`` (any
        kind: an owner and its children often share a name), as (when, watched resource)."""
        found = []
        for call in self.calls(verb="watch"):
            for at, event_namespace, event_name in list(call.event_objects):
                if (
                    event_name == name
                    and event_namespace == namespace
                    and at > after
                    and (before is None or at < before)
                ):
                    found.append((at, call.request.resource))
        return sorted(found)

    def open_watches(self, resource: str | None = None) -> list[Call]:
        """The watches still streaming (of ``resource``), oldest first."""
        resources = self._resources(resource, None)
        with self._lock:
            self._watches = [call for call in self._watches if call.ended is None]
            calls = list(self._watches)
        if resources is None:
            return calls
        return [
            call for call in calls if resources & {call.request.resource, call.request.qualified_resource}
        ]

    def last(self, count: int = TAIL_CALLS, *, since: int = 0) -> list[Call]:
        with self._lock:
            start = max(since - self._dropped, len(self._calls) - count, 0)
            return self._calls[start:]

    def describe(
        self, calls: Iterable[Call] | None = None, *, limit: int = TAIL_CALLS, since: int = 0
    ) -> str:
        """The calls (default: the last ``limit``) one per line, with the notes in between."""
        chosen = list(calls) if calls is not None else self.last(limit, since=since)
        total = len(chosen)
        shown = chosen[-limit:]
        if not shown:
            notes = self.notes() if calls is None else []  # e.g. an HTTP/2 connection refused
            return "\n".join(
                ["(no API calls recorded)", *(f"  +{at:.2f}s ---- {text} ----" for at, text in notes)]
            )
        first = shown[0].at
        with self._lock:
            notes = [(at, text) for at, text in self._notes if at >= first]
        lines: list[tuple[float, str]] = [(call.at, "  " + call.describe()) for call in shown]
        lines += [(at, f"  +{at:.2f}s ---- {text} ----") for at, text in notes]
        lines.sort(key=lambda item: item[0])
        head = f"{total - len(shown)} earlier calls not shown\n" if total > len(shown) else ""
        return head + "\n".join(text for _, text in lines)

    def summary(self, *, since: int = 0) -> str:
        """Counts per verb and resource: ``patch webapps x12, watch webapps x3``."""
        calls = self.calls(since=since)
        counts = Counter(f"{call.verb} {call.request.resource or call.request.path}" for call in calls)
        return ", ".join(f"{key} x{count}" for key, count in counts.most_common()) or "no calls"

    def _resources(self, resource: str | None, kind: str | None) -> set[str] | None:
        if resource is None and kind is None:
            return None
        names: set[str] = set()
        if resource is not None:
            names.add(resource)
        if kind is not None:
            if self._resolve_kind is None:
                names.add(kind.lower() + "s")
            else:
                names |= self._resolve_kind(kind)
        return names
