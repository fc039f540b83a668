"""The API server's view for a timeline: one watch per resource, replayed from where the recording
began.

Every watch starts from the resourceVersion read when the recording started, so a watch opened
later (a resource first seen a second into the test) still delivers the writes made since the
start, in order, with the bodies the API server stored (what object diffs are computed from). A
watch whose start is too old for the server's watch cache (410 Gone) lists, then watches from the
list: the writes between the start and the list are then missing, which the page says.

A watch outlives an API server that goes away and comes back (a restart, an in-place upgrade): it
connects again, with a growing pause, for up to :data:`OUTAGE_LIMIT` seconds, and resumes from the
last resourceVersion it saw; each time it could not reach the server is kept in
:attr:`ResourceWatch.outages`, which the page shows as a gap in the API server's view.

A namespaced resource is watched in the namespaces the test and the operators work in, not across
the cluster: other tests' objects (other xdist workers, a session operator's) never reach the
recording. The watches are raw streams with the cluster's TLS and credentials, on a connection pool of their
own (one per cluster, its TLS context made once): a long-lived watch never holds one of the pool's
connections the test's requests need. Stopping a watch shuts its socket down at once, with no read
timeout to wait out.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import urllib3

from ktest.cluster.rest import auth_headers

if TYPE_CHECKING:
    from ktest.cluster import Cluster

_SERVER_TIMEOUT = 300
RESUMES = 3
"""A watch whose stream breaks this many times in a row (no event in between) gives up, unless
the API server has been away for less than :data:`OUTAGE_LIMIT` seconds."""
OUTAGE_LIMIT = 60.0
"""How long a watch keeps connecting again to an API server that went away (an upgrade's restart
takes a few seconds; a control plane's start timeout is of this order)."""
_RETRY_PAUSE_LIMIT = 0.5
UNREACHABLE = "the API server did not answer"
_NOT_READY = (429, 500, 502, 503, 504)
"""Answers of an API server that is starting (or too busy): the watch asks again, as after a break."""
_CONNECT_TIMEOUT = 5.0
_POOLS: weakref.WeakKeyDictionary[Any, urllib3.PoolManager] = weakref.WeakKeyDictionary()
"""The watches' connection pool of each cluster (dropped with the cluster)."""
_POOLS_LOCK = threading.Lock()


def watch_pool(cluster: Cluster) -> urllib3.PoolManager:
    """The connection pool the timeline's watches of ``cluster`` use (made on first use)."""
    from ktest.proxy.operator_proxy import upstream_of

    with _POOLS_LOCK:
        pool = _POOLS.get(cluster)
        if pool is None:
            upstream = upstream_of(cluster.api_client.configuration)
            hostname = upstream.server_hostname
            pool = urllib3.PoolManager(
                num_pools=2, maxsize=32, ssl_context=upstream.context, server_hostname=hostname
            )
            _POOLS[cluster] = pool
        return pool


@dataclass(frozen=True)
class ResourceKey:
    """A resource as its REST path names it: group ("" for core), version, plural; and the
    namespace watched (None: the whole cluster, for cluster-scoped objects)."""

    group: str
    version: str
    resource: str
    namespace: str | None = None

    def path(self) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        where = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{base}{where}/{self.resource}"

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass
class Seen:
    """One event a watch delivered: when it arrived (monotonic), its type and object."""

    arrived: float
    type: str
    obj: dict[str, Any]
    replayed: bool
    """Arrived in the first burst of a watch opened late: ``arrived`` is not when it happened."""


Sink = Callable[[ResourceKey, Seen], None]


class ResourceWatch:
    """A watch of one resource (in ``key.namespace``, or cluster-wide) on a thread, from
    ``resource_version`` on."""

    def __init__(
        self, cluster: Cluster, key: ResourceKey, resource_version: str, sink: Sink, *, late: bool
    ) -> None:
        self.cluster = cluster
        self.key = key
        self.resource_version = resource_version
        self.sink = sink
        self.late = late
        self.problem: str | None = None
        """Why the watch stopped before it was asked to (shown as where the recording stops)."""
        self.problem_at: float | None = None
        self.gap: str | None = None
        self.gap_at: float | None = None
        """When (monotonic) the watch found its writes since the start gone (a 410 on a resume)."""
        self.outages: list[tuple[float, float, str]] = []
        """(from, to, why), monotonic: each time the stream broke and the API server could not be
        reached (or did not serve the resource yet) until ``to``, when the watch resumed from its
        last resourceVersion."""
        self._refusal: str | None = None
        self.last_arrival = 0.0
        self.delivered = 0
        self._bodies: dict[tuple[str | None, str | None], dict[str, Any]] = {}
        """The newest body seen of each object (what a list after a 410 is compared with)."""
        self.connected = threading.Event()
        self._stopping = threading.Event()
        self._response: Any = None
        self.opened = 0.0
        """When the stream's headers came (monotonic): a late watch replays right after."""
        self._thread = threading.Thread(target=self._run, name=f"ktest-timeline-watch-{key}", daemon=True)

    def start(self) -> ResourceWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed
                response.shutdown()
        # not joined: a daemon thread, its socket shut; it ends on its own without a wait here

    # ------------------------------------------------------------ the stream

    def _run(self) -> None:
        """Stream until stopped; a stream that breaks resumes from the last resourceVersion seen
        (nothing is missed). It gives up only after :data:`RESUMES` breaks in a row with the API
        server away for :data:`OUTAGE_LIMIT` seconds."""
        failures = 0
        broken_at: float | None = None  # when the stream last broke without being asked to
        while not self._stopping.is_set():
            delivered = self.delivered
            try:
                status, body = self._stream(broken_at)
                if status == 410 and not self._stopping.is_set():
                    self._relist()  # a list that fails is a broken stream: tried again, then reported
            except Exception as error:
                if self._stopping.is_set():
                    break
                now = time.monotonic()
                broken_at = broken_at or now
                failures = 1 if self.delivered != delivered else failures + 1
                if failures > RESUMES and now - broken_at > OUTAGE_LIMIT:
                    self.problem = f"the watch of {self.key} ended: {type(error).__name__}: {error}"
                    self.problem_at = now
                    break
                self._stopping.wait(min(_RETRY_PAUSE_LIMIT, 0.05 * failures))
                continue
            if self._stopping.is_set():
                break
            now = time.monotonic()
            if status in _NOT_READY and now - (broken_at or now) <= OUTAGE_LIMIT:
                if broken_at is None:  # the server answers but does not serve this resource yet
                    self._refusal = f"the API server answered {status} to the watch of {self.key}"
                broken_at = broken_at or now  # a restarting API server answers before it serves
                self._stopping.wait(_RETRY_PAUSE_LIMIT)
                continue
            broken_at = None
            if status == 410:
                continue  # relisted: watch from the list's version
            if status in (404, 405):  # not watchable (a review, a virtual resource)
                break
            elif status is not None and status != 200:
                self.problem = f"the watch of {self.key} was refused: {status} {body[:200]!r}"
                self.problem_at = time.monotonic()
                break
            else:
                failures = 0
        self.connected.set()

    def _stream(self, broken_at: float | None = None) -> tuple[int | None, bytes]:
        """One watch request, read to its end; ``broken_at``: when the previous stream broke
        (an answer now ends that outage)."""
        configuration = self.cluster.api_client.configuration
        query = {
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(_SERVER_TIMEOUT),
        }
        url = configuration.host.rstrip("/") + self.key.path() + "?" + urlencode(query)
        headers = {"Accept": "application/json", **auth_headers(configuration)}
        pool = watch_pool(self.cluster)
        response = pool.request(
            "GET",
            url,
            headers=headers,
            preload_content=False,
            retries=False,
            timeout=urllib3.Timeout(connect=_CONNECT_TIMEOUT, read=None),
        )
        self._response = response
        if self._stopping.is_set():  # stopped while connecting: stop() found no response to shut
            response.release_conn()
            return None, b""
        self.opened = time.monotonic()
        self.connected.set()
        try:
            if response.status != 200:
                return response.status, response.read()
            if broken_at is not None:
                self.outages.append((broken_at, self.opened, self._refusal or UNREACHABLE))
            self._refusal = None
            pending = b""
            for chunk in response.stream(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        status = self._deliver(json.loads(line))
                        if status is not None:
                            return status, b""
            return None, b""
        except (urllib3.exceptions.HTTPError, OSError):
            if self._stopping.is_set():
                return None, b""
            raise
        finally:
            response.release_conn()

    def _deliver(self, event: dict[str, Any]) -> int | None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            return int(obj.get("code") or 500)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind == "BOOKMARK":
            return None
        now = time.monotonic()
        self.last_arrival = now
        self.delivered += 1
        meta = obj.get("metadata") or {}
        if kind == "DELETED":
            self._bodies.pop((meta.get("namespace"), meta.get("name")), None)
        else:
            self._bodies[(meta.get("namespace"), meta.get("name"))] = obj
        replayed = self.late and now - self.opened < 0.2
        self.sink(self.key, Seen(now, str(kind), obj, replayed))
        return None

    def _relist(self) -> None:
        """The server no longer has the writes since :attr:`resource_version` (410 Gone): list,
        deliver each object written since then once, as listed (``RELISTED``), and each object
        seen before that the list no longer has as ``DELETED``; then watch from the list."""
        since = self.resource_version
        answer = self.cluster.rest.request("GET", self.key.path())
        listed_version = str(answer["metadata"]["resourceVersion"])
        now = time.monotonic()
        found: set[tuple[str | None, str | None]] = set()
        changed = gone = 0
        kind = str(answer.get("kind") or "").removesuffix("List")
        for listed in answer.get("items") or ():
            item = {"apiVersion": answer.get("apiVersion"), "kind": kind, **listed}  # list items lack both
            meta = item.get("metadata") or {}
            found.add((meta.get("namespace"), meta.get("name")))
            version = str(meta.get("resourceVersion") or "")
            if not (version.isdigit() and since.isdigit()) or int(version) > int(since):
                changed += 1
                self._bodies[(meta.get("namespace"), meta.get("name"))] = item
                self.sink(self.key, Seen(now, "RELISTED", item, True))
        for where, body in list(self._bodies.items()):
            if where not in found:
                gone += 1
                del self._bodies[where]
                meta = {**(body.get("metadata") or {}), "resourceVersion": listed_version}
                deleted = {**body, "metadata": meta}
                self.sink(self.key, Seen(now, "DELETED", deleted, True))
        self.resource_version = listed_version
        if not changed and not gone:
            return  # nothing was written meanwhile: nothing is missing
        self.gap_at = now
        when = "while its watch was away" if self.outages else "before its watch opened"
        self.gap = (
            f"the API server no longer had the writes of {self.key} made {when} (410 Gone): a list "
            f"found {changed} changed and {gone} gone since resourceVersion {since}, each shown once "
            "as listed (RELISTED, DELETED); the versions in between are missing"
        )


def current_resource_version(cluster: Cluster) -> str:
    """The cluster's newest resourceVersion (a list of one namespace returns it)."""
    answer = cluster.rest.request("GET", "/api/v1/namespaces", query={"limit": 1})
    return str(answer["metadata"]["resourceVersion"])
