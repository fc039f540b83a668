"""``ktest up --backend kind``, ``ktest status`` and ``ktest down`` for kind clusters.

``up`` creates a kept kind cluster (purpose ``up``) that test runs with reuse
enabled attach to; ``down`` deletes kept clusters and sweeps orphans of
killed runs. Only clusters with a ktest record are ever touched.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from ktest.config import Settings


def up_from_args(args: Any, k8s_version: str | None) -> int:
    """``ktest up --backend kind``."""
    return up_kind(k8s_version, args.kind_config)


def up_kind(k8s_version: str | None, kind_config: str | None) -> int:
    """Create (or find) the warm kind cluster and print how to use it."""
    from pathlib import Path

    from ktest.backends.kind import KindBackend, find_kept

    settings = Settings(
        backend="kind", k8s_version=k8s_version, reuse=True,
        kind_config=Path(kind_config).resolve() if kind_config else None,
    )
    backend = find_kept(settings)
    state = "already running"
    if backend is None:
        backend = KindBackend.start(settings, purpose="up", kept=True)
        state = "created"
    cluster = backend.kind_cluster
    try:
        print(f"ktest up: {state}: {backend.describe()}", file=sys.stderr)
        print(
            "Tests attach to it with --ktest-backend kind --ktest-reuse "
            "(or KTEST_BACKEND=kind KTEST_REUSE=1); delete it with `ktest down --kind`.",
            file=sys.stderr,
        )
        print(cluster.kubeconfig)
        print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    finally:
        backend.owned = False  # kept: closing the handle must not delete it
        backend.close()
    return 0


def kind_status_lines() -> list[str]:
    """One line per kind cluster ktest knows of (kept, owned by a live run, or orphaned)."""
    from ktest.kind import records
    from ktest.kind.cluster import cluster_stopped

    lines = []
    for record in records.list_records():
        if record.kept:
            owner = "kept (ktest up / --ktest-keep-cluster)"
        elif record.holder_alive():
            owner = f"owned by pid {record.owner_pid}"
        else:
            owner = (
                f"ORPHANED (owner pid {record.owner_pid} gone; the next kind run or `ktest down --kind` "
                "removes it)"
            )
        problem = cluster_stopped(record.name)
        state = "running" if problem is None else f"STOPPED ({problem})"
        lines.append(f"kind {record.name}: {state}, Kubernetes {record.version}, {owner}")
        lines.append(f"  kubeconfig: {record.kubeconfig}")
    return lines


def down_kind(name: str | None = None) -> list[str]:
    """Delete kept kind clusters (all, or the one named) and orphans; one line per thing done."""
    from ktest.errors import KindError
    from ktest.kind import records
    from ktest.kind.binary import resolve_kind
    from ktest.kind.sweep import sweep_orphans

    if name is not None and records.read_record(name) is None:
        raise KindError(
            f"no kind cluster named {name!r} was created by ktest (`ktest status` lists them; "
            f"records in {records.records_directory()}); ktest never deletes clusters it did not create"
        )
    if not records.list_records():
        return []
    return sweep_orphans(resolve_kind(progress=True), include_kept=True, only=name)
