"""A cluster another process runs: the xdist controller's or a ``ktest up`` daemon's.

Attaching never stops anything: the process that started the control plane
owns it. Users are issued from the control plane's CA files, so
``cluster.user(...)`` works as on the owner's side.
"""

from __future__ import annotations

from ktest.backends.base import Backend, ClusterShare
from ktest.backends.users import user_issuer_for
from ktest.cluster import Cluster


class AttachedBackend(Backend):
    """A :class:`Cluster` on a :class:`ClusterShare`; :meth:`close` only closes the handle."""

    name = "attached"

    def __init__(self, share: ClusterShare, *, name: str = "attached") -> None:
        self.name = name
        self._share = share
        controllers = frozenset(share.controllers) if share.controllers is not None else None
        issuer = user_issuer_for(share.directory) if share.directory else None
        super().__init__(
            Cluster(
                share.kubeconfig,
                context=share.context,
                user_issuer=issuer,
                controllers=controllers,
                name="ktest",
            )
        )

    def describe(self) -> str:
        return self._share.description

    def share(self) -> ClusterShare:
        return self._share

    def dead_components(self) -> list[tuple[str, str]]:
        return self._share.dead_components()
