"""Backend ``kind``: a real kind cluster (real nodes, kubelet, kube-proxy, CoreDNS) per test run.

Thin: settings → this package's machinery (node image, config, create, sweep) → a
:class:`Cluster`, deleted on :meth:`close` unless kept (``--ktest-keep-cluster``). Reuse attaches
to a cluster ``ktest up --backend kind`` kept (:func:`find_kept`), ``ktest_kind_pool`` claims a
spare (:mod:`ktest.backends.kind.pool`), xdist workers attach to the controller's (:func:`attach`).
"""

from __future__ import annotations

import sys
from functools import cached_property, partial
from pathlib import Path

from ktest.backends.kind import records
from ktest.backends.kind.cluster import KindCluster, create_cluster, keep
from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.network import host_gateway
from ktest.backends.kind.pool import SpareSpec
from ktest.cluster import Cluster, UserIssuer
from ktest.config import Settings
from ktest.errors import KindError
from ktest.extension import LogExport
from ktest.sessions.attached import AttachedBackend
from ktest.sessions.backend import Backend, ClusterShare

CLUSTER_NAME = "cluster"
"""The key of :attr:`ClusterShare.backend_details` naming the kind cluster."""


class KindBackend(Backend):
    """A kind cluster this process created (or a kept one it attached to)."""

    name = "kind"

    def __init__(self, kind_cluster: KindCluster, *, owned: bool, keep_cluster: bool = False) -> None:
        self.kind_cluster = kind_cluster
        self.owned = owned
        self.keep_cluster = keep_cluster
        self.notes: list[str] = []
        record = kind_cluster.record
        super().__init__(
            Cluster(
                record.kubeconfig,
                name=record.name,
                controllers=None,  # a real kube-controller-manager runs every controller
                user_issuer=_user_issuer(kind_cluster.directory),
                webhook_host=partial(host_gateway, record.name),
            )
        )
        self.handle = KindHandle(
            record.name, record.kubeconfig, record.version, kind_cluster.kind, self.cluster
        )

    @classmethod
    def start(cls, settings: Settings, *, purpose: str = "run", kept: bool = False) -> KindBackend:
        """Sweep orphans, pick the node image, create a cluster and wait until it is usable.

        With ``settings.kind_pool`` (and not ``kept``): claim a matching spare instead when one
        is ready, then start the filler that makes the next one.
        """
        from ktest.backends.kind.binary import resolve_kind
        from ktest.backends.kind.engine import cgroup_version, connect
        from ktest.backends.kind.node_choice import (
            choose_node_image,
            configured_node_image,
            load_extra_config,
            merge_config,
        )
        from ktest.backends.kind.recipe import required_cluster_config
        from ktest.backends.kind.sweep import sweep_orphans

        extra = load_extra_config(settings.kind_config) if settings.kind_config else {}
        client = connect()  # a missing or unusable engine is explained before anything else
        kind = resolve_kind(progress=True)
        swept = sweep_orphans(kind)
        if settings.kind_image:
            image = configured_node_image(
                settings.kind_image, settings.k8s_version, source=settings.source_of("kind_image")
            )
        else:
            image = choose_node_image(settings.k8s_version)
        required = required_cluster_config(
            image.version, ktest_image=image.ktest_built, cgroup_version=cgroup_version(client)
        )
        config = merge_config(required, extra, source=str(settings.kind_config or ""))
        notes = list(swept)
        use_pool = settings.kind_pool and not kept
        spare = SpareSpec.for_image(image.reference, image.version, config) if use_pool else None
        claimed = _claim_spare(kind, spare, purpose, notes) if spare is not None else None
        cluster = claimed or create_cluster(
            kind,
            image=image.reference,
            version=image.version,
            config=config,
            purpose=purpose,
            kept=kept,
            progress=_say,
        )
        backend = cls(cluster, owned=True, keep_cluster=settings.keep_cluster)
        if spare is not None:  # only now: the filler competes with this run for CPU
            _refill(kind, spare, notes)
        backend.notes.extend(notes)
        return backend

    def describe(self) -> str:
        record = self.kind_cluster.record
        return (
            f"kind cluster {record.name} (Kubernetes {record.version}, image {record.image}) "
            f"at {self.cluster.server}"
        )

    def share(self) -> ClusterShare:
        record = self.kind_cluster.record
        return ClusterShare(
            kubeconfig=str(record.kubeconfig),
            version=record.version,
            description=self.describe(),
            controllers=None,
            directory=record.directory,
            backend_details={CLUSTER_NAME: record.name},
        )

    def dead_components(self) -> list[tuple[str, str]]:
        stopped = self.kind_cluster.stopped()
        return [("kind cluster", stopped)] if stopped else []

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.owned and self.keep_cluster:
                keep(self.kind_cluster)
                print(keep_message(self.kind_cluster), file=sys.stderr)
            elif self.owned:
                self.kind_cluster.delete()


def _claim_spare(kind: Path, spare: SpareSpec, purpose: str, notes: list[str]) -> KindCluster | None:
    """A spare of the warm pool, or None. The pool only saves time: its failures are notes."""
    from ktest.backends.kind import pool

    try:
        claimed = pool.claim(kind, spare, purpose=purpose, notes=notes)
    except (OSError, KindError) as error:
        notes.append(f"kind pool: no spare claimed ({error}); creating a cluster instead")
        return None
    if claimed is not None:
        notes.append(
            f"kind pool: claimed spare cluster {claimed.record.name} (made by an earlier run's filler)"
        )
        return claimed
    filler = pool.running_filler()
    if filler is not None:
        why = f"no spare ready yet (the filler, pid {filler.pid}, is still making one)"
    else:
        why = "no spare for this node image, version and kind config"
    notes.append(f"kind pool: {why}; created a cluster for this run")
    return None


def _refill(kind: Path, spare: SpareSpec, notes: list[str]) -> None:
    """Start the filler that makes the next spare; a note either way."""
    from ktest.backends.kind import pool

    try:
        filler = pool.refill(kind, spare)
    except (OSError, KindError) as error:
        notes.append(f"kind pool: could not start the filler for the next spare ({error})")
        return
    if filler is not None:
        notes.append(
            f"kind pool: making a spare for the next run in the background (pid {filler.pid}, "
            f"log {pool.log_path()}; `ktest down --kind` stops it and deletes spares)"
        )


def keep_message(cluster: KindCluster) -> str:
    name = cluster.record.name
    return (
        f"ktest: kept kind cluster {name}: export KUBECONFIG={cluster.record.kubeconfig} "
        f"(or `kind export kubeconfig --name {name}`); delete it with "
        f"`kind delete cluster --name {name}` or `ktest down --kind`"
    )


class AttachedKindBackend(AttachedBackend):
    """The kind cluster another process runs (a pytest-xdist worker's view of the controller's)."""

    def __init__(self, share: ClusterShare, *, name: str) -> None:
        self.cluster_name = share.backend_details[CLUSTER_NAME]
        super().__init__(share, name=name, webhook_host=partial(host_gateway, self.cluster_name))

    @cached_property
    def handle(self) -> KindHandle:
        """The node-level helpers (``load_image``, ``kubectl``...), made on first use."""
        from ktest.backends.kind.binary import resolve_kind

        share = self.share()
        return KindHandle(
            self.cluster_name,
            Path(share.kubeconfig),
            share.version,
            resolve_kind(progress=False),
            self.cluster,
        )


def attach(share: ClusterShare, name: str) -> Backend:
    """The registry's ``attach``: the kind cluster of ``share``, run by another process."""
    return AttachedKindBackend(share, name=name)


def cluster_name_of(backend: Backend) -> str | None:
    """The kind cluster behind ``backend`` (owned, kept or attached), None when it has none."""
    return backend.share().backend_details.get(CLUSTER_NAME)


def diagnostics(backend: Backend, artifacts: Path) -> LogExport | None:
    """The registry's ``diagnostics``: ``kind export logs`` of a failed run, by the owning process."""
    name = cluster_name_of(backend)
    if name is None:
        return None
    directory = artifacts / "kind-logs" / name
    export = None
    if isinstance(backend, KindBackend) and backend.owned:  # kept and attached clusters stay
        export = partial(backend.kind_cluster.export_logs, directory)
    return LogExport(
        what="kind cluster logs",
        directory=directory,
        how="kind export logs",
        contents="node journal, kubelet, containerd, pods",
        export=export,
    )


def _user_issuer(directory: Path) -> UserIssuer | None:
    if not (directory / "certs" / "ca.key").is_file():
        return None
    from ktest.sessions.users import issue_user

    return partial(issue_user, directory)


def _say(message: str) -> None:
    print(f"ktest: {message}", file=sys.stderr, flush=True)


def find_kept(settings: Settings, notes: list[str] | None = None) -> KindBackend | None:
    """Attach to a kept kind cluster (``ktest up --backend kind``) matching the version, if one is usable."""
    from ktest.assets.selectors import parse_selector
    from ktest.backends.kind.binary import resolve_kind

    selector = parse_selector(settings.k8s_version or "latest")
    candidates = [r for r in records.list_records() if r.kept and r.purpose == "up"]
    if settings.kind_image:
        candidates = [r for r in candidates if r.image == settings.kind_image]
    if settings.k8s_version is not None:
        candidates = [r for r in candidates if selector.matches(r.version)]
    if not candidates:
        return None
    kind = resolve_kind(progress=False)
    notes = [] if notes is None else notes
    for record in sorted(candidates, key=lambda r: r.created_at, reverse=True):
        cluster = KindCluster(record, kind)
        problem = cluster.stopped()
        if problem is None and not record.kubeconfig.is_file():
            problem = f"its kubeconfig {record.kubeconfig} is gone"
        if problem is not None:
            notes.append(f"not attaching to kept kind cluster {record.name}: {problem}")
            continue
        backend = KindBackend(cluster, owned=False)
        notes.append(f"attached to kept kind cluster {record.name} (`ktest down --kind` deletes it)")
        return backend
    return None


def open_kind(settings: Settings, notes: list[str]) -> Backend:
    """The kind backend: a kept cluster when reuse is on and one matches, else a spare of the
    warm pool (``ktest_kind_pool``), else a new one."""
    if settings.reuse:
        kept = find_kept(settings, notes)
        if kept is not None:
            return kept
        notes.append(
            "reuse: no kept kind cluster matches; created one for this session "
            "(`ktest up --backend kind` keeps one warm between runs)"
        )
    backend = KindBackend.start(settings)
    notes.extend(backend.notes)  # orphans swept, the pool's spare claimed and its filler: in the header
    return backend


def preflight(settings: Settings) -> None:
    """The extra kind config (``ktest_kind_config``) must be one ktest can merge."""
    if settings.kind_config is None:
        return
    from ktest.backends.kind.node_choice import load_extra_config
    from ktest.errors import ConfigError, KindError

    try:
        load_extra_config(settings.kind_config)
    except KindError as error:
        raise ConfigError(f"{settings.source_of('kind_config')}: {error}") from None
