# Over 500 lines: the Cluster handle tests hold: every verb with its error context is one public class.
"""``Cluster``: the handle a test uses to talk to a Kubernetes API server.

It works the same on every backend (embedded control plane, existing
cluster, a warm ``ktest up``): the backend only supplies a kubeconfig, a way
to issue user credentials, and what it knows about running controllers.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kubernetes.config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

from ktest.api_error import ApiError
from ktest.cluster import crds, namespaces
from ktest.cluster.discovery import Discovery, ResourceInfo, is_custom_api_version
from ktest.cluster.manifests import ManifestSource, load_located
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.cluster.rest import PATCH_CONTENT_TYPES, Rest
from ktest.errors import ClusterError

if TYPE_CHECKING:
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.resource import Resource



FIELD_MANAGER = "ktest"
"""The field manager of the test's own writes (managedFields tell them apart from the operator's)."""
log = logging.getLogger("ktest.cluster")
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")

UserIssuer = Callable[[str, Sequence[str]], Path]
"""Issues credentials for a user: (name, groups) -> kubeconfig path."""

HostResolver = Callable[[], "str | None"]
"""Finds, when first asked, the address of this machine the API server can connect to."""


class Cluster:
    """A Kubernetes API server seen through one identity (a kubeconfig).

    ``controllers`` is what the backend knows runs there: a set such as
    ``{"garbagecollector", "namespace"}``, or ``None`` when unknown (an
    existing cluster, where a full controller-manager is assumed).
    ``on_crds_installed(names)`` runs after :meth:`install_crds` created new
    CRDs: the embedded control plane restarts its garbage collector there,
    which otherwise notices new kinds only on its 30 s discovery resync.
    Every write names ``field_manager`` (default ``"ktest"``) as its field
    manager, so managedFields say which fields the test wrote and which the
    operator did; :meth:`as_field_manager` gives the same cluster writing
    under another name (ktest gives in-process operators one named after them).
    """

    def __init__(
        self,
        kubeconfig: str | Path,
        *,
        context: str | None = None,
        user_issuer: UserIssuer | None = None,
        controllers: frozenset[str] | None = None,
        name: str = "cluster",
        on_crds_installed: Callable[[builtins.list[str]], None] | None = None,
        parent: Cluster | None = None,
        field_manager: str = FIELD_MANAGER,
        webhook_host: str | HostResolver | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self._webhook_host = webhook_host
        self.field_manager = field_manager
        self.context = context
        self.name = name
        self.controllers = controllers
        self._user_issuer = user_issuer
        self.on_crds_installed = on_crds_installed
        self.parent = parent  # the cluster this one is a user() of; it owns the namespace reaper
        self._users: dict[tuple[str, tuple[str, ...]], Cluster] = {}
        self._lock = threading.Lock()
        self._scratch: Path | None = None
        self._reaper: namespaces.NamespaceReaper | None = None
        self._closed = False
        self._close_hooks: list[Callable[[], object]] = []
        try:
            configuration = Configuration()
            # Watches used by eventually's wake-up each hold a connection; keep them pooled.
            configuration.connection_pool_maxsize = 32
            # The loader classes, not load_kube_config(): while in-process operators run, the
            # package-level loaders lead an operator's code to its proxy (operators.client_defaults),
            # and a Cluster made in an operator's thread must still use the kubeconfig it names.
            merged = KubeConfigMerger(str(self.kubeconfig))
            if merged.config is None:
                raise kubernetes.config.ConfigException("Invalid kube-config file. No configuration found.")
            loader = KubeConfigLoader(
                config_dict=merged.config, config_base_path=None, active_context=context
            )
            loader.load_and_set(configuration)
            self.api_client: ApiClient = ApiClient(configuration)
        except (kubernetes.config.ConfigException, OSError) as error:
            raise ClusterError(
                f"cannot use kubeconfig {self.kubeconfig}"
                f"{f' (context {context})' if context else ''}: {error}"
            ) from None
        self.rest = Rest(self.api_client)
        self.discovery = Discovery(self.rest)

    def on_close(self, hook: Callable[[], object]) -> None:
        """Call ``hook`` when the cluster closes (the layers above stop what they run against it:
        ``eventually``'s watch threads, for one), last registered first."""
        self._close_hooks.append(hook)

    # ----------------------------------------------------------------- basics

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, server={self.server!r})"

    @property
    def server(self) -> str:
        return str(self.api_client.configuration.host)

    @property
    def webhook_host(self) -> str | None:
        """The address of this machine the API server can connect to (where webhook servers
        listen): ``127.0.0.1`` for an embedded control plane, the Docker network's gateway
        for kind; None when the backend does not know (an existing cluster)."""
        if callable(self._webhook_host):
            self._webhook_host = self._webhook_host()
        return self._webhook_host

    @cached_property
    def version_info(self) -> dict[str, Any]:
        return dict(self.rest.request("GET", "/version"))

    @property
    def version(self) -> str:
        """The server's Kubernetes version, e.g. ``"1.37.2"``."""
        from ktest.assets.selectors import KubeVersion

        return KubeVersion.parse(str(self.version_info["gitVersion"])).text

    @property
    def gc_available(self) -> bool:
        """Whether a garbage collector runs, so owned objects get deleted with their owner."""
        return self.controllers is None or "garbagecollector" in self.controllers

    @property
    def namespace_controller_available(self) -> bool:
        """Whether deleted namespaces are emptied and removed."""
        return self.controllers is None or "namespace" in self.controllers

    @cached_property
    def dynamic(self) -> DynamicClient:
        """A ``kubernetes.dynamic.DynamicClient`` on the same credentials.

        Its discovery cache lives in a private directory removed by :meth:`close`
        (by default it would litter the system temp directory).
        """
        from kubernetes.dynamic import DynamicClient

        return DynamicClient(self.api_client, cache_file=str(self._scratch_dir() / "discovery.json"))

    def resource(self, api_version: str, kind: str) -> Resource:
        """The dynamic-client resource for a kind (for watches and dynamic-client code)."""
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def info(self, api_version: str, kind: str) -> ResourceInfo:
        """Plural name, scope and subresources of a kind, from discovery."""
        return self.discovery.info(api_version, kind)

    def close(self) -> None:
        """Stop watches, close connections, remove scratch files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for report in self.drain_namespaces():
                if report.error is not None:
                    log.warning("background deletion of namespace %s failed: %s", report.name, report.error)
        finally:
            for user in self._users.values():
                user.close()
            for hook in reversed(self._close_hooks):
                hook()
            self.api_client.close()
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)

    def _scratch_dir(self) -> Path:
        with self._lock:
            if self._scratch is None:
                from ktest.base import holders

                # Owned by this process: what a killed run left is swept at the next start.
                holders.sweep(Path(tempfile.gettempdir()), holders.CLUSTER_SCRATCH_PREFIX)
                self._scratch = Path(tempfile.mkdtemp(prefix=holders.CLUSTER_SCRATCH_PREFIX))
                holders.write_holder(self._scratch)
            return self._scratch

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
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind, in one namespace or (``namespace=None``) everywhere."""
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
        return list(items)

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
            ns = obj["metadata"].get("namespace") if info.namespaced else None
            if not info.namespaced:
                obj["metadata"].pop("namespace", None)
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
        while time.monotonic() < deadline:
            current = self.get_or_none(ref)
            if current is None or current["metadata"]["uid"] != uid:
                return
            time.sleep(0.05)
        finalizers = (current or {}).get("metadata", {}).get("finalizers") or []
        raise ClusterError(
            f"{ref} still exists {timeout:.0f}s after deletion was requested"
            + (f"; finalizers still present: {finalizers}" if finalizers else "")
        )

    # ------------------------------------------------------------ higher level

    def install_crds(self, *paths: ManifestSource, timeout: float = 60.0) -> builtins.list[str]:
        """Create or update CRDs, then wait until they are established and served."""
        return crds.install_crds(self, *paths, timeout=timeout)

    def user(self, name: str, groups: Sequence[str] = ()) -> Cluster:
        """The same cluster seen as another identity (client certificate CN=name, O=groups).

        Nothing is granted: bind RBAC to ``name`` or a group to give it rights.
        """
        if self._user_issuer is None:
            raise ClusterError(
                f"this cluster ({self.name}) cannot issue user credentials; "
                "users are available on the embedded control plane (backend 'bare')"
            )
        key = (name, tuple(groups))
        with self._lock:
            if key not in self._users:
                kubeconfig = self._user_issuer(name, list(groups))
                self._users[key] = Cluster(
                    kubeconfig,
                    controllers=self.controllers,
                    name=f"{self.name} as {name}",
                    parent=self,
                    webhook_host=lambda: self.webhook_host,
                )
            return self._users[key]

    def as_field_manager(self, manager: str) -> Cluster:
        """The same cluster and identity, writing under field manager ``manager`` (closed with this one)."""
        if manager == self.field_manager:
            return self
        key = (f"field manager {manager}", ())
        with self._lock:
            if key not in self._users:
                self._users[key] = Cluster(
                    self.kubeconfig,
                    context=self.context,
                    user_issuer=self._user_issuer,
                    controllers=self.controllers,
                    name=f"{self.name} writing as {manager}",
                    parent=self,
                    field_manager=manager,
                    webhook_host=lambda: self.webhook_host,
                )
            return self._users[key]

    def faults(self, operator: Any) -> Any:
        """Deprecated: ``op.faults`` (the cluster layer knows nothing of operators or their proxy)."""
        import warnings

        warnings.warn(
            "cluster.faults(op) is deprecated; use op.faults (e.g. with op.faults.inject(rule):)",
            DeprecationWarning,
            stacklevel=2,
        )
        return operator.faults

    @contextlib.contextmanager
    def namespace(
        self,
        name: str | None = None,
        *,
        prefix: str = "ktest",
        labels: Mapping[str, str] | None = None,
        keep: bool = False,
        delete_timeout: float = 60.0,
        background: bool = False,
    ) -> Iterator[str]:
        """A fresh namespace for the duration of the ``with`` block, then deleted and waited for.

        With ``background=True`` the deletion is waited for on a background
        thread (see :meth:`drain_namespaces`): the namespace controller waits a
        fixed 5 s before it starts emptying a namespace, which a test suite
        should not pay once per test.
        """
        ns = name or namespaces.unique_name(prefix)
        namespaces.create_namespace(self, ns, labels=labels)
        try:
            yield ns
        finally:
            if keep:
                log.info("keeping namespace %s", ns)
            elif background:
                self.namespace_reaper().submit(ns, owner=prefix)
            else:
                namespaces.delete_namespace(self, ns, timeout=delete_timeout)

    def namespace_reaper(self) -> namespaces.NamespaceReaper:
        """The background deleter of this API server's test namespaces (created on first use).

        Shared with every :meth:`user` of this cluster, so draining through any
        of them waits for all deletions.
        """
        if self.parent is not None:
            return self.parent.namespace_reaper()
        with self._lock:
            if self._reaper is None:
                self._reaper = namespaces.NamespaceReaper(self)
            return self._reaper

    def drain_namespaces(self) -> builtins.list[namespaces.NamespaceCleanup]:
        """Wait until every namespace deleted in the background is gone; their reports.

        Call it before stopping an operator that processes finalizers in them.
        """
        if self.parent is not None:
            return self.parent.drain_namespaces()
        return self._reaper.drain() if self._reaper is not None else []

    def create_namespace(self, name: str, *, labels: Mapping[str, str] | None = None) -> str:
        return namespaces.create_namespace(self, name, labels=labels)

    def delete_namespace(self, name: str, *, timeout: float = 60.0) -> namespaces.NamespaceCleanup:
        return namespaces.delete_namespace(self, name, timeout=timeout)

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
        from ktest import context

        meta = written.get("metadata") or {}
        test = context.current_test()
        if test is None or not _created_since(meta.get("creationTimestamp"), test.started):
            return  # an apply that changed an object older than the test
        context.note_created(info.api_version, info.kind, str(meta.get("name")), str(meta.get("uid", "")))

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
