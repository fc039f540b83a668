"""Simulated nodes (an add-on of the bare backend): Pods that are scheduled and run, without Docker.

kube-scheduler places Pods on Node objects that KWOK keeps Ready; KWOK plays Stages
(:mod:`ktest.nodes.stages`) that write the status a kubelet would. ``ControlPlane(nodes=3)``
(``--ktest-nodes 3``) starts them; :class:`Kubelet` changes what happens to a test's Pods;
``cluster.nodes`` adds, removes and cordons nodes.
"""

from ktest.nodes.kubelet import Behaviour, Kubelet, SimulationError
from ktest.nodes.pool import NodePool
from ktest.nodes.simulator import SimulatedNodes

__all__ = ["Behaviour", "Kubelet", "NodePool", "SimulatedNodes", "SimulationError"]
