"""``cluster.nodes``: add, remove, cordon and list the simulated nodes of a cluster."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from ktest.errors import KtestError
from ktest.nodes.node_objects import SIMULATED_ANNOTATION, node_object


class NodePool:
    """The nodes of ``cluster``; :meth:`add` makes a simulated one (KWOK manages every node)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def names(self) -> list[str]:
        return sorted(node["metadata"]["name"] for node in self.cluster.list(("v1", "Node")))

    def simulated(self) -> bool:
        """Whether Pods here run on simulated nodes only (any image becomes Ready; no container
        runs): a test that runs on kind too picks its image, or skips, by this."""
        nodes = self.cluster.list(("v1", "Node"))
        return bool(nodes) and all(
            (node["metadata"].get("annotations") or {}).get(SIMULATED_ANNOTATION) == "fake" for node in nodes
        )

    def add(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str] | str] = (),
        capacity: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create simulated node ``name``; it becomes Ready within a second or so."""
        if self.cluster.get_or_none(("v1", "Node", name)) is not None:
            raise KtestError(f"node {name!r} already exists; remove it first or choose another name")
        index = 1000 + zlib.crc32(name.encode()) % 60_000
        created: list[dict[str, Any]] = self.cluster.create(
            node_object(name, index, labels=labels, taints=taints, capacity=capacity)
        )
        return created[0] if isinstance(created, list) else created

    def remove(self, name: str) -> None:
        """Delete node ``name`` (its Pods are then garbage-collected by pod-garbage-collector)."""
        self.cluster.delete(("v1", "Node", name))

    def cordon(self, name: str, unschedulable: bool = True) -> None:
        """Mark node ``name`` unschedulable (``uncordon`` undoes it)."""
        self.cluster.patch(("v1", "Node", name), {"spec": {"unschedulable": unschedulable}})

    def uncordon(self, name: str) -> None:
        self.cordon(name, False)
