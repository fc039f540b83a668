"""What only a cluster with real nodes can do, as one handle: images, kubectl, port-forward, deploy.

``KindHandle`` is what the ``kind`` fixture gives a test (and what plain
Python gets from the kind backend): ``load_image``, ``kubectl``,
``port_forward``, ``collect_pod_logs`` (pod logs of a selector in the failure
report) and ``deploy_operator`` (the operator under test as an image plus
its manifests, Pod logs and restarts in the report).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ktest.backends.kind.kubectl import Kubectl, find_kubectl
from ktest.errors import KindError

if TYPE_CHECKING:
    from ktest.cluster import Cluster

_LOG_TAIL_LINES = 200
_DEPLOY_TIMEOUT = 180.0


class KindHandle:
    """A kind cluster seen from a test: ``name``, ``kubeconfig``, ``cluster`` and node-level helpers."""

    def __init__(self, name: str, kubeconfig: Path, version: str, kind: Path, cluster: Cluster) -> None:
        self.name = name
        self.kubeconfig = Path(kubeconfig)
        self.version = version
        self.kind = kind
        self.cluster = cluster

    def __repr__(self) -> str:
        return f"KindHandle({self.name!r}, kubeconfig={str(self.kubeconfig)!r})"

    @property
    def nodes(self) -> list[str]:
        from ktest.backends.kind.cluster import run_kind

        output = run_kind(self.kind, ["get", "nodes", "--name", self.name], what="listing kind nodes")
        return sorted(line.strip() for line in output.splitlines() if line.strip())

    def pause_image(self) -> str:
        """The pause image every node already holds (pinned): a container that surely starts offline."""
        from ktest.backends.kind.load import node_images

        for tags in node_images(self.nodes[0]).values():
            for tag in tags:
                if tag.rsplit(":", 1)[0].endswith("/pause"):
                    return tag
        raise KindError(f"no pause image in node {self.nodes[0]} of kind cluster {self.name}")

    @cached_property
    def _kubectl(self) -> Kubectl:
        return Kubectl(find_kubectl(self.version), self.kubeconfig)

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120.0) -> str:
        """Run kubectl against this cluster; returns stdout, raises KindError with stderr."""
        return self._kubectl(*args, input=input, timeout=timeout)

    @contextlib.contextmanager
    def port_forward(self, target: str, port: int, *, namespace: str | None = None) -> Iterator[int]:
        """``with kind.port_forward("svc/web", 80, namespace=ns) as local_port:``."""
        with self._kubectl.port_forward(target, port, namespace=namespace) as local:
            yield local

    def load_image(self, image: str, *, allow_latest: bool = False) -> list[str]:
        """Load a local Docker image into every node lacking it; returns the nodes loaded.

        An untagged/``:latest`` image is refused (the kubelet would try to pull it)
        unless ``allow_latest`` (the Pods then need ``imagePullPolicy: IfNotPresent``)."""
        from ktest.backends.kind.load import load_image

        return load_image(self.kind, self.name, self.nodes, image, allow_latest=allow_latest)

    def pod_logs(self, namespace: str, selector: str, *, tail: int = _LOG_TAIL_LINES) -> str:
        """Logs and restart counts of the pods matching ``selector`` (current and previous runs)."""
        try:
            pods = self.cluster.list("v1", "Pod", namespace, label_selector=selector)
        except Exception as error:
            return f"(cannot list pods {selector} in {namespace}: {error})"
        if not pods:
            return f"(no pods match {selector} in namespace {namespace})"
        parts = []
        for pod in pods:
            name = pod["metadata"]["name"]
            for status in pod.get("status", {}).get("containerStatuses") or ():
                container, restarts = status["name"], status.get("restartCount", 0)
                state = next(iter(status.get("state") or {"unknown": {}}))
                parts.append(f"--- pod {name}, container {container}: {state}, {restarts} restart(s)")
                if restarts:
                    parts.append(self._logs(namespace, name, container, tail, previous=True))
                    parts.append(f"--- pod {name}, container {container}: current run")
                parts.append(self._logs(namespace, name, container, tail, previous=False))
        return "\n".join(parts)

    def _logs(self, namespace: str, pod: str, container: str, tail: int, *, previous: bool) -> str:
        args = ["logs", "-n", namespace, pod, "-c", container, f"--tail={tail}"]
        if previous:
            args.append("--previous")
        try:
            return self.kubectl(*args).rstrip() or "(empty log)"
        except KindError as error:
            return f"(no log: {error})"

    def collect_pod_logs(self, namespace: str, selector: str, *, title: str | None = None) -> None:
        """Put the logs of pods matching ``selector`` in the report of the current test if it fails."""
        from ktest.run_context import add_report_section

        add_report_section(
            title or f"pod logs {selector} in {namespace}", lambda: self.pod_logs(namespace, selector)
        )

    def deploy_operator(
        self,
        image: str,
        manifests: str | Path | Sequence[Mapping[str, Any]],
        *,
        images: Mapping[str, str] | None = None,
        namespace: str | None = None,
        timeout: float = _DEPLOY_TIMEOUT,
    ) -> DeployedOperator:
        """Run the operator under test in the cluster: load ``image``, apply ``manifests``, wait.

        ``manifests`` is a kustomize directory (kubebuilder's ``config/default``),
        a YAML file or directory of plain manifests, or a list of objects.
        ``images`` rewrites container images by name (kubebuilder's placeholder
        ``controller`` → ``image`` is the default). Waits until every Deployment
        is Available; its Pod logs and restarts go to the failure report.
        """
        self.load_image(image)
        documents = self._render(manifests)
        replacements = {"controller": image, **(images or {})}
        for document in documents:
            _set_images(document, replacements)
            if namespace and document.get("kind") != "Namespace":
                metadata = document.setdefault("metadata", {})
                metadata.setdefault("namespace", namespace)
        apply = ("apply", "--server-side", "--force-conflicts", "--field-manager", "ktest", "-f", "-")
        self.kubectl(*apply, input=yaml.safe_dump_all(documents))
        deployments = [
            (
                doc["metadata"].get("namespace") or namespace or "default",
                doc["metadata"]["name"],
                _selector(doc),
            )
            for doc in documents
            if doc.get("kind") == "Deployment"
        ]
        if not deployments:
            raise KindError(
                "deploy_operator: the manifests hold no Deployment, so there is nothing to wait for; "
                "give the operator's Deployment (kubebuilder: config/default)"
            )
        deployed = DeployedOperator(self, image, deployments)
        from ktest.run_context import add_report_section

        add_report_section(f"in-cluster operator {image}", deployed.report)
        deployed.wait_available(timeout)
        return deployed

    def _render(self, manifests: str | Path | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(manifests, (str, Path)):
            path = Path(manifests)
            if path.is_dir() and any(
                (path / n).is_file() for n in ("kustomization.yaml", "kustomization.yml")
            ):
                text = self.kubectl("kustomize", str(path))
                return [doc for doc in yaml.safe_load_all(text) if doc]
            from ktest.cluster.manifests import load_manifests

            return load_manifests(path)
        return [dict(doc) for doc in manifests]


def _selector(deployment: Mapping[str, Any]) -> str:
    labels = (deployment.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _set_images(document: dict[str, Any], replacements: Mapping[str, str]) -> None:
    spec = (document.get("spec") or {}).get("template", {}).get("spec") or {}
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        current = str(container.get("image", ""))
        name = current.rsplit("@", 1)[0]
        repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
        if repository in replacements:
            container["image"] = replacements[repository]
            container["imagePullPolicy"] = "IfNotPresent"


@dataclass
class DeployedOperator:
    """An operator running in the cluster: its Deployments, logs and restarts."""

    kind: KindHandle
    image: str
    deployments: list[tuple[str, str, str]]  # (namespace, name, pod selector)
    _started: float = field(default_factory=time.monotonic)

    def wait_available(self, timeout: float = _DEPLOY_TIMEOUT) -> None:
        """Wait until every Deployment has all replicas available; fail with Pod states and logs."""
        deadline = time.monotonic() + timeout
        while True:
            pending = [f"{ns}/{name}" for ns, name, _ in self.deployments if not self._available(ns, name)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KindError(
                    f"in-cluster operator {self.image}: Deployment {', '.join(pending)} not Available after "
                    f"{timeout:.0f}s.\n{self.report()}"
                )
            time.sleep(0.5)

    def _available(self, namespace: str, name: str) -> bool:
        obj = self.kind.cluster.get_or_none(("apps/v1", "Deployment", name, namespace))
        if obj is None:
            return False
        wanted = obj.get("spec", {}).get("replicas", 1)
        status = obj.get("status", {})
        return (status.get("availableReplicas") or 0) >= wanted and (
            status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
        )

    def restarts(self) -> int:
        """Container restarts across the operator's pods (a crash loop shows here)."""
        total = 0
        for namespace, _, selector in self.deployments:
            for pod in self.kind.cluster.list("v1", "Pod", namespace, label_selector=selector):
                total += sum(
                    s.get("restartCount", 0) for s in pod.get("status", {}).get("containerStatuses") or ()
                )
        return total

    def logs(self) -> str:
        return "\n".join(self.kind.pod_logs(ns, selector) for ns, _, selector in self.deployments)

    def report(self) -> str:
        lines = [
            f"image {self.image}; deployments: {', '.join(f'{ns}/{n}' for ns, n, _ in self.deployments)}"
        ]
        try:
            lines.append(f"container restarts: {self.restarts()}")
        except Exception as error:
            lines.append(f"(restarts unknown: {error})")
        lines.append(self.logs())
        return "\n".join(lines)
