"""Make the operator's next updates of an object conflict, deterministically.

A timing-based concurrent writer catches a controller that mishandles 409
Conflict only when one of its writes happens to land between the operator's
read and its update; an operator whose read-to-update window is a few
milliseconds is almost never caught. A :class:`ConflictInjector` closes that
gap from inside the operator's own HTTP client: while armed, every PUT or
PATCH of the object (or its ``/status``) sent by another thread of this
process first lets ktest write the object (an annotation, ``ktest/conflict``),
then sends the operator's request unchanged. An update carrying the
resourceVersion it read therefore gets a real 409 from the real API server,
every time; a write without one (merge patch, server-side apply) does not,
and the injector says so.

Hooks: ``urllib3`` (the official ``kubernetes`` client, ktest's own
``Cluster``) and ``aiohttp`` (kopf), whether they talk to the API server or to
the operator's proxy (``ktest.proxy``). Only in-process operators can be reached
this way; for a subprocess (a Go manager) use the proxy's fault rules
(``ktest.faults.conflict``). Writes from the thread that armed the injector (the test), from
ktest's helper threads (named ``ktest-...``) and within :func:`exempt` (an async trigger) are
never intercepted.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ktest.cluster.refs import ObjectRef, RefLike, as_ref

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

CONFLICT_ANNOTATION = "ktest/conflict"
_EXEMPT: ContextVar[bool] = ContextVar("ktest_conflict_injection_exempt", default=False)
_WRITES = frozenset({"PUT", "PATCH"})
_MAX_INJECTIONS = 50


@dataclass(frozen=True)
class Interception:
    """One write of the object by the operator, with ktest's write slipped in before it."""

    at: float
    method: str
    path: str
    thread: str
    status: int | None
    error: str = ""

    def describe(self) -> str:
        result = f"{self.status}" if self.status is not None else f"failed: {self.error}"
        if self.status == 409:
            result = "409 Conflict"
        return f"+{self.at:.2f}s {self.method} {self.path} from thread {self.thread!r} -> {result}"


class ConflictInjector:
    """Slip a write of ``obj`` in right before each of the operator's next updates of it.

    At most ``conflicts`` 409s are provoked (and at most 50 writes slipped in);
    use it as a context manager around the code during which the operator
    updates the object.
    """

    _lock = threading.Lock()
    _active: list[ConflictInjector] = []
    _saved: dict[str, Any] = {}
    _local = threading.local()

    def __init__(self, cluster: Cluster, obj: RefLike, *, conflicts: int = 3) -> None:
        if conflicts < 1:
            raise ValueError(f"conflicts must be at least 1, not {conflicts!r}")
        self.cluster = cluster
        self.ref: ObjectRef = as_ref(obj)
        self.conflicts = conflicts
        info = cluster.info(self.ref.api_version, self.ref.kind)
        self.path = info.path(self.ref.namespace, self.ref.name)
        server = urlsplit(str(cluster.api_client.configuration.host))
        self._host = (server.hostname or "", server.port or (443 if server.scheme == "https" else 80))
        self._prefix = server.path.rstrip("/")
        self.interceptions: list[Interception] = []
        self._started = 0.0
        self._owner: threading.Thread | None = None
        self._armed = False
        self._guard = threading.Lock()

    # ------------------------------------------------------------ results

    @property
    def provoked(self) -> int:
        """How many of the operator's updates got 409 Conflict because of a slipped-in write."""
        return sum(1 for item in self.interceptions if item.status == 409)

    @property
    def unconditional(self) -> int:
        """Operator writes that went through despite the slipped-in write (no resourceVersion)."""
        return sum(1 for item in self.interceptions if item.status is not None and item.status < 300)

    def summary(self) -> str:
        if not self.interceptions:
            return (
                "the operator never wrote the object from this process while conflicts were armed, so it "
                "never met a 409 (a subprocess operator cannot be reached; or nothing made it write: pass "
                "trigger=, e.g. a spec change)"
            )
        text = (
            f"{len(self.interceptions)} operator writes of the object had a ktest write slipped in first; "
            f"{self.provoked} got 409 Conflict"
        )
        if not self.provoked:
            text += (
                ": the operator never met a 409, since its writes carry no resourceVersion (merge patch "
                "or apply: last writer wins), so conflicts could not be shown"
            )
        return text

    def lines(self) -> list[str]:
        return [self.summary(), *(item.describe() for item in self.interceptions[:10])]

    # ------------------------------------------------------------ arming

    def __enter__(self) -> ConflictInjector:
        self._owner = threading.current_thread()
        self._started = time.monotonic()
        self._armed = True
        with ConflictInjector._lock:
            if not ConflictInjector._active:
                _install()
            ConflictInjector._active.append(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._armed = False
        with ConflictInjector._lock:
            ConflictInjector._active.remove(self)
            if not ConflictInjector._active:
                _uninstall()

    # ------------------------------------------------------------ the hook

    def _wants(self, method: str, host: str, port: int | None, url: str) -> str | None:
        """The request path if this is an operator's update of the object to conflict, else None."""
        if not self._armed or method.upper() not in _WRITES:
            return None
        thread = threading.current_thread()
        if thread is self._owner or thread.name.startswith("ktest-"):
            return None
        if (host, port) != self._host:
            from ktest.proxy.endpoints import upstream_of

            if upstream_of(host, port) != self._host:  # nor an operator proxy in front of it
                return None
        path = urlsplit(url).path
        if self._prefix and path.startswith(self._prefix):
            path = path[len(self._prefix) :]
        if path not in (self.path, self.path + "/status"):
            return None
        with self._guard:
            if self.provoked >= self.conflicts or len(self.interceptions) >= _MAX_INJECTIONS:
                return None
        return path

    def _slip_in(self) -> str:
        """ktest's own write of the object (an annotation); "" or why it failed."""
        ConflictInjector._local.bypass = True
        try:
            self.cluster.patch(
                self.ref, {"metadata": {"annotations": {CONFLICT_ANNOTATION: secrets.token_hex(4)}}}
            )
            return ""
        except Exception as error:  # the object is gone, or ktest may not write it: say so
            return f"{type(error).__name__}: {error}"
        finally:
            ConflictInjector._local.bypass = False

    def _record(self, method: str, path: str, status: int | None, error: str = "") -> None:
        with self._guard:
            self.interceptions.append(
                Interception(
                    time.monotonic() - self._started,
                    method.upper(),
                    path,
                    threading.current_thread().name,
                    status,
                    error,
                )
            )


@contextmanager
def exempt() -> Iterator[None]:
    """The test's own writes: none made in this context is intercepted, nor in the coroutines and
    threads it starts (they copy the context: an async trigger run on the test's event loop)."""
    token = _EXEMPT.set(True)
    try:
        yield
    finally:
        _EXEMPT.reset(token)


def _injector_for(method: str, host: str, port: int | None, url: str) -> tuple[ConflictInjector, str] | None:
    if getattr(ConflictInjector._local, "bypass", False) or _EXEMPT.get():
        return None
    for injector in list(ConflictInjector._active):
        path = injector._wants(method, host, port, url)
        if path is not None:
            return injector, path
    return None


def _install() -> None:
    import urllib3.connectionpool

    original = urllib3.connectionpool.HTTPConnectionPool.urlopen
    ConflictInjector._saved["urllib3"] = original

    def urlopen(pool: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        found = _injector_for(method, pool.host, pool.port, url)
        if found is None:
            return original(pool, method, url, *args, **kwargs)
        injector, path = found
        problem = injector._slip_in()
        ConflictInjector._local.bypass = True  # a retry inside urllib3 is the same request
        try:
            response = original(pool, method, url, *args, **kwargs)
        finally:
            ConflictInjector._local.bypass = False
        injector._record(method, path, None if problem else response.status, problem)
        return response

    urllib3.connectionpool.HTTPConnectionPool.urlopen = urlopen  # type: ignore[method-assign,assignment]

    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        original_request = aiohttp.ClientSession._request
        ConflictInjector._saved["aiohttp"] = original_request

        async def request(session: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any) -> Any:
            target = urlsplit(str(str_or_url))
            found = _injector_for(method, target.hostname or "", target.port, str(str_or_url))
            if found is None:
                return await original_request(session, method, str_or_url, *args, **kwargs)
            injector, path = found
            problem = injector._slip_in()  # blocking, a few milliseconds, in the operator's loop
            response = await original_request(session, method, str_or_url, *args, **kwargs)
            injector._record(method, path, None if problem else response.status, problem)
            return response

        aiohttp.ClientSession._request = request


def _uninstall() -> None:
    import urllib3.connectionpool

    original = ConflictInjector._saved.pop("urllib3", None)
    if original is not None:
        urllib3.connectionpool.HTTPConnectionPool.urlopen = original  # type: ignore[method-assign]
    original_request = ConflictInjector._saved.pop("aiohttp", None)
    aiohttp = sys.modules.get("aiohttp")
    if original_request is not None and aiohttp is not None:
        aiohttp.ClientSession._request = original_request
