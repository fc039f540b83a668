"""The Go controller-runtime manager of fixtures/go-manager run as replicas with its own Lease
election: failover after a kill and after a network cut; a lease too long for the bound fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktest.cluster import Cluster
from ktest.operators import run_subprocess
from ktest.replicas import assert_failover, assert_single_writer
from ktest.wait import eventually

PROBE = ["--health-probe-bind-address=127.0.0.1:{port}"]
READYZ = "http://127.0.0.1:{port}/readyz"
LABELS = {"ktest.dev/mirror": "true"}
LEASE = 2.0  # seconds: a killed leader's lease expires this long after its last renewal


def election(ns: str, lease: float = LEASE) -> list[str]:
    return [
        "--leader-elect",
        f"--leader-election-namespace={ns}",
        f"--leader-elect-lease-duration={lease}s",
        f"--leader-elect-renew-deadline={lease * 0.75}s",
        "--leader-elect-retry-period=0.25s",
    ]


def source(name: str, ns: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": ns, "labels": LABELS}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": name}}


def mirrored(admin: Cluster, ns: str, name: str) -> None:
    assert admin.get(("v1", "ConfigMap", f"{name}-mirror", ns))["data"] == {"k": name}


def test_go_manager_replicas_fail_over_after_kill_and_partition(
    admin: Cluster, ns: str, go_manager: Path
) -> None:
    # a deposed leader takes 1.5 s to exit: it is still running when the failover is over
    args = [*PROBE, *election(ns), "--exit-delay=1.5s"]
    with run_subprocess([go_manager], admin, args=args, ready_http=READYZ, replicas=3) as op:
        assert op.names == ["go-manager-0", "go-manager-1", "go-manager-2"]
        first = op.wait_leader()
        lease = op.leadership()
        assert lease.lock is not None and lease.lock.describe() == f"Lease {ns}/go-manager.ktest.dev"
        assert lease.term == LEASE
        admin.create(source("a", ns))
        eventually(lambda: mirrored(admin, ns, "a"))
        assert op.leadership().last_writer == first  # the Lease and the writes agree

        killed = assert_failover(
            op, within=4 * LEASE, trigger=lambda: admin.create(source("b", ns)),
            check=lambda: mirrored(admin, ns, "b"),
        )
        assert killed.old_leader == f"go-manager-{first}" and killed.gap > 0
        second = op.leader()
        assert second is not None and second != first

        cut = assert_failover(op, within=4 * LEASE, how="partition")
        assert cut.old_leader == f"go-manager-{second}"
        assert op.partitioned == [second]
        # controller-runtime exits once it cannot renew its lease, the cut's consequence even
        # if it comes after the heal: heal waits for it and starts it again, as the kubelet does
        op.heal(second)
        assert op.replicas[second].alive and op.partitioned == []
        restarted = f"restarted go-manager-{second} (it exited while cut off)"
        assert [text for _, text in op.events][-1] == restarted
        assert_single_writer(op, window=LEASE / 2)
        op.replicas[second].check()  # its exit was the cut's: no error left to report


def test_go_manager_lease_longer_than_the_bound_misses_failover(
    admin: Cluster, ns: str, go_manager: Path
) -> None:
    args = [*PROBE, *election(ns, lease=60)]
    with run_subprocess([go_manager], admin, args=args, ready_http=READYZ, replicas=2) as op:
        op.wait_leader()
        with pytest.raises(AssertionError) as caught:
            assert_failover(op, within=2)
    message = str(caught.value)
    assert "failover missed its bound" in message
    assert "no other replica of 'go-manager' led within 2 s; leaderless gap measured: more than 2." in message
    assert f"Lease {ns}/go-manager.ktest.dev names" in message
    assert "Its term, 60 s after each renewal, is not shorter than the bound 2 s" in message
