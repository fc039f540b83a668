"""Replicas of the operator under test and its leader election (an add-on of the runners).

``run_kopf(..., replicas=3)``, ``run_subprocess(..., replicas=3)`` and ``run_callable(...,
replicas=3)`` return an :class:`OperatorReplicas`: each replica behind its own proxy, named
``<name>-<i>``. ``op.kill(i)``, ``op.partition(i)``, ``op.heal(i)`` and ``op.leader()`` drive
and read the operator's own election; :func:`assert_single_writer` and :func:`assert_failover`
judge it. :func:`kopf_peering` installs what kopf's peering needs.
"""

from ktest.replicas.election import Leadership, Lock
from ktest.replicas.failover import Failover, assert_failover
from ktest.replicas.kopf_peering import kopf_peering
from ktest.replicas.replica_set import OperatorReplicas
from ktest.replicas.single_writer import assert_single_writer

__all__ = [
    "Failover",
    "Leadership",
    "Lock",
    "OperatorReplicas",
    "assert_failover",
    "assert_single_writer",
    "kopf_peering",
]
