"""``Cluster``: the handle a test uses to talk to a Kubernetes API server.

It works the same on every backend (embedded control plane, existing
cluster, a warm ``ktest up``): the backend only supplies a kubeconfig, a way
to issue user credentials, and what it knows about running controllers.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kubernetes.config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

from ktest.base.closing import Closing
from ktest.base.environment_proxies import choose_proxy
from ktest.cluster import crds, namespaces
from ktest.cluster.client import FIELD_MANAGER, ClusterClient
from ktest.cluster.discovery import Discovery
from ktest.cluster.manifests import ManifestSource
from ktest.cluster.refs import KindRef, as_kind
from ktest.cluster.rest import Rest
from ktest.errors import ClusterError

if TYPE_CHECKING:
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.resource import Resource


log = logging.getLogger("ktest.cluster")

UserIssuer = Callable[[str, Sequence[str]], Path]
"""Issues credentials for a user: (name, groups) -> kubeconfig path."""

HostResolver = Callable[[], "str | None"]
"""Finds, when first asked, the address of this machine the API server can connect to."""


class Cluster(Closing, ClusterClient):
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
    The verbs (``get``, ``list``, ``apply``, ``create``, ``update``, ``patch``,
    ``delete``...) are :class:`~ktest.cluster.client.ClusterClient`'s.
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
        webhook_client_ca: Path | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self._webhook_host = webhook_host
        # The CA of the client certificate the API server presents to admission webhooks
        # (the embedded control plane's); None when it presents none the backend knows of.
        self.webhook_client_ca = webhook_client_ca
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
            choose_proxy(configuration, loader)  # as kubectl does; never for ktest's loopback planes
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

    @cached_property
    def nodes(self) -> Any:
        """The cluster's nodes: ``cluster.nodes.add(name, labels=, taints=, capacity=)`` makes a
        simulated node, ``.remove``, ``.cordon``, ``.uncordon``, ``.names()`` (:mod:`ktest.nodes`)."""
        from ktest import addon_registry

        return addon_registry.load("cluster.nodes")(self)

    @cached_property
    def dynamic(self) -> DynamicClient:
        """A ``kubernetes.dynamic.DynamicClient`` on the same credentials.

        Its discovery cache lives in a private directory removed by :meth:`close`
        (by default it would litter the system temp directory).
        """
        from kubernetes.dynamic import DynamicClient

        return DynamicClient(self.api_client, cache_file=str(self._scratch_dir() / "discovery.json"))

    def resource(self, api_version: str | KindRef, kind: str | None = None) -> Resource:
        """The dynamic-client resource for a kind (for watches and dynamic-client code):
        ``resource(("apps/v1", "Deployment"))`` or ``resource("apps/v1", "Deployment")``."""
        api_version, kind = as_kind(api_version, kind)
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

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

                # Held by this process: what a killed run left is swept at the next start.
                self._scratch = holders.held_directory(holders.CLUSTER_SCRATCH_PREFIX)
            return self._scratch

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
        kubeconfig = partial(self._user_issuer, name, list(groups))  # issued once, on first use
        return self._derived((name, tuple(groups)), kubeconfig, name=f"{self.name} as {name}")

    def as_field_manager(self, manager: str) -> Cluster:
        """The same cluster and identity, writing under field manager ``manager`` (closed with this one)."""
        if manager == self.field_manager:
            return self
        return self._derived(
            (f"field manager {manager}", ()),
            lambda: self.kubeconfig,
            name=f"{self.name} writing as {manager}",
            context=self.context,
            user_issuer=self._user_issuer,
            field_manager=manager,
        )

    def _derived(
        self, key: tuple[str, tuple[str, ...]], kubeconfig: Callable[[], Path], **options: Any
    ) -> Cluster:
        """The cluster ``key`` names among those made from this one (made once, closed with it)."""
        with self._lock:
            if key not in self._users:
                self._users[key] = Cluster(
                    kubeconfig(),
                    controllers=self.controllers,
                    parent=self,
                    webhook_host=lambda: self.webhook_host,
                    webhook_client_ca=self.webhook_client_ca,
                    **options,
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
                namespaces.release_namespace(self, ns)  # kept on purpose: no later sweep deletes it
                log.info("keeping namespace %s", ns)
            elif background:
                self.namespace_reaper().submit(ns, requested_by=prefix)
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
