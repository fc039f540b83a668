"""Simulated nodes (an add-on of the bare backend): Pods that are scheduled and run, without Docker.

kube-scheduler places Pods on Node objects that KWOK keeps Ready; KWOK plays Stages
(:mod:`ktest.nodes.stages`) that write the status a kubelet would. ``ControlPlane(nodes=3)``
(``--ktest-nodes 3``) starts them; :class:`Kubelet` changes what happens to a test's Pods;
``cluster.nodes`` adds, removes and cordons nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.nodes.kubelet import Behaviour as Behaviour
    from ktest.nodes.kubelet import Kubelet as Kubelet
    from ktest.nodes.kubelet import SimulationError as SimulationError
    from ktest.nodes.pool import NodePool as NodePool
    from ktest.nodes.simulator import SimulatedNodes as SimulatedNodes

_NAMES_BY_MODULE = {
    "kubelet": ("Behaviour", "Kubelet", "SimulationError"),
    "pool": ("NodePool",),
    "simulator": ("SimulatedNodes",),
}
_EXPORTS = {name: f"ktest.nodes.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names}
"""Imported on first use: the pytest plugin loads this add-on's plugin module without its machinery."""

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
