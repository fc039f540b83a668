"""A cluster another process runs: the xdist controller's or a ``ktest up`` daemon's.

Attaching never stops anything: the process that started the control plane
holds it. Users are issued from the control plane's CA files, so
``cluster.user(...)`` works as in the holding process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from ktest import errors
from ktest.cluster import Cluster
from ktest.controller_names import runs_controller
from ktest.controlplane.admission import webhook_client_ca
from ktest.sessions.backend import Backend, ClusterShare

WebhookHost = str | Callable[[], str] | None


class AttachedBackend(Backend):
    """A :class:`Cluster` on a :class:`ClusterShare`; :meth:`close` only closes the handle."""

    name = "attached"

    def __init__(
        self, share: ClusterShare, *, name: str = "attached", webhook_host: WebhookHost = None
    ) -> None:
        self.name = name
        self._share = share
        controllers = frozenset(share.controllers) if share.controllers is not None else None
        issuer = partial(_issue_user, Path(share.directory)) if share.directory else None
        # Where the API server reaches this machine: loopback for an embedded control plane (a
        # backend whose API server runs elsewhere, such as kind, passes webhook_host).
        webhook_host = webhook_host or ("127.0.0.1" if share.directory else None)
        super().__init__(
            Cluster(
                share.kubeconfig,
                context=share.context,
                user_issuer=issuer,
                controllers=controllers,
                name="ktest",
                on_crds_installed=_restart_controllers_of(share),
                webhook_host=webhook_host,
                webhook_client_ca=webhook_client_ca(share.directory),
            )
        )

    def describe(self) -> str:
        return self._share.description

    def share(self) -> ClusterShare:
        return self._share

    def dead_components(self) -> list[tuple[str, str]]:
        """The holding process's answer when it serves one (it knows a restarted kube-controller-manager's
        new pid); the share's recorded pids when it is gone or serves none."""
        if self._share.control_address is not None:
            from ktest.sessions.shared import request_dead_components

            with contextlib.suppress(errors.KtestError):
                return request_dead_components(self._share.control_address)
        return self._share.dead_components()


def _issue_user(directory: Path, name: str, groups: Sequence[str]) -> Path:
    from ktest.sessions.users import issue_user  # cryptography: imported only when a user is needed

    return issue_user(directory, name, groups)


def _restart_controllers_of(share: ClusterShare) -> Callable[[list[str]], None] | None:
    """Ask the owning process to restart its garbage collector after new CRDs (if it serves that)."""
    address = share.control_address
    if address is None or not share.controllers or not runs_controller(share.controllers, "garbagecollector"):
        return None
    from ktest.sessions.shared import request_restart_controllers

    return lambda names: request_restart_controllers(address)
