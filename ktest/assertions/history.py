"""Every version of some objects during a window, captured with a watch.

Polling sees at most one version per poll and misses the rest of a hot loop;
a watch started from the resourceVersion just read delivers every write made
after it, in order. :class:`History` runs one watch per target on a thread for
the length of a window, then checks the end state with a fresh read and waits
(briefly, for the real event, not a fixed sleep) until the watch has delivered
the writes that led to it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes import watch as k8s_watch

from ktest.assertions.objects import describe
from ktest.cluster.refs import ObjectRef
from ktest.wait.transient import describe as describe_error

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

SETTLE_TIMEOUT = 2.0
"""Seconds to wait after the window for the watch to deliver writes the end read saw."""

_SERVER_TIMEOUT = 300
_JOIN_GRACE = 5.0


@dataclass(frozen=True)
class Write:
    """One write seen by the watch; ``at`` is seconds since the window started."""

    at: float
    type: str  # ADDED, MODIFIED or DELETED
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name"))

    @property
    def resource_version(self) -> str:
        return str((self.obj.get("metadata") or {}).get("resourceVersion"))


@dataclass
class Target:
    """One object (``name`` set) or every object of a kind in a namespace (``name`` None)."""

    api_version: str
    kind: str
    namespace: str | None
    name: str | None = None
    baseline: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> object at start
    final: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> object at end
    writes: list[Write] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    watch_ended: bool = False  # the watch stopped early (error): nothing more will arrive

    @classmethod
    def of(cls, ref: ObjectRef) -> Target:
        return cls(ref.api_version, ref.kind, ref.namespace, ref.name)

    def label(self) -> str:
        if self.name is not None:
            obj = self.baseline.get(self.name) or self.final.get(self.name)
            return describe(obj) if obj else describe(
                ObjectRef(self.api_version, self.kind, self.name, self.namespace)
            )
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"every {self.kind} ({self.api_version}){where}"

    def end_differs(self) -> bool:
        """Whether the state at the end differs from the start (by uid and resourceVersion)."""
        return bool(_ended(self))


class History:
    """Watches targets from their current resourceVersion until :meth:`stop`."""

    def __init__(self, cluster: Cluster, targets: Iterable[Target]) -> None:
        self.cluster = cluster
        self.targets = list(targets)
        self.started = 0.0
        self.ended = 0.0
        self._condition = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watchers: list[k8s_watch.Watch] = []

    def record_for(self, seconds: float, *, first: Callable[[], object] | None = None) -> History:
        """Record a window of ``seconds`` (the window itself is the measurement), calling
        ``first`` once the watches are set up; then read the end state and settle."""
        self.start()
        try:
            if first is not None:
                first()
            self._stopping.wait(max(0.0, seconds - (time.monotonic() - self.started)))
            self.finish()
        finally:
            self.stop()
        return self

    def start(self) -> None:
        for target in self.targets:
            target.baseline, resource_version = self._read(target)
            watcher = k8s_watch.Watch()
            self._watchers.append(watcher)
            thread = threading.Thread(
                target=self._watch, args=(target, resource_version, watcher),
                name=f"ktest-history {target.kind}", daemon=True,
            )
            self._threads.append(thread)
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        """Read the end state and wait until the watch delivered what led to it."""
        self.ended = time.monotonic()
        for target in self.targets:
            target.final = self._read(target)[0]
        deadline = time.monotonic() + SETTLE_TIMEOUT
        with self._condition:
            while not all(self._delivered(t) for t in self.targets):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    for target in self.targets:
                        if not self._delivered(target):
                            target.problems.append(
                                f"the watch had not caught up with the end of the window "
                                f"{SETTLE_TIMEOUT:g}s later: the last writes are missing below"
                            )
                    break
                self._condition.wait(remaining)
            self._stopping.set()  # record nothing more
            for target in self.targets:
                self._trim(target)

    def stop(self) -> None:
        self._stopping.set()
        deadline = time.monotonic() + _JOIN_GRACE
        for thread in self._threads:
            # The response may not be open yet when stop() first runs, so keep asking.
            while thread.is_alive() and time.monotonic() < deadline:
                for watcher in self._watchers:
                    watcher.stop()
                thread.join(0.05)

    @property
    def window(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    # -- internals ---------------------------------------------------------------------

    def _read(self, target: Target) -> tuple[dict[str, dict[str, Any]], str]:
        """The objects of ``target`` by name, and the resourceVersion to watch from."""
        if target.name is not None:
            ref = ObjectRef(target.api_version, target.kind, target.name, target.namespace)
            obj = self.cluster.get_or_none(ref)
            if obj is not None:
                return {target.name: obj}, obj["metadata"]["resourceVersion"]
        info = self.cluster.info(target.api_version, target.kind)
        query = {"fieldSelector": f"metadata.name={target.name}"} if target.name is not None else {}
        listing = self.cluster.rest.request("GET", info.path(target.namespace), query=query)
        items = {item["metadata"]["name"]: item for item in listing.get("items") or []}
        for item in items.values():
            item.setdefault("apiVersion", target.api_version)
            item.setdefault("kind", target.kind)
        return items, listing["metadata"]["resourceVersion"]

    def _watch(self, target: Target, resource_version: str, watcher: k8s_watch.Watch) -> None:
        try:
            resource = self.cluster.resource(target.api_version, target.kind)
            if self._stopping.is_set():
                return
            for event in resource.watch(
                namespace=target.namespace, name=target.name, resource_version=resource_version,
                timeout=_SERVER_TIMEOUT, watcher=watcher,
            ):
                if self._stopping.is_set():
                    return
                kind = event.get("type")
                raw = event.get("raw_object") or {}
                if kind == "ERROR":
                    target.problems.append(f"the watch ended with an error: {raw.get('message', raw)}")
                    target.watch_ended = True
                    return
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                write = Write(time.monotonic() - self.started, str(kind), dict(raw))
                with self._condition:
                    if self._stopping.is_set():
                        return
                    target.writes.append(write)
                    self._condition.notify_all()
        except Exception as error:
            if not self._stopping.is_set():
                target.problems.append(f"the watch failed: {describe_error(error)}")
                target.watch_ended = True
        finally:
            with self._condition:
                self._condition.notify_all()

    def _delivered(self, target: Target) -> bool:
        """Whether the watch caught up with the end read (lock held)."""
        ended = _ended(target)
        return target.watch_ended or all(_end_index(target, name) is not None for name in ended)

    def _trim(self, target: Target) -> None:
        """Drop writes made after the end read (a loop that goes on after the window)."""
        found = {name: _end_index(target, name) for name in _ended(target)}
        cut = {name: index for name, index in found.items() if index is not None}
        window = self.ended - self.started
        target.writes = [
            write for index, write in enumerate(target.writes)
            if (index <= cut[write.name] if write.name in cut else write.at <= window)
        ]


def _ended(target: Target) -> list[str]:
    """Names whose end state differs from their start: the watch must reach that state."""
    return [name for name in {**target.baseline, **target.final}
            if _version(target.final.get(name)) != _version(target.baseline.get(name))]


def _end_index(target: Target, name: str) -> int | None:
    """Index of the write that produced ``name``'s end state, if delivered yet."""
    final = target.final.get(name)
    for index, write in enumerate(target.writes):
        if write.name != name:
            continue
        if final is None and write.type == "DELETED":
            return index
        if final is not None and write.type != "DELETED" and (
            write.resource_version == final["metadata"]["resourceVersion"]
        ):
            return index
    return None


def _version(obj: Mapping[str, Any] | None) -> tuple[Any, Any] | None:
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion")
