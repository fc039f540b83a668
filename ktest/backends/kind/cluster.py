"""A kind cluster ktest created: create, wait until usable, inspect, delete, export logs.

The ``kind`` CLI drives the lifecycle; the Docker SDK answers questions about node
containers. Creation is recorded before ``kind create cluster`` runs
(:mod:`ktest.backends.kind.records`), so a run killed mid-creation still leaves a record the
next sweep finds. ``kind create cluster --wait`` returns success even when its wait timed out,
so ktest waits itself (:func:`wait_usable`), failing fast when a node container stops or a
system image is not in the node.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ktest.backends.kind import on_death, records
from ktest.backends.kind.kubeadm_patches import with_kubeadm_patches, write_patches
from ktest.backends.kind.records import ClusterRecord
from ktest.base.janitor_client import JanitorHandle
from ktest.base.procfs import write_private_file
from ktest.errors import KindError

_LOG_TAIL_LINES = 20
CREATE_TIMEOUT = 600.0
USABLE_TIMEOUT = 300.0
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
# Waiting on these reasons is pointless: nothing can be pulled, the image is simply not in the node.
_HOPELESS_WAITING = ("ErrImageNeverPull", "InvalidImageName")


def run_kind(
    kind: Path, args: list[str], *, what: str, timeout: float = 120.0, log: Path | None = None
) -> str:
    """Run ``kind args``; raise KindError with the output's tail (and the log path) on failure."""
    try:
        finished = subprocess.run(
            [str(kind), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise KindError(f"{what}: `kind {' '.join(args[:2])}` did not finish in {timeout:.0f}s") from error
    except OSError as error:
        raise KindError(f"{what}: cannot run {kind}: {error}") from error
    output = (finished.stdout or "") + (finished.stderr or "")
    if log is not None:
        write_private_file(log, output.encode())
    if finished.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-_LOG_TAIL_LINES:])
        where = f" (full output: {log})" if log is not None else ""
        raise KindError(
            f"{what}: `kind {' '.join(args[:2])}` exited with {finished.returncode}{where}:\n{tail}"
        )
    return finished.stdout


def existing_clusters(kind: Path) -> list[str]:
    """Names of every kind cluster on the engine (``kind get clusters``)."""
    output = run_kind(kind, ["get", "clusters"], what="listing kind clusters")
    return [line.strip() for line in output.splitlines() if line.strip()]


@dataclass
class KindCluster:
    """A kind cluster ktest created (or attached to by its record, where its name, version and
    kubeconfig are read).

    ``janitor`` (owned clusters only) deletes the cluster if this process dies
    without doing so (kill -9, a crash): a tiny separate process watching a pipe.
    """

    record: ClusterRecord
    kind: Path
    janitor: JanitorHandle | None = None
    records_dir: Path | None = None
    """Where its record is (None: the default records directory)."""

    @classmethod
    def held(cls, record: ClusterRecord, kind: Path, record_path: Path) -> KindCluster:
        """The cluster of ``record``, held by this process: its janitor deletes it if we die first."""
        janitor = JanitorHandle(Path(record.directory))
        janitor.on_death(on_death.command(kind, record.name, record_path, Path(record.directory)))
        return cls(record, kind, janitor, record_path.parent)

    @property
    def directory(self) -> Path:
        return Path(self.record.directory)

    def stopped(self) -> str | None:
        """Why the cluster cannot serve tests any more (a node container not running), or None."""
        return cluster_stopped(self.record.name)

    def export_logs(self, destination: Path) -> Path:
        """``kind export logs``: node journal, kubelet, containerd, control-plane pods."""
        destination.mkdir(parents=True, exist_ok=True)
        run_kind(
            self.kind,
            ["export", "logs", str(destination), "--name", self.record.name],
            what=f"exporting the logs of kind cluster {self.record.name}",
            timeout=300.0,
        )
        return destination

    def delete(self) -> None:
        """Delete the cluster, its private directory and its record. Idempotent."""
        delete_cluster(self.kind, self.record, self.records_dir)
        self.release_janitor()

    def release_janitor(self) -> None:
        """This process took care of the cluster (deleted or kept it): the janitor has nothing to do."""
        janitor, self.janitor = self.janitor, None
        if janitor is not None:
            janitor.release()


def node_containers(name: str, client: Any = None) -> list[Any]:
    """The Docker containers of kind cluster ``name``'s nodes (running or not)."""
    from ktest.backends.kind.engine import connect

    client = client or connect(check_runtime=False)
    return list(client.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={name}"}))


def cluster_stopped(name: str, client: Any = None) -> str | None:
    """Why kind cluster ``name`` cannot serve tests (engine gone, node container stopped), or None."""
    from docker.errors import DockerException

    try:
        containers = node_containers(name, client)
    except (KindError, DockerException) as error:
        return f"the kind cluster {name} is unreachable: the Docker engine does not answer ({error})"
    if not containers:
        return f"the kind cluster {name} stopped: its node containers are gone"
    down = [f"{c.name} ({c.status})" for c in containers if c.status != "running"]
    if down:
        return f"the kind cluster {name} stopped: node container {', '.join(down)} is not running"
    return None


def delete_cluster(kind: Path, record: ClusterRecord, directory: Path | None = None) -> None:
    """``kind delete cluster`` (a no-op for a cluster that is gone), then the files and record.

    A half-made cluster (no kubeconfig yet: ``kind create`` was stopped) is deleted until it stays
    deleted (:func:`ktest.backends.kind.on_death.delete_until_settled`).
    """
    from docker.errors import DockerException

    def left() -> list[Any]:
        with contextlib.suppress(KindError, DockerException):  # e.g. a container gone while listed
            return node_containers(record.name)
        return []

    delete = ["delete", "cluster", "--name", record.name, "--kubeconfig", os.devnull]
    on_death.delete_until_settled(
        lambda: run_kind(kind, delete, what=f"deleting kind cluster {record.name}", timeout=180.0),
        left,
        half_made=not record.kubeconfig.is_file(),
        poll=0.25,
    )
    records.forget(record, directory)


def create_cluster(
    kind: Path,
    *,
    name: str | None = None,
    image: str,
    version: str,
    config: Mapping[str, Any],
    purpose: str = "run",
    kept: bool = False,
    spare: str = "",
    timeout: float = USABLE_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    records_dir: Path | None = None,
) -> KindCluster:
    """Create a kind cluster named ``name`` (default: a new name for ``purpose``) and wait until
    tests can use it.

    ``spare`` (a pool fingerprint) records the cluster as a spare being made
    (:mod:`ktest.backends.kind.pool`).

    Raises KindError (after deleting whatever was created) when creation fails
    or the cluster does not become usable in ``timeout`` seconds.
    """
    say = progress or (lambda _message: None)
    name = name or records.new_cluster_name(purpose)
    records.check_cluster_name(name)
    if name in existing_clusters(kind):
        recorded = records.read_record(name, records_dir)
        raise KindError(
            f"a kind cluster named {name!r} already exists"
            + (
                " (created by ktest; `ktest down` removes it)"
                if recorded is not None
                else " and ktest did not create it, so ktest will not touch it; pick another name"
            )
        )
    directory = Path(tempfile.mkdtemp(prefix=f"ktest-kind-{name}-"))
    os.chmod(directory, 0o700)
    record = records.held_by_this_process(name, directory, image, version, purpose, spare)
    if kept:
        record = _kept(record)
    cluster = KindCluster.held(record, kind, records.write_record(record, records_dir))
    try:
        config_path = directory / "kind-config.yaml"
        config = with_kubeadm_patches(config, write_patches(directory))
        write_private_file(config_path, yaml.safe_dump(config, sort_keys=False).encode())
        started = time.monotonic()
        say(f"creating kind cluster {name} from {image} ...")
        create = ["create", "cluster", "--name", name, "--image", image, "--config", str(config_path)]
        run_kind(
            kind,
            [*create, "--kubeconfig", str(directory / "kind.kubeconfig")],
            what=f"creating kind cluster {name} (image {image})",
            timeout=CREATE_TIMEOUT,
            log=directory / "create.log",
        )
        say(
            f"kind cluster {name}: nodes up after {time.monotonic() - started:.1f}s; waiting until usable ..."
        )
        _private_kubeconfig(cluster)
        nodes_up = time.monotonic() - started
        waited = wait_usable(cluster, timeout=timeout)
        slowest = ", ".join(
            f"{what} until {nodes_up + at:.0f}s"
            for what, at in sorted(waited.items(), key=lambda item: item[1])[-3:]
        )
        say(f"kind cluster {name}: usable after {time.monotonic() - started:.1f}s (waited for {slowest})")
        if kept:
            cluster.release_janitor()
        return cluster
    except BaseException:
        with contextlib.suppress(Exception):
            delete_cluster(kind, record, records_dir)
        cluster.release_janitor()
        raise


def _kept(record: ClusterRecord) -> ClusterRecord:
    return replace(record, kept=True, owner_pid=0, owner_start="")


def keep(cluster: KindCluster, records_dir: Path | None = None) -> None:
    """Mark the cluster as kept: no sweep removes it; ``ktest down`` does."""
    cluster.record = _kept(cluster.record)
    records.write_record(cluster.record, records_dir)
    cluster.release_janitor()


# -------------------------------------------------------------------- credentials


def _private_kubeconfig(cluster: KindCluster) -> None:
    """Turn kind's kubeconfig (embedded certificates) into files in the 0700 directory.

    The kubernetes client copies embedded certificate data to ``$TMPDIR``,
    where it would outlive a killed run; file references are used as they are.
    The CA key is copied from the control-plane node so ``cluster.user(...)``
    can issue client certificates as on the embedded control plane.
    """
    directory, name = cluster.directory, cluster.record.name
    raw = yaml.safe_load((directory / "kind.kubeconfig").read_text())
    certs = directory / "certs"
    certs.mkdir(mode=0o700, exist_ok=True)
    served, user = raw["clusters"][0]["cluster"], raw["users"][0]["user"]
    server = {"server": served["server"], "certificate-authority": str(certs / "ca.crt")}
    files = {
        "ca.crt": base64.b64decode(served["certificate-authority-data"]),
        "admin.crt": base64.b64decode(user["client-certificate-data"]),
        "admin.key": base64.b64decode(user["client-key-data"]),
    }
    with contextlib.suppress(KindError):  # without the CA key only cluster.user() is unavailable
        files["ca.key"] = copy_from_node(f"{name}-control-plane", "/etc/kubernetes/pki/ca.key")
    for filename, content in files.items():
        write_private_file(certs / filename, content)
    admin = {"client-certificate": str(certs / "admin.crt"), "client-key": str(certs / "admin.key")}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": server}],
        "users": [{"name": "kind-admin", "user": admin}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "kind-admin"}}],
        "current-context": name,
    }
    write_private_file(cluster.record.kubeconfig, yaml.safe_dump(config, sort_keys=False))
    (directory / "kind.kubeconfig").unlink()


def read_container_file(container: Any, path: str) -> bytes | None:
    """The content of the file ``path`` in a Docker container (its archive API); None when ``path``
    is not a regular file."""
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        member = archive.extractfile(archive.getmembers()[0])
        return None if member is None else member.read()


def copy_from_node(node: str, path: str) -> bytes:
    """The content of one file inside a node container."""
    from docker.errors import DockerException

    from ktest.backends.kind.engine import connect

    try:
        content = read_container_file(connect().containers.get(node), path)
    except (DockerException, tarfile.TarError, IndexError) as error:
        raise KindError(f"cannot read {path} from kind node {node}: {error}") from error
    if content is None:
        raise KindError(f"{path} in kind node {node} is not a regular file")
    return content


# -------------------------------------------------------------------- readiness


def wait_usable(cluster: KindCluster, *, timeout: float = USABLE_TIMEOUT) -> dict[str, float]:
    """Wait until nodes are Ready, CoreDNS available, kube-proxy running, ServiceAccount present.

    Returns when each awaited thing was last seen missing (seconds from the start), so a slow
    start can be told apart (``ktest: kind cluster ...: usable after ...`` prints it).
    """
    from ktest.cluster import Cluster

    started = time.monotonic()
    deadline = started + timeout
    missing: list[str] = ["the API server to answer"]
    last_missing: dict[str, float] = {}
    with Cluster(cluster.record.kubeconfig, name=cluster.record.name) as client:
        while True:
            stopped = cluster.stopped()
            if stopped:
                raise KindError(f"{stopped}; it never became usable")
            try:
                missing = _not_yet_usable(client)
                hopeless = _hopeless_pods(client)
            except Exception as error:  # the API server is still starting
                missing, hopeless = [f"the API server to answer ({type(error).__name__})"], []
            if hopeless:
                raise KindError(
                    f"kind cluster {cluster.record.name} cannot become usable: "
                    + "; ".join(hopeless)
                    + f". The node image {cluster.record.image} lacks a system image; rebuild it "
                    "(`ktest kind build-image --force`)"
                )
            for item in missing:
                last_missing[item.split(" (")[0]] = round(time.monotonic() - started, 1)
            if not missing:
                return last_missing
            if time.monotonic() > deadline:
                pods = _system_pod_summary(client)
                raise KindError(
                    f"kind cluster {cluster.record.name} was not usable after {timeout:.0f}s: "
                    "still waiting for "
                    + "; ".join(missing)
                    + (f".\nkube-system pods: {pods}" if pods else "")
                    + f"\nNode logs: `kind export logs --name {cluster.record.name}`"
                )
            time.sleep(USABLE_POLL_INTERVAL)


USABLE_POLL_INTERVAL = 0.2
"""Seconds between readiness rounds (7 small requests and one Docker call each): the last
item usually turns ready between two rounds, so this is the average cost of noticing (0.5 s
cost 0.25 s on average; much shorter would take CPU from a node that is still starting)."""


def usable_now(cluster: KindCluster) -> str | None:
    """Why ``cluster`` cannot serve tests right now (one round of the readiness checks), or None.

    For a cluster made earlier (a spare of the pool): no waiting, a problem is the answer.
    """
    from ktest.cluster import Cluster

    stopped = cluster.stopped()
    if stopped:
        return stopped
    if not cluster.record.kubeconfig.is_file():
        return f"its kubeconfig {cluster.record.kubeconfig} is gone"
    try:
        with Cluster(cluster.record.kubeconfig, name=cluster.record.name) as client:
            missing = _not_yet_usable(client)
    except Exception as error:  # refused, timed out, TLS: all mean "not usable"
        return f"its API server does not answer ({type(error).__name__}: {error})"
    return f"it lacks {'; '.join(missing)}" if missing else None


def _not_yet_usable(client: Any) -> list[str]:
    missing = []
    nodes = client.list("v1", "Node")
    if not nodes:
        missing.append("a Node object")
    for node in nodes:
        conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or ()}
        if conditions.get("Ready") != "True":
            missing.append(f"node {node['metadata']['name']} to be Ready")
    coredns = client.get_or_none(("apps/v1", "Deployment", "coredns", "kube-system"))
    if coredns is None:
        missing.append("the coredns Deployment")
    else:
        wanted = coredns.get("spec", {}).get("replicas", 1)
        available = coredns.get("status", {}).get("availableReplicas") or 0
        if available < max(1, wanted):
            missing.append(f"CoreDNS ({available}/{wanted} replicas available)")
    proxy = client.get_or_none(("apps/v1", "DaemonSet", "kube-proxy", "kube-system"))
    if proxy is None:
        missing.append("the kube-proxy DaemonSet")
    else:
        status = proxy.get("status", {})
        desired, ready = status.get("desiredNumberScheduled") or 0, status.get("numberAvailable") or 0
        if desired == 0 or ready < desired:
            missing.append(f"kube-proxy ({ready}/{desired} nodes)")
    if client.get_or_none(("v1", "ServiceAccount", "default", "default")) is None:
        missing.append("the default ServiceAccount")
    return missing


def _hopeless_pods(client: Any) -> list[str]:
    found = []
    for pod in client.list("v1", "Pod", "kube-system"):
        for status in pod.get("status", {}).get("containerStatuses") or ():
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _HOPELESS_WAITING:
                found.append(
                    f"pod {pod['metadata']['name']}: {waiting['reason']} ({waiting.get('message', '')})"
                )
    return found


def _system_pod_summary(client: Any) -> str:
    try:
        pods = client.list("v1", "Pod", "kube-system")
    except Exception:
        return ""
    parts = []
    for pod in pods:
        reasons = [
            ((s.get("state") or {}).get("waiting") or {}).get("reason")
            for s in pod.get("status", {}).get("containerStatuses") or ()
        ]
        reason = ", ".join(r for r in reasons if r)
        parts.append(
            f"{pod['metadata']['name']} {pod.get('status', {}).get('phase')}"
            + (f" ({reason})" if reason else "")
        )
    return ", ".join(parts)
