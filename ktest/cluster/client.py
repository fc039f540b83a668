"""``ClusterClient``: the verbs of :class:`ktest.cluster.Cluster` (read, write, delete),
in a class of their own, so that the CRD and namespace helpers ``Cluster`` calls depend
on these and not on ``cluster.py`` (no import circle)."""

from __future__ import annotations

import builtins
import datetime
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from ktest.cluster.discovery import Discovery, ResourceInfo, is_custom_api_version
from ktest.cluster.manifests import ManifestSource, load_located
from ktest.cluster.refs import KindRef, ObjectRef, RefLike, as_kind, as_ref
from ktest.cluster.rest import PATCH_CONTENT_TYPES, Rest
from ktest.controller_names import runs_controller
from ktest.errors import ClusterError
from ktest.errors.api import ApiError

FIELD_MANAGER = "ktest"
"""The field manager of the test's own writes (managedFields tell them apart from the operator's)."""
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


class ClusterClient:
    """Reads and writes of one identity on one API server (the base of ``Cluster``, which sets
    the attributes below)."""

    name: str
    rest: Rest
    discovery: Discovery
    field_manager: str
    controllers: frozenset[str] | None
    on_crds_installed: Callable[[builtins.list[str]], None] | None

    @property
    def gc_available(self) -> bool:
        """Whether a garbage collector runs, so owned objects get deleted with their owner."""
        return self.controllers is None or runs_controller(self.controllers, "garbagecollector")

    @property
    def namespace_controller_available(self) -> bool:
        """Whether deleted namespaces are emptied and removed."""
        return self.controllers is None or runs_controller(self.controllers, "namespace")

    def info(self, api_version: str | KindRef, kind: str | None = None) -> ResourceInfo:
        """Plural name, scope and subresources of a kind, from discovery: ``info(("apps/v1",
        "Deployment"))`` or ``info("apps/v1", "Deployment")``."""
        return self.discovery.info(*as_kind(api_version, kind))

    # ------------------------------------------------------------ reading

    def get(self, target: RefLike, *, namespace: str | None = None) -> dict[str, Any]:
        """The current state of an object (raises ``ApiException`` 404 if absent)."""
        ref = as_ref(target, namespace)
        info = self.info(ref.api_version, ref.kind)
        self._record(ref.api_version, ref.kind, ref.namespace, ref.name)
        return dict(self.rest.request("GET", info.path(ref.namespace, ref.name)))

    def get_or_none(self, target: RefLike, *, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self.get(target, namespace=namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def exists(self, target: RefLike, *, namespace: str | None = None) -> bool:
        return self.get_or_none(target, namespace=namespace) is not None

    def list(
        self,
        api_version: str | KindRef,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Objects of a kind, in one namespace or (``namespace=None``) everywhere.

        The kind reads as in :meth:`get`: ``list(("v1", "ConfigMap"), namespace)`` (then the
        second argument is the namespace), or apart, ``list("v1", "ConfigMap", namespace)``;
        ``namespace=`` works with both. Items carry apiVersion and kind
        (a list answer leaves them out), so each is a usable object.
        """
        if isinstance(api_version, tuple):
            if kind is not None and namespace is not None:
                raise TypeError(
                    f"list({api_version!r}, {kind!r}, {namespace!r}): with the kind as (apiVersion, kind) "
                    "the next argument is the namespace; give it once"
                )
            namespace = kind if kind is not None else namespace
            kind = None
        api_version, kind = as_kind(api_version, kind)
        info = self.info(api_version, kind)
        self._record(api_version, kind, namespace, None)
        result = self.rest.request(
            "GET",
            info.path(namespace),
            query={"labelSelector": label_selector, "fieldSelector": field_selector},
        )
        items = result.get("items") or []
        for item in items:  # list items lack these; put them back so items are usable objects
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return builtins.list(items)

    # ------------------------------------------------------------ writing

    def apply(
        self,
        source: ManifestSource,
        *,
        namespace: str | None = None,
        force: bool = True,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Any:
        """Server-side apply every object in ``source`` (dict, YAML string, file, directory).

        Returns the applied object, or a list when ``source`` holds several.
        """
        results = []
        for manifest in load_located(source, namespace=namespace):
            obj = manifest.obj
            ref, info = self._locate(obj)
            query = {"fieldManager": field_manager or self.field_manager, "force": force}
            path = info.path(ref.namespace, ref.name, subresource)
            results.append(self._write(f"{manifest.origin}: {ref}", "PATCH", path, query, obj, "apply"))
            self._note_cluster_scoped(info, results[-1])
        return _one_or_list(results)

    def create(
        self,
        source: ManifestSource,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Any:
        """Create every object in ``source``; 409 AlreadyExists is raised as ``ApiException``.

        Returns the created object, or a list when ``source`` holds several.
        ``metadata.generateName`` is honoured.
        """
        results = []
        for manifest in load_located(source, namespace=namespace):
            obj = manifest.obj
            info = self.info(obj["apiVersion"], obj["kind"])
            if not info.namespaced:
                obj["metadata"].pop("namespace", None)
            ns = obj["metadata"].get("namespace")
            if info.namespaced and not ns:
                raise ClusterError(
                    f"{manifest.origin}: {manifest.ref_text} is namespaced but has no namespace; "
                    "pass namespace=... or set metadata.namespace"
                )
            what = f"{manifest.origin}: {manifest.ref_text}"
            query = {"fieldManager": field_manager or self.field_manager}
            results.append(self._write(what, "POST", info.path(ns, None, None), query, obj, None))
            self._note_cluster_scoped(info, results[-1])
        return _one_or_list(results)

    def update(
        self,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` makes this optimistic (409 if stale)."""
        ref, info = self._locate(obj)
        path = info.path(ref.namespace, ref.name, subresource)
        query = {"fieldManager": field_manager or self.field_manager}
        return dict(self.rest.request("PUT", path, query=query, body=dict(obj)))

    def patch(
        self,
        target: RefLike,
        patch: Any,
        *,
        type: str = "merge",
        subresource: str | None = None,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """Patch an object: ``type`` is merge (default), strategic, json or apply.

        ``subresource="status"`` writes through the status subresource.
        """
        if type not in PATCH_CONTENT_TYPES:
            raise ValueError(f"patch type must be one of {sorted(PATCH_CONTENT_TYPES)}, not {type!r}")
        ref = as_ref(target, namespace)
        info = self.info(ref.api_version, ref.kind)
        query: dict[str, Any] = {"fieldManager": field_manager or self.field_manager}
        if type == "apply":
            query["force"] = True
        return dict(
            self.rest.request(
                "PATCH",
                info.path(ref.namespace, ref.name, subresource),
                query=query,
                body=patch,
                content_type=PATCH_CONTENT_TYPES[type],
            )
        )

    def delete(
        self,
        target: RefLike,
        *,
        namespace: str | None = None,
        propagation: str | None = None,
        grace_period: int | None = None,
        missing_ok: bool = False,
        wait: bool = False,
        timeout: float = 60.0,
    ) -> dict[str, Any] | None:
        """Delete an object; ``propagation`` is Background, Foreground or Orphan.

        With ``wait=True``, return only once the object is gone (finalizers done).
        Returns the API server's answer (the object, still present when it has
        finalizers), or None when it was already absent and ``missing_ok``.
        """
        if propagation is not None and propagation not in PROPAGATION_POLICIES:
            raise ValueError(
                f"propagation must be one of {', '.join(PROPAGATION_POLICIES)}, not {propagation!r}"
            )
        ref = as_ref(target, namespace)
        info = self.info(ref.api_version, ref.kind)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation:
            body["propagationPolicy"] = propagation
        if grace_period is not None:
            body["gracePeriodSeconds"] = grace_period
        try:
            answer = self.rest.request("DELETE", info.path(ref.namespace, ref.name), body=body)
        except ApiException as error:
            if error.status == 404 and missing_ok:
                return None
            raise
        if wait:
            self.wait_deleted(ref, timeout=timeout)
        return dict(answer) if isinstance(answer, dict) else None

    def wait_deleted(self, target: RefLike, *, namespace: str | None = None, timeout: float = 60.0) -> None:
        """Block until the object no longer exists (or exists with a new UID)."""
        ref = as_ref(target, namespace)
        first = self.get_or_none(ref)
        if first is None:
            return
        uid = first["metadata"]["uid"]
        deadline = time.monotonic() + timeout
        current: dict[str, Any] | None = first
        while time.monotonic() < deadline:
            current = self.get_or_none(ref)
            if current is None or current["metadata"]["uid"] != uid:
                return
            self.wait_for_change(ref, current, deadline - time.monotonic())
        finalizers = (current or {}).get("metadata", {}).get("finalizers") or []
        raise ClusterError(
            f"{ref} still exists {timeout:.0f}s after deletion was requested"
            + (f"; finalizers still present: {finalizers}" if finalizers else "")
        )

    def wait_for_change(self, ref: ObjectRef, last_read: Mapping[str, Any], seconds: float) -> bool:
        """Return once the object ``ref`` changed after ``last_read`` (True), or after ``seconds``
        (False): one watch, not a read every few milliseconds."""
        info = self.info(ref.api_version, ref.kind)
        version = str(last_read["metadata"]["resourceVersion"])
        return self.rest.next_change(info.path(ref.namespace), ref.name, version, max(seconds, 0.05))

    # ------------------------------------------------------------ internals

    def _locate(self, obj: Mapping[str, Any]) -> tuple[ObjectRef, ResourceInfo]:
        ref = ObjectRef.of(obj)
        info = self.info(ref.api_version, ref.kind)
        if not info.namespaced and ref.namespace:
            ref = ObjectRef(ref.api_version, ref.kind, ref.name)
        if info.namespaced and not ref.namespace:
            raise ClusterError(
                f"{ref} is namespaced but has no namespace: pass namespace=... or set metadata.namespace"
            )
        return ref, info

    def _write(
        self, what: str, method: str, path: str, query: Mapping[str, Any], body: Any, patch_type: str | None
    ) -> dict[str, Any]:
        """A write whose error names the manifest it came from."""
        content_type = PATCH_CONTENT_TYPES[patch_type] if patch_type else None
        try:
            return dict(self.rest.request(method, path, query=query, body=body, content_type=content_type))
        except ApiError as error:
            raise error.with_context(what) from None

    def _note_cluster_scoped(self, info: ResourceInfo, written: Mapping[str, Any]) -> None:
        """Tell the current test about a cluster-scoped custom object it created (no namespace
        deletion will clean it up; ``operator_for_test`` does, while the operator runs)."""
        if info.namespaced or not is_custom_api_version(info.api_version):
            return
        from ktest import run_context

        meta = written.get("metadata") or {}
        test = run_context.current_test()
        if test is None or not _created_since(meta.get("creationTimestamp"), test.started):
            return  # an apply that changed an object older than the test
        run_context.note_created(info.api_version, info.kind, str(meta.get("name")), str(meta.get("uid", "")))

    def _record(self, api_version: str, kind: str, namespace: str | None, name: str | None) -> None:
        from ktest.cluster.reads import record_read

        record_read(self, api_version, kind, namespace, name)


def _one_or_list(results: list[dict[str, Any]]) -> Any:
    return results[0] if len(results) == 1 else results


def _created_since(timestamp: str | None, started: float) -> bool:
    if not timestamp:
        return True
    created = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")
    created = created.replace(tzinfo=datetime.timezone.utc)
    return created.timestamp() >= int(started)
