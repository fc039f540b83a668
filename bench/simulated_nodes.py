"""Simulated nodes (issue 45): start-up cost, Deployment availability against kind, scale, memory.

    .venv/bin/python bench/simulated_nodes.py [--runs 5] [--kind] [--scale]

Each round, interleaved so that machine load hits every scenario alike, measures:

- ``bare``: ``ControlPlane()`` started until ready (API server, controllers): today's baseline;
- ``bare+3``: ``ControlPlane(nodes=3)`` until ready (and every node Ready, untainted); the RSS of
  kube-scheduler and KWOK right after;
- ``deploy``: from nothing to a 3-replica Deployment with ``availableReplicas == 3``, created by an
  in-process operator (``run_callable``), cluster start included; and the part after the
  cluster was up;
- with ``--kind``, ``kind``: the same on a kind cluster (``KindBackend.start``, its node image;
  the Deployment runs the node's pause image), cluster creation included.

``--scale`` adds, once: 100 nodes registered (``ControlPlane(nodes=100)`` less the bare start), and
1,000 Pods (10 Deployments x 100) Running and Ready on 20 nodes. Medians, ratios against the
baselines of the same run, and the load average are printed last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktest.cluster import Cluster  # noqa: E402
from ktest.controlplane import ControlPlane  # noqa: E402
from ktest.operators import OperatorContext, run_callable  # noqa: E402


def deployment(name: str, namespace: str, replicas: int, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise SystemExit(f"bench: {what} did not happen within {timeout:.0f}s")


def available(cluster: Cluster, namespace: str, name: str, replicas: int) -> bool:
    status = cluster.get(("apps/v1", "Deployment", name, namespace)).get("status") or {}
    return status.get("availableReplicas") == replicas


def rss_mib(pid: int | None) -> float:
    if not pid:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_plane(nodes: int) -> tuple[float, dict[str, float]]:
    started = time.monotonic()
    with ControlPlane(nodes=nodes) as plane:
        elapsed = time.monotonic() - started
        memory = {name: rss_mib(process.pid) for name, process in plane.processes().items()}
    return elapsed, memory


def operator_deploys(cluster: Cluster, namespace: str, image: str) -> tuple[float, float]:
    """An in-process operator creates the Deployment; (seconds to available, from the operator's create)."""
    created: list[float] = []

    def operator(ctx: OperatorContext) -> None:
        ctx.cluster.create(deployment("web", namespace, 3, image))
        created.append(time.monotonic())
        ctx.ready()
        while not ctx.stopping:
            time.sleep(0.05)

    with run_callable(operator, cluster, proxy=False):
        wait_for(lambda: available(cluster, namespace, "web", 3), 300, "availableReplicas == 3")
        done = time.monotonic()
    return done, done - created[0]


def deploy_on_bare() -> tuple[float, float]:
    started = time.monotonic()
    with ControlPlane(nodes=3) as plane, Cluster(plane.kubeconfig) as cluster:
        cluster.create_namespace("bench")
        done, after_create = operator_deploys(cluster, "bench", "registry.example/web:1")
    return done - started, after_create


def deploy_on_kind(version: str | None) -> tuple[float, float]:
    from ktest.backends.kind.backend import KindBackend
    from ktest.config import Settings

    started = time.monotonic()
    backend = KindBackend.start(Settings(backend="kind", k8s_version=version))
    try:
        cluster = backend.cluster
        cluster.create_namespace("bench")
        image = backend.handle.pause_image() if hasattr(backend, "handle") else "registry.k8s.io/pause:3.10"
        done, after_create = operator_deploys(cluster, "bench", image)
    finally:
        backend.close()
    return done - started, after_create


def scale() -> None:
    bare, _ = start_plane(0)
    hundred, _ = start_plane(100)
    print(f"100 nodes registered: {hundred - bare:.2f} s over a bare start ({hundred:.2f} s in all)")
    with ControlPlane(nodes=20) as plane, Cluster(plane.kubeconfig) as cluster:
        cluster.create_namespace("bench")
        started = time.monotonic()
        for index in range(10):
            cluster.create(deployment(f"web{index}", "bench", 100, "registry.example/web:1"))
        wait_for(
            lambda: all(available(cluster, "bench", f"web{i}", 100) for i in range(10)),
            600,
            "1,000 Pods Ready",
        )
        print(f"1,000 Pods (10 Deployments x 100 on 20 nodes) available: {time.monotonic() - started:.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kind", action="store_true", help="also the same Deployment on a kind cluster")
    parser.add_argument("--scale", action="store_true", help="100 nodes and 1,000 Pods, once")
    parser.add_argument("--k8s-version", default=None)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    memory: dict[str, list[float]] = {}
    for round_number in range(1, args.runs + 1):
        bare, _ = start_plane(0)
        with_nodes, rss = start_plane(3)
        total, after = deploy_on_bare()
        found = {"bare": bare, "bare+3": with_nodes, "deploy": total, "deploy after create": after}
        if args.kind:
            kind_total, kind_after = deploy_on_kind(args.k8s_version)
            found |= {"kind deploy": kind_total, "kind deploy after create": kind_after}
        for name, value in found.items():
            samples.setdefault(name, []).append(value)
        for name in ("kube-scheduler", "kwok"):
            memory.setdefault(name, []).append(rss.get(name, 0.0))
        print(f"round {round_number}: " + ", ".join(f"{k} {v:.2f}s" for k, v in found.items()), flush=True)
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\nmedians of {args.runs} runs (load average {os.getloadavg()[0]:.2f}):")
    for name, value in median.items():
        print(f"  {name}: {value:.2f} s")
    print(f"  start-up cost of 3 simulated nodes: {median['bare+3'] - median['bare']:+.2f} s")
    print(
        "  RSS right after start: "
        + ", ".join(f"{name} {statistics.median(values):.0f} MiB" for name, values in memory.items())
    )
    if args.kind:
        print(
            "  deploy, cluster start included: bare+nodes / kind = "
            f"{median['deploy'] / median['kind deploy']:.3f}"
        )
    if args.scale:
        scale()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
