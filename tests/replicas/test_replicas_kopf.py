"""kopf run as replicas: with peering one replica works and another takes over when it dies;
without it (the seeded bug) every replica writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktest.cluster import Cluster
from ktest.operators import run_kopf
from ktest.replicas import OperatorReplicas, assert_failover, assert_single_writer, kopf_peering
from ktest.wait import eventually

STAMP = Path(__file__).resolve().parent / "kopf_stamp.py"
LABELS = {"ktest.dev/stamp": "true"}
LIFETIME = 2  # kopf's peering lifetime: a killed leader's peers wait at most this long


def short_lifetime(settings: Any) -> None:
    settings.peering.lifetime = LIFETIME


def source(name: str, ns: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": ns, "labels": LABELS}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def stamped(admin: Cluster, ns: str, name: str) -> None:
    annotations = admin.get(("v1", "ConfigMap", name, ns))["metadata"].get("annotations") or {}
    assert annotations.get("ktest.dev/stamped") == "yes"


def test_kopf_replicas_with_peering_one_writer_and_failover(admin: Cluster, ns: str) -> None:
    kopf_peering(admin, "stamp", namespaces=[ns])
    with run_kopf(
        STAMP, admin, namespaces=[ns], replicas=3, peering="stamp", configure=short_lifetime
    ) as op:
        assert isinstance(op, OperatorReplicas)
        assert op.names == ["kopf_stamp-0", "kopf_stamp-1", "kopf_stamp-2"]
        assert [replica.priority for replica in op.replicas] == [2, 1, 0]
        assert op.wait_leader() == 0  # the highest priority leads; the others pause
        admin.create(source("before", ns))
        eventually(lambda: stamped(admin, ns, "before"))
        # the stamp is in etcd before the leader's proxy has finished recording its answer
        eventually(lambda: assert_single_writer(op) >= 1)

        failover = assert_failover(
            op,
            within=4 * LIFETIME,
            trigger=lambda: admin.create(source("after", ns)),
            check=lambda: stamped(admin, ns, "after"),
        )
        assert failover.old_leader == "kopf_stamp-0" and failover.new_leader == "kopf_stamp-1"
        assert failover.reconciled is not None and failover.gap <= failover.reconciled
        assert op.failovers == [failover]
        assert_single_writer(op)  # the new leader handled "after" only: nobody wrote an object twice

        cut = assert_failover(op, within=4 * LIFETIME, how="partition")  # kopf logs errors meanwhile
        assert (cut.old_leader, cut.new_leader) == ("kopf_stamp-1", "kopf_stamp-2")
        op.heal(1)  # its errors while cut off are forgotten; it keeps alive again and, higher, leads
        eventually(lambda: op.leader() == 1)  # eventually runs every replica's health check too
        assert op.replicas[1].error is None
        # both live replicas keep their records alive; with a 2 s lifetime a record a loaded machine
        # renewed late is dropped by a peer and written again on the next renewal
        def peers() -> set[str]:
            return set(admin.get(("kopf.dev/v1", "KopfPeering", "stamp", ns))["status"])

        eventually(lambda: {"kopf_stamp-1", "kopf_stamp-2"} <= peers())


def test_kopf_replicas_without_peering_are_two_writers(admin: Cluster, ns: str) -> None:
    with run_kopf(STAMP, admin, namespaces=[ns], replicas=2) as op:
        admin.create(source("shared", ns))

        def both_wrote() -> None:
            # answered: assert_single_writer counts the writes the API server answered, and a write
            # still in flight (its answer not yet recorded) would leave that replica out
            for replica in op.replicas:
                calls = replica.traffic.writes(resource="configmaps", namespace=ns, name="shared")
                assert [call for call in calls if call.status is not None]

        eventually(both_wrote)
        with pytest.raises(AssertionError) as caught:
            assert_single_writer(op, window=60)
    message = str(caught.value)
    assert message.startswith("two writers: replicas of operator 'kopf_stamp'")
    assert f"configmaps {ns}/shared: written by kopf_stamp-0 and kopf_stamp-1" in message
    assert "patch configmaps" in message  # the requests, each with its replica
    assert "does not seem" not in message and "no replica has touched a Lease" in message
