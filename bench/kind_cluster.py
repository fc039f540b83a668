"""kind backend: time to a usable cluster against plain kind, with a timeline; attach, memory.

Interleaved pairs (``--runs``, 5 by default, at most 9: each pair creates two clusters), same node image and
config, medians:

- plain: ``kind create cluster --wait 120s``, then the readiness checks ktest makes (every node
  Ready, CoreDNS available, kube-proxy on every node, the ``default`` ServiceAccount), polled
  every 0.1 s with the same check function (``ktest.backends.kind.cluster._not_yet_usable``);
- ktest: ``KindBackend.start`` (orphan sweep, image choice, config, create, private
  kubeconfig, wait until usable).

Each run prints a timeline (seconds from its start): kind's own steps as it reports them
(plain), ktest's phases, and when each readiness item was last seen missing. Every cluster is
deleted (plain: ``kind delete cluster``; ktest: its own teardown). The last line is
``kind usable: ktest/plain = X.XX``. ``--attach`` and ``--memory`` add the attach and memory
measures (a kept cluster; the node container's memory next to the bare control plane's RSS).

    .venv/bin/python bench/kind_cluster.py [--runs 5] [--k8s-version 1.37] [--attach] [--memory]
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ktest.backends.kind.cluster as kind_cluster  # noqa: E402
from ktest.backends.kind.backend import KindBackend  # noqa: E402
from ktest.backends.kind.binary import resolve_kind  # noqa: E402
from ktest.backends.kind.engine import cgroup_version, connect  # noqa: E402
from ktest.backends.kind.node_choice import choose_node_image  # noqa: E402
from ktest.backends.kind.recipe import required_cluster_config  # noqa: E402
from ktest.config import Settings  # noqa: E402

MAX_RUNS = 9


class Timeline:
    """Named moments, in seconds from the start of one run."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.marks: list[tuple[float, str]] = []

    def mark(self, what: str, at: float | None = None) -> None:
        self.marks.append((time.monotonic() - self.started if at is None else at, what))

    def show(self, title: str) -> None:
        print(f"    {title}:")
        for at, what in sorted(self.marks):
            print(f"      {at:6.2f}s  {what}")


def _readiness(kubeconfig: Path, timeline: Timeline, timeout: float = 300.0) -> None:
    """Poll ktest's readiness checks every 0.1 s; mark when each item was last missing."""
    from ktest.cluster import Cluster

    last_missing: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    with Cluster(kubeconfig) as client:
        while True:
            try:
                missing = kind_cluster._not_yet_usable(client)
            except Exception as error:  # the API server is still starting
                missing = [f"the API server to answer ({type(error).__name__})"]
            now = time.monotonic() - timeline.started
            for item in missing:
                last_missing[item.split(" (")[0]] = now
            if not missing:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"plain kind cluster not usable after {timeout:.0f}s: {missing}")
            time.sleep(0.1)
    for item, at in last_missing.items():
        timeline.mark(f"last missing: {item}", at)
    timeline.mark("usable (checks pass)")


def plain_kind_usable(
    kind: Path, image: str, config: dict[str, object], index: int
) -> tuple[float, Timeline]:
    name = f"bench-plain-{os.getpid()}-{index}"
    with tempfile.TemporaryDirectory() as directory:
        config_path = Path(directory) / "kind.yaml"
        config_path.write_text(yaml.safe_dump(config))
        kubeconfig = Path(directory) / "kubeconfig"
        timeline = Timeline()
        try:
            process = subprocess.Popen(
                [str(kind), "create", "cluster", "--name", name, "--image", image,
                 "--config", str(config_path), "--kubeconfig", str(kubeconfig), "--wait", "120s"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            )
            assert process.stdout is not None
            for line in process.stdout:  # kind reports each step as it ends
                text = line.strip()
                if text.startswith(("✓", "•")):
                    timeline.mark(f"kind: {text.lstrip('✓• ').strip()}")
            if process.wait() != 0:
                raise SystemExit(f"kind create cluster {name} failed")
            timeline.mark("kind create --wait returned")
            _readiness(kubeconfig, timeline)
            elapsed = time.monotonic() - timeline.started
        finally:
            subprocess.run([str(kind), "delete", "cluster", "--name", name, "--kubeconfig", os.devnull],
                           check=False, capture_output=True)
    return elapsed, timeline


@contextmanager
def _phases(timeline: Timeline) -> Iterator[None]:
    """Mark ktest's phases by wrapping the functions create_cluster calls."""
    originals: dict[str, Callable[..., Any]] = {}

    def wrap(name: str, label: Callable[..., str | None], after: Callable[[Any], None] | None = None) -> None:
        original = originals[name] = getattr(kind_cluster, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            what = label(*args, **kwargs)
            if what:
                timeline.mark(f"{what} begins")
            result = original(*args, **kwargs)
            if what:
                timeline.mark(f"{what} ends")
            if after is not None:
                after(result)
            return result

        setattr(kind_cluster, name, wrapper)

    def waited(result: Any) -> None:
        if isinstance(result, dict):
            base = next((at for at, what in timeline.marks if what == "wait usable begins"), 0.0)
            for item, at in result.items():
                timeline.mark(f"last missing: {item}", base + at)

    wrap("run_kind", lambda kind, args, **_: "kind " + " ".join(args[:2]) if args[:1] == ["create"] else None)
    wrap("_private_kubeconfig", lambda *_a, **_k: "private kubeconfig + CA key")
    wrap("wait_usable", lambda *_a, **_k: "wait usable", waited)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(kind_cluster, name, original)


def ktest_usable(version: str) -> tuple[float, Timeline]:
    timeline = Timeline()
    with _phases(timeline):
        backend = KindBackend.start(Settings(backend="kind", k8s_version=version))
    elapsed = time.monotonic() - timeline.started
    timeline.mark("KindBackend.start returned")
    began = time.monotonic()
    backend.close()
    print(f"    (ktest teardown {time.monotonic() - began:.1f}s)")
    return elapsed, timeline


ATTACH_TEST = textwrap.dedent(
    """
    import time
    def test_first(cluster):
        print("FIRST-TEST", time.time(), flush=True)
        assert cluster.version
    """
)


def kind_pytest(test_file: str, *options: str) -> list[str]:
    """The command of a quiet pytest run of ``test_file`` on the kind backend (output shown)."""
    return [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", test_file,
            "--ktest-backend", "kind", *options]


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
                    kind_pytest("test_attach.py", "--ktest-reuse", "--ktest-k8s-version", version),
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
        control_plane = f"{backend.kind_cluster.record.name}-control-plane"
        container = connect(check_runtime=False).containers.get(control_plane)
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
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--k8s-version", default=None)
    parser.add_argument("--attach", action="store_true", help="also time attaching to a kept cluster")
    parser.add_argument("--memory", action="store_true", help="also measure the node container's memory")
    args = parser.parse_args()
    runs = min(args.runs, MAX_RUNS)

    image = choose_node_image(args.k8s_version)
    version = image.version
    kind = resolve_kind()
    config = required_cluster_config(
        version, ktest_image=image.ktest_built, cgroup_version=cgroup_version(connect())
    )
    print(f"image {image.reference} (Kubernetes {version}), kind {kind}, {runs} interleaved pairs, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    ktest_times, plain_times, loads = [], [], []
    for index in range(runs):
        # The order alternates, so neither side always runs on a machine the other just warmed.
        if index % 2:
            ours, our_timeline = ktest_usable(version)
        plain, plain_timeline = plain_kind_usable(kind, image.reference, config, index)
        plain_times.append(plain)
        plain_timeline.show(f"run {index + 1} plain kind: usable after {plain:.1f}s")
        if not index % 2:
            ours, our_timeline = ktest_usable(version)
        ktest_times.append(ours)
        our_timeline.show(f"run {index + 1} ktest: usable after {ours:.1f}s")
        loads.append(os.getloadavg()[0])
        print(f"  run {index + 1}: plain {plain:.1f}s, ktest {ours:.1f}s, load {loads[-1]:.2f}", flush=True)
    plain, ours = statistics.median(plain_times), statistics.median(ktest_times)
    print(f"usable (median of {runs}): plain kind create --wait + checks {plain:.1f}s "
          f"({', '.join(f'{t:.1f}' for t in plain_times)}), ktest {ours:.1f}s "
          f"({', '.join(f'{t:.1f}' for t in ktest_times)}); load average median "
          f"{statistics.median(loads):.2f}, max {max(loads):.2f} on {os.cpu_count()} cores")
    if args.attach:
        walls, to_first = attach_times(version, runs)
        print(
            f"attach to a kept cluster (median of {runs}): pytest run {statistics.median(walls):.2f}s, "
            f"interpreter start to first test {statistics.median(to_first):.2f}s"
        )
    if args.memory:
        kind_mib, bare_mib = node_memory(version)
        print(f"memory: kind node container {kind_mib:.0f} MiB; bare control plane RSS {bare_mib:.0f} MiB")
    print(f"kind usable: ktest/plain = {ours / plain:.2f}")


if __name__ == "__main__":
    main()
