"""Tiny controllers for the assertion tests: right and wrong behaviour, for real.

A :class:`Controller` lists and watches one kind in one namespace on a thread and
calls ``reconcile(obj)`` for every added or modified object (``on_delete(obj)``
for deleted ones), the way a real operator's informer does. The behaviours under
test (a finalizer removed before cleanup, a status written through the main
resource, a lastTransitionTime rewritten on every pass...) are plain functions in
the test modules, run by this loop against the real API server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from builders import custom_object
from kubernetes import watch as k8s_watch

from ktest.cluster import Cluster, ObjectRef
from ktest.errors import OperatorError

API = "assertions.ktest.test/v1"
WIDGET = "Widget"
GADGET = "Gadget"

Reconcile = Callable[[dict[str, Any]], None]


def widget(
    name: str, namespace: str, *, size: int = 1, kind: str = WIDGET, **metadata: Any
) -> dict[str, Any]:
    return custom_object(API, kind, name, namespace, {"size": size}, **metadata)


def now() -> str:
    """An RFC 3339 time with microseconds, as Python's isoformat gives it."""
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def write(cluster: Cluster, obj: dict[str, Any], patch: dict[str, Any], *, manager: str,
          subresource: str | None = None) -> dict[str, Any]:
    """A merge patch under a field manager of the test's choosing (visible in managedFields)."""
    ref = ObjectRef.of(obj)
    info = cluster.info(ref.api_version, ref.kind)
    return dict(cluster.rest.request(
        "PATCH", info.path(ref.namespace, ref.name, subresource),
        query={"fieldManager": manager}, body=patch, content_type="application/merge-patch+json",
    ))


class Controller:
    """Runs ``reconcile`` for every object of ``kind`` in ``namespace`` until stopped.

    Like a real controller: a watch thread feeds a de-duplicating work queue (only
    the latest event per object waits), a worker thread reconciles one object at a
    time, and a failed reconcile is retried after ``retry_after`` on a fresh read.
    With ``crash_on_error`` the first exception ends the worker instead, like an
    operator process dying; :meth:`health` (register it with
    ``ktest.run_context.add_health_check``) then raises OperatorError.
    """

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        reconcile: Reconcile,
        *,
        kind: str = WIDGET,
        api_version: str = API,
        on_delete: Reconcile | None = None,
        crash_on_error: bool = False,
        retry_after: float = 0.1,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.reconcile = reconcile
        self.kind = kind
        self.api_version = api_version
        self.on_delete = on_delete
        self.crash_on_error = crash_on_error
        self.retry_after = retry_after
        self.errors: list[BaseException] = []
        self.crashed: BaseException | None = None
        self.passes = 0
        self._queue: dict[str, tuple[str, dict[str, Any]]] = {}  # name -> latest (event, object)
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._watcher = k8s_watch.Watch()
        self._threads = [
            threading.Thread(target=self._watch, name=f"test-controller watch {kind}", daemon=True),
            threading.Thread(target=self._work, name=f"test-controller worker {kind}", daemon=True),
        ]

    def __enter__(self) -> Controller:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        with self._ready:
            self._ready.notify_all()
        deadline = time.monotonic() + 5
        for thread in self._threads:
            while thread.is_alive() and time.monotonic() < deadline:
                self._watcher.stop()
                thread.join(0.05)

    def health(self) -> None:
        if self.crashed is not None:
            raise OperatorError(f"test controller for {self.kind} crashed: {self.crashed!r}")

    def _enqueue(self, event: str, obj: dict[str, Any], *, only_if_idle: bool = False) -> None:
        with self._ready:
            name = obj["metadata"]["name"]
            if only_if_idle and name in self._queue:
                return
            self._queue[name] = (event, obj)
            self._ready.notify_all()

    def _watch(self) -> None:
        try:
            resource = self.cluster.resource(self.api_version, self.kind)
            listing = self.cluster.rest.request(
                "GET", self.cluster.info(self.api_version, self.kind).path(self.namespace)
            )
            version = listing["metadata"]["resourceVersion"]
            for item in listing.get("items") or []:
                item.setdefault("apiVersion", self.api_version)
                item.setdefault("kind", self.kind)
                self._enqueue("ADDED", item)
            while not self._stop.is_set():
                for event in resource.watch(namespace=self.namespace, resource_version=version,
                                            timeout=60, watcher=self._watcher):
                    if self._stop.is_set():
                        return
                    raw = event["raw_object"]
                    version = raw["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._enqueue(event["type"], raw)
        except Exception as error:
            if not self._stop.is_set():
                self.crashed = error

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._ready:
                while not self._queue and not self._stop.is_set():
                    self._ready.wait()
                if self._stop.is_set():
                    return
                name = next(iter(self._queue))
                event, obj = self._queue.pop(name)
            try:
                if event == "DELETED":
                    if self.on_delete is not None:
                        self.on_delete(obj)
                else:
                    self.passes += 1
                    self.reconcile(obj)
            except Exception as error:
                if self._stop.is_set():
                    return
                self.errors.append(error)
                if self.crash_on_error:
                    self.crashed = error
                    return
                if event != "DELETED":
                    self._retry(obj)

    def _retry(self, obj: dict[str, Any]) -> None:
        """Reconcile again after ``retry_after``, on a fresh read (a workqueue's rate-limited retry)."""

        def again() -> None:
            if self._stop.is_set():
                return
            with contextlib.suppress(Exception):
                fresh = self.cluster.get_or_none(ObjectRef.of(obj))
                if fresh is not None:
                    self._enqueue("MODIFIED", fresh, only_if_idle=True)

        timer = threading.Timer(self.retry_after, again)
        timer.daemon = True
        timer.start()
