"""A warm control plane in the test session's own process that child pytest sessions attach to.

A child session (a docs page's project, an inner run of the plugin's tests) starting its own etcd,
kube-apiserver and kube-controller-manager spends most of its time on that; one that only needs
*a* control plane attaches to this one the way a user's project attaches to ``ktest up``
(``KTEST_REUSE=1``, the documented reuse path, see docs/how-to/warm-reuse.md); its tests still get
a namespace each. A child whose settings shape the plane (controllers, version, nodes) finds no
compatible record and starts its own, as before.

The plane runs in the test session's process (not in a ``ktest up`` daemon of its own session):
its processes are bound to this process (parent-death signal, janitor), so an interrupted or
killed session leaves none behind. Its record lives in a private state directory the children are
pointed at (``XDG_STATE_HOME``), never in the user's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ktest.backends.bare.backend import BareBackend
from ktest.backends.bare.reuse import DEFAULT_NAME, UpRecord, record_path, state_directory, write_record
from ktest.base.procfs import process_start_time
from ktest.config import DEFAULT_CONTROLLERS
from ktest.controlplane import ControlPlane
from ktest.sessions.shared import ClusterServer


@dataclasses.dataclass(frozen=True)
class WarmPlane:
    """The environment that makes a child session attach to the warm plane."""

    env: dict[str, str]
    description: str

    @property
    def attached_header(self) -> str:
        """How an attached child session's header names its cluster."""
        return f"warm control plane '{DEFAULT_NAME}' (ktest up, pid {os.getpid()})"


@contextmanager
def shared_for_the_session(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config, label: str
) -> Iterator[WarmPlane]:
    """``plane`` shared for reuse (:func:`shared_for_reuse`) in a state directory of its own under
    the session's temporary directory (``label``), for the version the session was asked for."""
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    with shared_for_reuse(plane, tmp_path_factory.mktemp(label), version) as warm:
        yield warm


@contextmanager
def shared_for_reuse(
    plane: ControlPlane,
    state_home: Path,
    k8s_version: str | None,
    *,
    nodes: int = 0,
) -> Iterator[WarmPlane]:
    """Record a running plane for reuse under ``state_home``; remove the record on exit.

    The record is what ``ktest up``'s daemon writes, with this process as its holder:
    children with ``KTEST_REUSE=1`` and ``XDG_STATE_HOME=state_home`` find it compatible
    (the same Kubernetes version selector ``k8s_version``, the same controllers, the same
    simulated ``nodes``) and attach."""
    # Children installing new CRDs ask through this socket to restart the controllers.
    server = ClusterServer(lambda: BareBackend(plane))
    try:
        share = server.open()
        env = {"XDG_STATE_HOME": str(state_home), "KTEST_REUSE": "1"}
        path = record_path(DEFAULT_NAME, state_directory(env))
        pid = os.getpid()
        description = f"Kubernetes {plane.version} at {plane.server}"
        write_record(UpRecord(
            name=DEFAULT_NAME,
            pid=pid,
            pid_start=process_start_time(pid) or "",
            requested_version=k8s_version,
            controllers=DEFAULT_CONTROLLERS,  # what the planes here run: ControlPlane's default
            nodes=nodes,
            started_at=time.time(),
            share=dataclasses.replace(share, description=description),
            path=path,
        ))
        try:
            yield WarmPlane(env, description)
        finally:
            path.unlink(missing_ok=True)
    finally:
        server.close()
