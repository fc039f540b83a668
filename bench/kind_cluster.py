"""kind backend: time to a usable cluster vs plain `kind create cluster --wait`, attach, memory.

Same node image, same config, runs interleaved, medians:

- ktest: ``KindBackend.start`` (orphan sweep, image choice, create, then waits for every node
  Ready, CoreDNS available, kube-proxy on every node and the default ServiceAccount);
- plain kind: ``kind create cluster --wait 5m`` (waits for the control-plane node Ready only);
  the baseline is measured in the same run with the same image and config;
- attach: a pytest run with ``--ktest-backend kind --ktest-reuse`` on a kept cluster, wall time
  of the whole run (interpreter start to exit) and time from session start to the first test;
- memory: the node container's memory (Docker stats) next to the embedded control plane's RSS
  (etcd + kube-apiserver + kube-controller-manager).

    .venv/bin/python bench/kind_cluster.py [--runs 3] [--k8s-version 1.37]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktest.backends.kind import KindBackend  # noqa: E402
from ktest.config import Settings  # noqa: E402
from ktest.kind.binary import resolve_kind  # noqa: E402
from ktest.kind.engine import cgroup_version, connect  # noqa: E402
from ktest.kind.nodeimage import choose_node_image  # noqa: E402
from ktest.kind.recipe import required_cluster_config  # noqa: E402


def ktest_ready(version: str) -> float:
    started = time.monotonic()
    backend = KindBackend.start(Settings(backend="kind", k8s_version=version))
    elapsed = time.monotonic() - started
    backend.close()
    return elapsed


def plain_kind_ready(kind: Path, image: str, config: dict[str, object], index: int) -> float:
    name = f"bench-plain-{os.getpid()}-{index}"
    with tempfile.TemporaryDirectory() as directory:
        config_path = Path(directory) / "kind.yaml"
        config_path.write_text(yaml.safe_dump(config))
        started = time.monotonic()
        subprocess.run(
            [
                str(kind),
                "create",
                "cluster",
                "--name",
                name,
                "--image",
                image,
                "--config",
                str(config_path),
                "--kubeconfig",
                str(Path(directory) / "kubeconfig"),
                "--wait",
                "5m",
            ],
            check=True,
            capture_output=True,
        )
        elapsed = time.monotonic() - started
        subprocess.run([str(kind), "delete", "cluster", "--name", name], check=True, capture_output=True)
    return elapsed


ATTACH_TEST = textwrap.dedent(
    """
    import time
    def test_first(cluster):
        print("FIRST-TEST", time.time(), flush=True)
        assert cluster.version
    """
)


def attach_times(version: str, runs: int) -> tuple[list[float], list[float]]:
    kept = KindBackend.start(Settings(backend="kind", k8s_version=version), purpose="up", kept=True)
    walls: list[float] = []
    to_first: list[float] = []
    try:
        kept.owned = False
        kept.close()
        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "test_attach.py").write_text(ATTACH_TEST)
            for _ in range(runs):
                started = time.time()
                finished = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-s",
                        "-p",
                        "no:cacheprovider",
                        "test_attach.py",
                        "--ktest-backend",
                        "kind",
                        "--ktest-reuse",
                        "--ktest-k8s-version",
                        version,
                    ],
                    cwd=directory,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                walls.append(time.time() - started)
                first = [line for line in finished.stdout.splitlines() if "FIRST-TEST" in line]
                if finished.returncode != 0 or not first:
                    raise SystemExit(f"attach run failed:\n{finished.stdout[-3000:]}")
                to_first.append(float(first[0].split()[-1]) - started)
    finally:
        kept.kind_cluster.delete()
    return walls, to_first


def node_memory(version: str) -> tuple[float, float]:
    """(kind node container MiB after settling, bare control plane RSS MiB)."""
    from ktest.controlplane import ControlPlane

    backend = KindBackend.start(Settings(backend="kind", k8s_version=version))
    try:
        time.sleep(20)  # let the node settle after start-up bursts (a measurement, not readiness)
        container = connect(check_runtime=False).containers.get(f"{backend.kind_cluster.name}-control-plane")
        stats = container.stats(stream=False)
        kind_mib = (
            stats["memory_stats"]["usage"] - stats["memory_stats"].get("stats", {}).get("cache", 0)
        ) / 2**20
    finally:
        backend.close()
    with ControlPlane(version) as plane:
        rss = 0
        for process in plane.processes().values():
            status = Path(f"/proc/{process.pid}/status").read_text()
            rss += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    return kind_mib, rss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--k8s-version", default=None)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()

    image = choose_node_image(args.k8s_version)
    version = image.version
    kind = resolve_kind()
    config = required_cluster_config(
        version, ktest_image=image.ktest_built, cgroup_version=cgroup_version(connect())
    )
    print(f"image {image.reference} (Kubernetes {version}), kind {kind}, {args.runs} interleaved runs")
    ktest_times, plain_times = [], []
    for index in range(args.runs):
        plain_times.append(plain_kind_ready(kind, image.reference, config, index))
        ktest_times.append(ktest_ready(version))
        print(
            f"  run {index + 1}: plain kind --wait {plain_times[-1]:.1f}s, ktest {ktest_times[-1]:.1f}s"
        )
    plain, ours = statistics.median(plain_times), statistics.median(ktest_times)
    print(
        f"cluster ready (median): plain `kind create cluster --wait` {plain:.1f}s (node Ready); "
        f"ktest {ours:.1f}s (nodes Ready + CoreDNS + kube-proxy + default SA): ratio {ours / plain:.2f}x"
    )
    walls, to_first = attach_times(version, args.runs)
    print(
        f"attach to a kept cluster (median of {args.runs}): pytest run {statistics.median(walls):.2f}s, "
        f"interpreter start to first test {statistics.median(to_first):.2f}s"
    )
    if not args.skip_memory:
        kind_mib, bare_mib = node_memory(version)
        print(f"memory: kind node container {kind_mib:.0f} MiB; bare control plane RSS {bare_mib:.0f} MiB")


if __name__ == "__main__":
    main()
