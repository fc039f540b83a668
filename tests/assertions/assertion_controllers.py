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
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {"size": size},
    }


def config_map(name: str, namespace: str, data: dict[str, str] | None = None,
               owner: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data or {}}


def owner_reference(owner: dict[str, Any], *, controller: bool = True, block: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


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
    """Runs ``reconcile`` for every event of ``kind`` in ``namespace`` until stopped.

    With ``crash_on_error`` the first exception ends the loop, like an operator
    process dying; :meth:`health` (registered as a health check by tests that need
    it) then raises OperatorError. Otherwise errors are collected and it goes on.
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
        self.errors: list[BaseException] = []
        self.crashed: BaseException | None = None
        self.passes = 0
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._retries: list[threading.Timer] = []
        self._stop = threading.Event()
        self._watcher = k8s_watch.Watch()
        self._thread = threading.Thread(target=self._run, name=f"test-controller {kind}", daemon=True)

    def __enter__(self) -> Controller:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for timer in list(self._retries):
            timer.cancel()
        deadline = time.monotonic() + 5
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._watcher.stop()
            self._thread.join(0.05)

    def health(self) -> None:
        if self.crashed is not None:
            raise OperatorError(f"test controller for {self.kind} crashed: {self.crashed!r}")

    def _run(self) -> None:
        try:
            resource = self.cluster.resource(self.api_version, self.kind)
            listing = self.cluster.rest.request(
                "GET", self.cluster.info(self.api_version, self.kind).path(self.namespace)
            )
            version = listing["metadata"]["resourceVersion"]
            for item in listing.get("items") or []:
                item.setdefault("apiVersion", self.api_version)
                item.setdefault("kind", self.kind)
                self._handle("ADDED", item)
            while not self._stop.is_set():
                for event in resource.watch(namespace=self.namespace, resource_version=version,
                                            timeout=60, watcher=self._watcher):
                    if self._stop.is_set():
                        return
                    raw = event["raw_object"]
                    version = raw["metadata"]["resourceVersion"]
                    self._handle(event["type"], raw)
        except _Crash:
            return
        except Exception as error:
            if not self._stop.is_set():
                self.crashed = error

    def _handle(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            with self._lock:
                if self._stop.is_set():
                    return
                if kind == "DELETED":
                    if self.on_delete is not None:
                        self.on_delete(obj)
                elif kind in ("ADDED", "MODIFIED"):
                    self.passes += 1
                    self.reconcile(obj)
        except Exception as error:
            if self._stop.is_set():
                raise _Crash() from error
            self.errors.append(error)
            if self.crash_on_error:
                self.crashed = error
                raise _Crash() from error
            if kind != "DELETED":
                self._requeue(obj)

    def _requeue(self, obj: dict[str, Any]) -> None:
        """Reconcile the object again after ``retry_after`` (a workqueue's rate-limited retry)."""

        def again() -> None:
            fresh = self.cluster.get_or_none(ObjectRef.of(obj))
            if fresh is not None and not self._stop.is_set():
                with contextlib.suppress(_Crash):
                    self._handle("MODIFIED", fresh)

        timer = threading.Timer(self.retry_after, again)
        timer.daemon = True
        self._retries = [t for t in self._retries if t.is_alive()] + [timer]
        timer.start()


class _Crash(Exception):
    pass
