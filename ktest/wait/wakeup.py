"""Watch-driven wake-up: end a check's sleep as soon as an object it read changes.

Each cluster gets one :class:`WatchHub`.  The hub runs one watch thread per
(api_version, kind, namespace), started the first time a waiting check needs it
and kept for reuse until it has been idle for a while or the cluster is closed
(:func:`close_hub`).  Every event is stamped with the time it arrived and kept in
a short log, so a waiter can ask "did anything I read change since my attempt
started?" without a race between the attempt and the sleep.

A watch begins from a fresh list (its resourceVersion), restarts from a fresh list
when the server says the version expired (410 Gone), and announces every (re)start
as a change of the whole watched namespace: events may have been missed, so
waiters re-evaluate once.  A false wake-up costs one extra evaluation; a missed
one costs at most one poll interval, because the sleep never outlasts it.

The hub only uses ``cluster.resource(api_version, kind)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from ktest.cluster.reads import ReadTarget

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 30.0
"""Seconds a watch nobody waits on is kept before it is stopped."""

SERVER_TIMEOUT = 50
"""timeoutSeconds of each watch request; the watch resumes from its last version after."""

RETRY_FAILED_AFTER = 30.0
"""Seconds before a watch that was refused (401/403) is tried again."""

LOG_SIZE = 4096
"""Changes remembered per hub for ``changed_since``; older ones count as "maybe changed"."""

_CLOSE_GRACE = 5.0
_MAX_BACKOFF = 5.0

Callback = Callable[[], None]
ClusterTargets = Sequence[tuple[Any, Iterable[ReadTarget]]]


@functools.cache
def _bookmark_arguments() -> dict[str, bool]:
    """Ask for bookmarks (fewer relists after a 410) where the dynamic client can: its
    ``watch()`` takes ``allow_watch_bookmarks`` from kubernetes 32 on."""
    from kubernetes.dynamic import DynamicClient

    takes = "allow_watch_bookmarks" in inspect.signature(DynamicClient.watch).parameters
    return {"allow_watch_bookmarks": True} if takes else {}


@dataclass(frozen=True)
class _Change:
    """A watch event (``name=None``: the whole watch restarted, anything may have changed)."""

    at: float
    api_version: str
    kind: str
    namespace: str | None
    name: str | None


class Subscription:
    """A waiter's interest in some targets; ``callback`` runs on a watch thread."""

    def __init__(self, targets: frozenset[ReadTarget], callback: Callback) -> None:
        self.targets = targets
        self.callback = callback
        self.watches: list[_Watch] = []

    def matches(self, change: _Change) -> bool:
        return any(
            t.overlaps(change.api_version, change.kind, change.namespace, change.name)
            for t in self.targets
        )

    def notify(self) -> None:
        try:
            self.callback()
        except Exception:  # a waiter that went away must not kill the watch thread
            log.debug("wake-up callback failed", exc_info=True)


class _Watch:
    """One thread streaming the events of (api_version, kind, namespace)."""

    def __init__(self, hub: WatchHub, api_version: str, kind: str, namespace: str | None) -> None:
        self.hub = hub
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.users = 0
        self.last_used = time.monotonic()
        self.synced = threading.Event()
        self.lists = 0  # fresh lists taken so far: the first, then one per expiry (410)
        self.failure: str | None = None
        self.failed_at = 0.0
        self._stopping = threading.Event()
        self._watcher: k8s_watch.Watch | None = None
        where = namespace or "all namespaces"
        self._thread = threading.Thread(
            target=self._run, name=f"ktest-watch {api_version} {kind} in {where}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping.is_set()

    def stop(self) -> None:
        """Ask the thread to end; interrupts a blocked read by shutting its socket."""
        self._stopping.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.stop()

    def join(self, deadline: float) -> None:
        # The stream may not have opened its response yet when stop() ran, so keep asking.
        while self._thread.is_alive() and time.monotonic() < deadline:
            self.stop()
            self._thread.join(0.05)

    def _run(self) -> None:
        resource_version: str | None = None
        backoff = 0.05
        expired_in_a_row = False
        while not self._stopping.is_set():
            try:
                resource = self._resource()
                if resource is None:
                    return
                if resource_version is None:
                    listing = resource.get(namespace=self.namespace, limit=1)
                    resource_version = listing.metadata.resourceVersion
                    self.hub.publish(self.api_version, self.kind, self.namespace, None)
                    self.lists += 1
                self.synced.set()
                resource_version = self._stream(resource, resource_version)
                backoff = 0.05
                expired_in_a_row = False
                continue
            except ApiException as exc:
                if self._stopping.is_set():
                    return
                if exc.status == 410:  # expired: list again, at once the first time
                    resource_version = None
                    if not expired_in_a_row:
                        expired_in_a_row = True
                        continue
                elif exc.status in (401, 403):
                    self.failure = f"{exc.status} {exc.reason}: not allowed to list/watch"
                    self.failed_at = time.monotonic()
                    log.info("ktest wake-up disabled for %s %s: %s", self.api_version,
                             self.kind, self.failure)
                    return
            except Exception as exc:
                if self._stopping.is_set():
                    return
                log.debug("ktest watch of %s %s failed: %r", self.api_version, self.kind, exc)
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def _resource(self) -> Any:
        cluster = self.hub.cluster
        if cluster is None:
            return None
        with self.hub.discovery_lock:  # the dynamic client's discovery cache is not thread-safe
            return cluster.resource(self.api_version, self.kind)

    def _stream(self, resource: Any, resource_version: str) -> str:
        """Publish events until the request times out; return the version reached."""
        watcher = k8s_watch.Watch()
        self._watcher = watcher
        try:
            if self._stopping.is_set():
                return resource_version
            for event in resource.watch(
                namespace=self.namespace,
                resource_version=resource_version,
                timeout=SERVER_TIMEOUT,
                watcher=watcher,
                **_bookmark_arguments(),
            ):
                if self._stopping.is_set():
                    break
                metadata = (event.get("raw_object") or {}).get("metadata") or {}
                resource_version = metadata.get("resourceVersion") or resource_version
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self.hub.publish(
                        self.api_version, self.kind, metadata.get("namespace"), metadata.get("name")
                    )
        finally:
            self._watcher = None
        return resource_version


class WatchHub:
    """The watches of one cluster and the waiters listening to them."""

    def __init__(self, cluster: Any, *, idle_timeout: float = IDLE_TIMEOUT) -> None:
        try:
            self._cluster_ref: Callable[[], Any] = weakref.ref(cluster)
            self.holds_weak_ref = True
        except TypeError:
            self._cluster_ref = lambda: cluster
            self.holds_weak_ref = False
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self.discovery_lock = threading.Lock()
        self._watches: dict[tuple[str, str, str | None], _Watch] = {}
        self._subscriptions: set[Subscription] = set()
        self._log: deque[_Change] = deque(maxlen=LOG_SIZE)
        self._forgotten_before = float("-inf")
        self.closed = False

    @property
    def cluster(self) -> Any:
        """The cluster, or None once it has been garbage-collected."""
        return self._cluster_ref()

    def subscribe(self, targets: Iterable[ReadTarget], callback: Callback) -> Subscription:
        """Call ``callback`` on each change overlapping ``targets``; starts missing watches."""
        subscription = Subscription(frozenset(targets), callback)
        with self._lock:
            if self.closed:
                return subscription
            self._reap_idle()
            self._subscriptions.add(subscription)
            for target in subscription.targets:
                found = self._watch_for(target)
                found.users += 1
                subscription.watches.append(found)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        now = time.monotonic()
        with self._lock:
            self._subscriptions.discard(subscription)
            for used in subscription.watches:
                used.users -= 1
                used.last_used = now
            subscription.watches.clear()

    def changed_since(self, targets: Iterable[ReadTarget], since: float) -> bool:
        """Whether a change overlapping ``targets`` arrived at or after ``since``."""
        probe = Subscription(frozenset(targets), lambda: None)
        with self._lock:
            if since <= self._forgotten_before:
                return True
            for change in reversed(self._log):
                if change.at < since:
                    return False
                if probe.matches(change):
                    return True
        return False

    def watches(self) -> dict[tuple[str, str, str | None], _Watch]:
        """The current watches by (api_version, kind, namespace); for diagnostics and tests."""
        with self._lock:
            return dict(self._watches)

    def problems(self, targets: Iterable[ReadTarget]) -> list[str]:
        """Why some targets get no wake-up (for failure messages)."""
        found = []
        with self._lock:
            for target in targets:
                current = self._watches.get((target.api_version, target.kind, target.namespace))
                if current is not None and current.failure:
                    found.append(f"{target}: {current.failure}")
        return found

    def publish(self, api_version: str, kind: str, namespace: str | None, name: str | None) -> None:
        """Record a change and wake the subscribers it concerns (called by watch threads)."""
        change = _Change(time.monotonic(), api_version, kind, namespace or None, name or None)
        with self._lock:
            if self.closed:
                return
            if len(self._log) == self._log.maxlen:
                self._forgotten_before = self._log[0].at
            self._log.append(change)
            woken = [s for s in self._subscriptions if s.matches(change)]
        for subscription in woken:
            subscription.notify()

    def close(self, *, wait: bool = True) -> None:
        """Stop every watch (joining their threads when ``wait``) and wake all waiters."""
        with self._lock:
            self.closed = True
            watches = list(self._watches.values())
            self._watches.clear()
            subscriptions = list(self._subscriptions)
            self._subscriptions.clear()
        for running in watches:
            running.stop()
        if wait:
            deadline = time.monotonic() + _CLOSE_GRACE
            for running in watches:
                running.join(deadline)
        for subscription in subscriptions:
            subscription.notify()

    def _watch_for(self, target: ReadTarget) -> _Watch:
        """A running watch covering ``target``, started now if there is none (lock held)."""
        if target.namespace is not None:
            cluster_wide = self._watches.get((target.api_version, target.kind, None))
            if cluster_wide is not None and cluster_wide.alive and not cluster_wide.failure:
                return cluster_wide
        key = (target.api_version, target.kind, target.namespace)
        current = self._watches.get(key)
        if current is not None:
            retry_failed = (
                current.failure is not None
                and time.monotonic() - current.failed_at > RETRY_FAILED_AFTER
            )
            if (current.alive or current.failure) and not retry_failed:
                return current
            current.stop()
        started = _Watch(self, *key)
        self._watches[key] = started
        started.start()
        return started

    def _reap_idle(self) -> None:
        now = time.monotonic()
        for key, running in list(self._watches.items()):
            if running.users == 0 and now - running.last_used > self._idle_timeout:
                running.stop()
                del self._watches[key]


_registry_lock = threading.Lock()
_hubs: dict[int, WatchHub] = {}
"""Hub per live cluster, keyed by id(cluster); an entry goes when its cluster is
garbage-collected, so nothing outlives the cluster it belongs to."""


def hub_for(cluster: Any) -> WatchHub | None:
    """The hub of ``cluster`` (created on first use), or None if it cannot watch."""
    if not callable(getattr(cluster, "resource", None)):
        return None
    key = id(cluster)
    with _registry_lock:
        hub = _hubs.get(key)
        if hub is not None and hub.cluster is cluster:
            return hub
        if hub is not None:
            hub.close(wait=False)
        hub = WatchHub(cluster)
        _hubs[key] = hub
        if hub.holds_weak_ref:
            weakref.finalize(cluster, _forget, key, hub)
        on_close = getattr(cluster, "on_close", None)
        if callable(on_close):
            on_close(functools.partial(close_hub, cluster))
        return hub


def close_hub(cluster: Any) -> None:
    """Stop the watch threads of ``cluster``; ``Cluster.close()`` calls this.

    Later checks against the closed cluster poll without watching.
    """
    with _registry_lock:
        hub = _hubs.get(id(cluster))
        if hub is None or hub.cluster is not cluster:
            return
        if not hub.holds_weak_ref:
            del _hubs[id(cluster)]
    hub.close()


def _forget(key: int, hub: WatchHub) -> None:
    with _registry_lock:
        if _hubs.get(key) is hub:
            del _hubs[key]
    hub.close(wait=False)


@contextlib.contextmanager
def _subscribed(targets: ClusterTargets, callback: Callback) -> Iterator[Callable[[float], bool]]:
    """Subscribe ``callback`` to ``targets`` on their clusters' hubs while in the block;
    yields "did one of them change at or after this time?"."""
    subscribed = []
    for cluster, cluster_targets in targets:
        hub = hub_for(cluster)
        if hub is not None and not hub.closed:
            subscribed.append((hub, hub.subscribe(cluster_targets, callback)))
    try:
        yield lambda since: any(hub.changed_since(sub.targets, since) for hub, sub in subscribed)
    finally:
        for hub, subscription in subscribed:
            hub.unsubscribe(subscription)


def wait_for_change(targets: ClusterTargets, since: float, timeout: float) -> bool:
    """Sleep up to ``timeout`` seconds, returning True early once one of ``targets``
    (pairs of cluster and read targets) changed at or after ``since`` (a
    ``time.monotonic()`` value)."""
    woken = threading.Event()
    with _subscribed(targets, woken.set) as changed_since:
        return changed_since(since) or woken.wait(timeout)  # nothing watched: a plain sleep


async def async_wait_for_change(targets: ClusterTargets, since: float, timeout: float) -> bool:
    """:func:`wait_for_change` for asyncio: the event loop keeps running meanwhile."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed after the wait ended
            loop.call_soon_threadsafe(woken.set)

    with _subscribed(targets, wake) as changed_since:
        if changed_since(since):
            return True
        try:  # nothing watched: a plain sleep
            await asyncio.wait_for(woken.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


def describe_problems(targets: ClusterTargets) -> list[str]:
    """Targets whose watch was refused, for a failure message."""
    found: list[str] = []
    for cluster, cluster_targets in targets:
        with _registry_lock:
            hub = _hubs.get(id(cluster))
        if hub is not None and hub.cluster is cluster:
            found.extend(hub.problems(cluster_targets))
    return found
