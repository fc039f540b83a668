"""What every backend provides: a :class:`Cluster`, a way to share it, and ``close()``.

:class:`ClusterShare` is the JSON-able description another process needs to attach to the same
cluster (pytest-xdist workers get it from the controller; ``ktest up`` records it).
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.base.closing import Closing
from ktest.base.procfs import process_alive

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.controlplane import ControlPlane


@dataclass(frozen=True)
class Component:
    """A control-plane process seen from another process: pid, its start time, its log."""

    pid: int
    start_time: str
    log: str

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_time)


@dataclass(frozen=True)
class ClusterShare:
    """Everything needed to attach to a running cluster from another process.

    ``directory`` is the embedded control plane's directory (its CA issues user
    credentials), None for clusters ktest did not start; ``controllers`` is
    None when unknown (a real cluster runs them all).
    """

    kubeconfig: str
    version: str
    description: str
    context: str | None = None
    controllers: tuple[str, ...] | None = None
    directory: str | None = None
    components: dict[str, Component] = field(default_factory=dict)
    # Unix socket of the owning process (see sessions/shared.py), for requests such as
    # restarting the controllers after new CRDs; None when nobody serves one.
    control_address: str | None = None
    # What only the backend that made the cluster reads when it attaches in another process
    # (its ``attach`` part): kind keeps the cluster's name here for its node-level helpers.
    backend_details: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterShare:
        values = {key: value for key, value in data.items() if key in {f.name for f in fields(cls)}}
        values["components"] = {name: Component(**c) for name, c in (values.get("components") or {}).items()}
        if values.get("controllers") is not None:
            values["controllers"] = tuple(values["controllers"])
        values["backend_details"] = dict(values.get("backend_details") or {})
        return cls(**{"description": "", **values})

    def dead_components(self) -> list[tuple[str, str]]:
        """(name, log tail) of every recorded component that is no longer running."""
        from ktest.base.process import read_tail

        return [
            (name, read_tail(Path(component.log)))
            for name, component in self.components.items()
            if not component.alive()
        ]


class Backend(Closing, abc.ABC):
    """A source of one cluster for a test session; ``close()`` releases what it started."""

    name: str = "backend"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @property
    def control_plane(self) -> ControlPlane | None:
        """The embedded ControlPlane object when this process holds it, else None."""
        return None

    @abc.abstractmethod
    def describe(self) -> str:
        """One line saying what the tests run against."""

    @abc.abstractmethod
    def share(self) -> ClusterShare:
        """How another process attaches to this cluster."""

    def dead_components(self) -> list[tuple[str, str]]:
        """(name, log tail) of control-plane components that died; empty when unknown."""
        return []

    def until_ready(self) -> None:
        """Block until every part of the cluster runs (a no-op once it does).

        A backend may be returned while a part still starts (the bare backend's controllers
        come up while the session installs CRDs and starts operators); the pytest plugin
        calls this before each test body, and a shared session before it shares the cluster."""
        return None

    def close(self) -> None:
        """Close the cluster handle; subclasses also stop what they started. Idempotent."""
        self.cluster.close()

