"""Simulated nodes for a control plane: kube-scheduler places Pods, KWOK plays the kubelet.

:class:`SimulatedNodes` is the control plane's add-on (``ControlPlane(nodes=3)``): once the API
server is ready it installs KWOK's Stage CRD and ktest's default Stages
(:mod:`ktest.nodes.stages`), creates the Node objects, and launches kube-scheduler and KWOK; the
plane is ready when every node is Ready and untainted (the node-lifecycle controller lifts the
``not-ready`` taint the API server puts on a new Node).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ktest.assets.bundle import Assets
from ktest.base.process import ManagedProcess, component_environment
from ktest.errors import ControlPlaneError
from ktest.nodes.assets import NodeTools, node_tools
from ktest.nodes.node_objects import NODE_NAME_PREFIX, node_object, node_problem
from ktest.nodes.stages import default_stages

Request = Callable[..., "tuple[int, bytes]"]
"""``request(method, path, timeout=, headers=, body=) -> (status, body)`` with admin rights."""

# kube-controller-manager's controllers Pods need: workloads, their endpoints and clean-up, and
# node-lifecycle, which lifts the not-ready taint once KWOK reports a node Ready.
WORKLOAD_CONTROLLERS = (
    "deployment",
    "replicaset",
    "statefulset",
    "daemonset",
    "job",
    "cronjob",
    "ttl-after-finished",
    "endpointslice",
    "serviceaccount",
    "pod-garbage-collector",
    "node-lifecycle",
    "taint-eviction",
    "disruption",
)
# How often node-lifecycle looks at nodes (default 5 s): a node KWOK stops reporting is noticed sooner.
CONTROLLER_MANAGER_FLAGS = ("--node-monitor-period=1s",)
POD_CIDR = "10.244.0.0/16"
_STAGES = "/apis/kwok.x-k8s.io/v1alpha1/stages"
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPLY = "application/apply-patch+yaml"
JSON = "application/json"
_POLL = 0.05


class SimulatedNodes:
    """``count`` simulated nodes (``ktest-node-1``...) and the processes that run them."""

    def __init__(self, count: int) -> None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ControlPlaneError(
                f"nodes= must be a whole number of simulated nodes (0 for none), got {count!r}."
            )
        self.count = count
        self.tools: NodeTools | None = None
        self._scheduler: ManagedProcess | None = None
        self._kwok: ManagedProcess | None = None
        self._request: Request | None = None

    # -- what the control plane asks ------------------------------------------------
    @property
    def controllers(self) -> tuple[str, ...]:
        return WORKLOAD_CONTROLLERS if self.count else ()

    @property
    def controller_manager_flags(self) -> tuple[str, ...]:
        return CONTROLLER_MANAGER_FLAGS if self.count else ()

    def prepare(self, assets: Assets) -> None:
        """Find (or install) kube-scheduler and KWOK before any process starts."""
        if self.count:
            from ktest.assets.progress import Progress

            self.tools = node_tools(assets, Progress())

    def processes(self) -> dict[str, ManagedProcess]:
        found = {"kube-scheduler": self._scheduler, "kwok": self._kwok}
        return {name: process for name, process in found.items() if process is not None}

    def describe(self) -> str:
        return (
            f"{self.count} simulated nodes (kube-scheduler + KWOK {self.tools.kwok_version})"
            if self.tools
            else ""
        )

    def start(self, *, request: Request, plane: Any, version: str, log_note: str) -> None:
        """``plane``'s API server (``version``) is ready: install the Stages and nodes, launch the
        scheduler and KWOK with the plane's admin kubeconfig, logs in its directory."""
        if not self.count or self.tools is None:
            return
        kubeconfig, directory = plane.kubeconfig_path, plane.directory
        self._request = request
        self._scheduler = _scheduler_process(self.tools.kube_scheduler, kubeconfig, directory)
        self._launch(self._scheduler, log_note)
        self._install_stage_crd()
        for index in range(1, self.count + 1):
            self.create_node(node_object(f"{NODE_NAME_PREFIX}{index}", index), exist_ok=True)
        self._wait_for_stages_served()
        self._kwok = _kwok_process(self.tools.kwok, kubeconfig, directory)
        self._launch(self._kwok, log_note)
        for stage_object in default_stages(version):
            self.write_stage(stage_object)

    def wait_until_ready(self, timeout: float) -> None:
        """Every node ``ktest-node-*`` Ready and without the not-ready taint; ControlPlaneError naming
        what was missing (and the KWOK log's tail) at ``timeout``."""
        if not self.count:
            return
        deadline = time.monotonic() + timeout
        problems: list[str] = []
        while time.monotonic() < deadline:
            self._check_alive()
            problems = self._node_problems()
            if not problems:
                return
            time.sleep(_POLL)
        kwok = self._kwok.log_tail() if self._kwok else ""
        raise ControlPlaneError(
            f"the simulated nodes were not ready within {timeout:.0f}s: {'; '.join(problems)}.\n"
            f"KWOK's log ends:\n{kwok}\nIs node-lifecycle among the controllers (it lifts the "
            "not-ready taint)?"
        )

    def stop(self, timeout: float) -> None:
        for process in (self._kwok, self._scheduler):
            if process is not None:
                process.terminate()
        for process in (self._kwok, self._scheduler):
            if process is not None:
                process.stop(timeout)
        self._kwok = self._scheduler = None

    # -- objects --------------------------------------------------------------------
    def call(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, content_type: str = JSON
    ) -> tuple[int, Any]:
        """One API request as the admin: (status, decoded JSON or None)."""
        if self._request is None:
            raise ControlPlaneError("the simulated nodes are not started")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        status, raw = self._request(method, path, timeout=10.0, headers=headers, body=data)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def create_node(self, node: Mapping[str, Any], *, exist_ok: bool = False) -> None:
        self._expect(
            self.call("POST", "/api/v1/nodes", node),
            f"creating node {node['metadata']['name']}",
            exist_ok=exist_ok,
        )

    def write_stage(self, stage: Mapping[str, Any]) -> None:
        """Server-side apply: a create of a kind whose CRD was established in the last two seconds
        waits two seconds in the API server (for other API servers to see it), an apply does not."""
        name = stage["metadata"]["name"]
        path = f"{_STAGES}/{name}?fieldManager=ktest&force=true"
        self._expect(self.call("PATCH", path, stage, APPLY), f"writing KWOK Stage {name}")

    def _expect(self, answer: tuple[int, Any], what: str, *, exist_ok: bool = False) -> None:
        status, body = answer
        if 200 <= status < 300 or (exist_ok and status == 409):
            return
        message = body.get("message") if isinstance(body, dict) else body
        raise ControlPlaneError(f"{what} failed: HTTP {status}: {message}")

    # -- internals --------------------------------------------------------------------
    def _launch(self, process: ManagedProcess, log_note: str) -> None:
        process.log_note = log_note
        process.start()

    def _check_alive(self) -> None:
        for process in (self._scheduler, self._kwok):
            if process is not None and not process.running:
                raise process.failure("exited while the simulated nodes started")

    def _install_stage_crd(self) -> None:
        assert self.tools is not None
        crd = yaml.safe_load(self.tools.stage_crd.read_text())
        self._expect(self.call("POST", _CRDS, crd), "installing KWOK's Stage CRD", exist_ok=True)

    def _wait_for_stages_served(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, _ = self.call("GET", f"{_STAGES}?limit=1")
            if status == 200:
                return
            time.sleep(_POLL)
        raise ControlPlaneError(f"KWOK's Stage CRD was not served within {timeout:.0f}s")

    def _node_problems(self) -> list[str]:
        status, body = self.call("GET", "/api/v1/nodes")
        if status != 200 or not isinstance(body, dict):
            return [f"listing nodes gave HTTP {status}"]
        nodes = {item["metadata"]["name"]: item for item in body.get("items") or []}
        problems = []
        for index in range(1, self.count + 1):
            name = f"{NODE_NAME_PREFIX}{index}"
            problem = node_problem(nodes.get(name)) if name in nodes else "missing"
            if problem:
                problems.append(f"{name}: {problem}")
        return problems


def _scheduler_process(binary: Path, kubeconfig: Path, directory: Path) -> ManagedProcess:
    config = directory / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    command = [str(binary), f"--config={config}", "--secure-port=0"]
    return ManagedProcess(
        "kube-scheduler", command, directory / "logs" / "kube-scheduler.log", env=component_environment()
    )


def _kwok_process(binary: Path, kubeconfig: Path, directory: Path) -> ManagedProcess:
    command: Sequence[str] = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=true",
        "--enable-crds=Stage",
        f"--cidr={POD_CIDR}",
        "--node-lease-duration-seconds=40",
    ]
    return ManagedProcess("kwok", command, directory / "logs" / "kwok.log", env=component_environment())
