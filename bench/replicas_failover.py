"""Time a 3-replica failover test on bare, end to end, and the leaderless gap it measures (medians).

Run: .venv/bin/python bench/replicas_failover.py [--runs 5]
One control plane serves every run; a namespace per run. A run is what a failover test does:
start 3 replicas and wait until they are ready, wait for the leader, kill it, create an object
and wait until the new leader reconciled it (``assert_failover``), close them. Operators: the
Go controller-runtime manager of fixtures/go-manager (``--leader-elect``, lease 2 s, renew
deadline 1.5 s, retry 0.25 s) and a kopf operator with peering (lifetime 2 s). Target: the whole
test within 10 s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.operators import build_go_binary, run_kopf, run_subprocess
from ktest.replicas import Failover, assert_failover, kopf_peering

ROOT = Path(__file__).resolve().parent.parent
GO_MANAGER = ROOT / "fixtures" / "go-manager"
KOPF_STAMP = ROOT / "tests" / "replicas" / "kopf_stamp.py"


def configmap(name: str, ns: str, labels: dict[str, str]) -> dict[str, Any]:
    metadata = {"name": name, "namespace": ns, "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": name}}


def go_run(cluster: Cluster, binary: Path, ns: str) -> Failover:
    args = [
        "--health-probe-bind-address=127.0.0.1:{port}", "--leader-elect", f"--leader-election-namespace={ns}",
        "--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1.5s",
        "--leader-elect-retry-period=0.25s",
    ]
    with run_subprocess(
        [binary], cluster, args=args, ready_http="http://127.0.0.1:{port}/readyz", replicas=3
    ) as op:
        return assert_failover(
            op, within=10,
            trigger=lambda: cluster.create(configmap("b", ns, {"ktest.dev/mirror": "true"})),
            check=lambda: cluster.get(("v1", "ConfigMap", "b-mirror", ns)),
        )


def kopf_run(cluster: Cluster, ns: str) -> Failover:
    kopf_peering(cluster, "bench", namespaces=[ns])

    def stamped() -> None:
        annotations = cluster.get(("v1", "ConfigMap", "b", ns))["metadata"].get("annotations") or {}
        assert annotations.get("ktest.dev/stamped") == "yes"

    with run_kopf(
        KOPF_STAMP, cluster, namespaces=[ns], replicas=3, peering="bench",
        configure=lambda settings: setattr(settings.peering, "lifetime", 2),
    ) as op:
        return assert_failover(
            op, within=10, trigger=lambda: cluster.create(configmap("b", ns, {"ktest.dev/stamp": "true"})),
            check=stamped,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binary = build_go_binary(GO_MANAGER)
    with ControlPlane() as plane, Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster:
        kinds: dict[str, Callable[[str], Failover]] = {
            "go manager (Lease)": lambda ns: go_run(cluster, binary, ns),
            "kopf (peering)": lambda ns: kopf_run(cluster, ns),
        }
        for kind, run in kinds.items():
            totals, gaps, reconciled = [], [], []
            for index in range(args.runs):
                with cluster.namespace(prefix=f"bench-{index}") as ns:
                    started = time.monotonic()
                    failover = run(ns)
                    totals.append(time.monotonic() - started)
                gaps.append(failover.gap)
                reconciled.append(failover.reconciled or 0.0)
                print(f"{kind} run {index + 1}: {totals[-1]:.2f} s ({failover.describe()})", flush=True)
            print(
                f"{kind}: whole test {statistics.median(totals):.2f} s, leaderless gap "
                f"{statistics.median(gaps):.2f} s, reconciled after {statistics.median(reconciled):.2f} s "
                f"(medians of {args.runs})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
