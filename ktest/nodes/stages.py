"""KWOK Stage objects: how simulated nodes and their Pods change, written by ktest.

KWOK's engine plays a Stage on every object its selector matches: after ``delay`` it patches
the object's status (``patches``, a JSON merge patch on the status subresource, so lists such
as ``containerStatuses`` are replaced whole), emits an event, or deletes it. The defaults here
follow what the kubelet writes; a behaviour (:mod:`ktest.nodes.behaviours`) is a set of Stages
of weight 1 for the Pods it selects, which then win over the defaults (weight 0: KWOK chooses
only among matching Stages of positive weight when there are any).
"""

from __future__ import annotations

from typing import Any

STAGE_API_VERSION = "kwok.x-k8s.io/v1alpha1"
STAGE_RESOURCE = ("kwok.x-k8s.io/v1alpha1", "Stage")
MANAGED_LABEL = "ktest.dev/stage"
"""Every Stage ktest writes carries it: ``default`` or the behaviour's owner (a test)."""

# Go-template snippets (rendered by KWOK against the object as a map).
_NOW = "{{ $now := Now }}"
_CONTAINER_ID = 'containerd://{{ printf "%s/%s" $.metadata.uid .name | sha256sum }}'
_IMAGE_ID = "{{ .image }}@sha256:{{ .image | sha256sum }}"
_ADDRESSES = """
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
hostIPs:
- ip: {{ NodeIPWith .spec.nodeName | Quote }}
{{ $podIP := PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) @POD_KEYS@ }}
podIP: {{ $podIP | Quote }}
podIPs:
- ip: {{ $podIP | Quote }}
startTime: {{ or .status.startTime $now | Quote }}
""".replace("@POD_KEYS@", '( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" )')


def _condition(kind: str, status: str, reason: str = "") -> str:
    reason_line = f"\n  reason: {reason}" if reason else ""
    return f'- type: {kind}\n  status: "{status}"\n  lastTransitionTime: {{{{ $now | Quote }}}}{reason_line}'


def pod_conditions(ready: bool, reason: str = "ContainersNotReady", started: bool = True) -> str:
    """The five conditions a kubelet keeps on a scheduled Pod."""
    flag = "True" if ready else "False"
    return "\n".join(
        [
            "conditions:",
            _condition("PodReadyToStartContainers", "True" if started else "False"),
            _condition("Initialized", "True"),
            _condition("Ready", flag, "" if ready else reason),
            _condition("ContainersReady", flag, "" if ready else reason),
            _condition("PodScheduled", "True"),
        ]
    )


def _init_statuses() -> str:
    return """
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: "@IMAGE_ID@"
  containerID: "@CONTAINER_ID@"
  ready: {{ if eq (or .restartPolicy "") "Always" }}true{{ else }}false{{ end }}
  started: {{ if eq (or .restartPolicy "") "Always" }}true{{ else }}false{{ end }}
  restartCount: 0
  lastState: {}
  state:
  {{ if eq (or .restartPolicy "") "Always" }}
    running:
      startedAt: {{ $now | Quote }}
  {{ else }}
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
      containerID: "@CONTAINER_ID@"
  {{ end }}
{{ end }}
""".replace("@IMAGE_ID@", _IMAGE_ID).replace("@CONTAINER_ID@", _CONTAINER_ID)


def container_statuses(body: str, source: str = ".spec.containers") -> str:
    """``containerStatuses``: one entry per container of ``source``, with ``body`` (YAML lines at
    the entry's indentation; the entry's name, image, imageID and containerID come first)."""
    indented = "\n".join("  " + line if line else line for line in body.strip("\n").splitlines())
    return (
        "containerStatuses:\n"
        f"{{{{ range {source} }}}}\n"
        "- name: {{ .name | Quote }}\n"
        "  image: {{ .image | Quote }}\n"
        f'  imageID: "{_IMAGE_ID}"\n'
        f'  containerID: "{_CONTAINER_ID}"\n'
        f"{indented}\n"
        "{{ end }}\n"
    )


RUNNING_CONTAINER = """
ready: true
started: true
restartCount: {{ or .restartCount 0 }}
lastState: {}
state:
  running:
    startedAt: {{ $now | Quote }}
"""


def status_patch(template: str) -> dict[str, Any]:
    """A JSON merge patch of the status subresource rendered from ``template``."""
    return {"subresource": "status", "root": "status", "type": "merge", "template": f"{_NOW}\n{template}"}


def stage(
    name: str,
    kind: str,
    selector: dict[str, Any],
    next_step: dict[str, Any],
    *,
    weight: int = 0,
    delay_ms: int | None = None,
    jitter_ms: int | None = None,
    owner: str = "default",
) -> dict[str, Any]:
    """One Stage object for KWOK (``kind``: ``Node`` or ``Pod``)."""
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": selector,
        "next": next_step,
    }
    if weight:
        spec["weight"] = weight
    if delay_ms is not None:
        spec["delay"] = {"durationMilliseconds": delay_ms}
        if jitter_ms is not None:
            spec["delay"]["jitterDurationMilliseconds"] = jitter_ms
    return {
        "apiVersion": STAGE_API_VERSION,
        "kind": "Stage",
        "metadata": {"name": name, "labels": {MANAGED_LABEL: owner}},
        "spec": spec,
    }


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    """One ``matchExpressions`` entry (``key`` is a jq expression on the object)."""
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


NOT_DELETED = expression(".metadata.deletionTimestamp", "DoesNotExist")
PENDING = expression(".status.phase", "In", "Pending")
RUNNING = expression(".status.phase", "In", "Running")
OWNED_BY_JOB = expression(".metadata.ownerReferences.[].kind", "In", "Job")
FIRST_RUNNING = expression(".status.containerStatuses.[0].state.running.startedAt", "Exists")
CRASH_LOOP_WAITING = expression(
    ".status.containerStatuses.[0].state.waiting.reason", "In", "CrashLoopBackOff"
)
NOT_READY = expression(
    '.status.conditions.[] | select( .type == "Ready" ) | .reason', "In", "ContainersNotReady"
)


def finished_pod(phase: str, exit_code: int, reason: str, condition_reason: str, *, message: str = "") -> str:
    """A Pod whose containers exited with ``exit_code`` (``reason``): ``phase`` Succeeded or Failed."""
    message_line = f"\n    message: {message}" if message else ""
    return "\n".join(
        [
            f"phase: {phase}",
            pod_conditions(ready=False, reason=condition_reason, started=False),
            container_statuses(
                f"""
ready: false
started: false
restartCount: {{{{ or .restartCount 0 }}}}
lastState: {{}}
state:
  terminated:
    exitCode: {exit_code}
    reason: {reason}{message_line}
    startedAt: {{{{ or .state.running.startedAt $now | Quote }}}}
    finishedAt: {{{{ $now | Quote }}}}
""",
                ".status.containerStatuses",
            ),
        ]
    )


def _running_again(ready: bool, state: str) -> str:
    """The status of a Pod whose containers run again: ``ready`` or not yet, with ``state``
    (YAML), restarts and the last termination kept."""
    readiness = "true" if ready else "false"
    return "\n".join(
        [
            "phase: Running",
            pod_conditions(ready=ready),
            container_statuses(
                f"""
ready: {readiness}
started: true
restartCount: {{{{ or .restartCount 0 }}}}
lastState: {{{{ toJson .lastState }}}}
state:{state}
""",
                ".status.containerStatuses",
            ),
        ]
    )


RESTARTED_POD = _running_again(ready=False, state="\n  running:\n    startedAt: {{ $now | Quote }}")
"""A Pod whose containers run again (after a back-off), not yet Ready; restarts and the last
termination kept."""

RECOVERED_POD = _running_again(ready=True, state=" {{ toJson .state }}")
"""A Pod whose running containers now pass their probes: Ready, all else kept."""


def _node_stages(kubelet_version: str) -> list[dict[str, Any]]:
    conditions = """
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
"""
    initialize = (
        conditions
        + f"""
phase: Running
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: v{kubelet_version}
  kubeProxyVersion: v{kubelet_version}
  containerRuntimeVersion: kwok://simulated
  kernelVersion: simulated
  osImage: ktest simulated node
  machineID: ""
  bootID: ""
  systemUUID: ""
daemonEndpoints:
  kubeletEndpoint:
    Port: 10250
"""
    )
    not_ready = expression('.status.conditions.[] | select( .type == "Ready" ) | .status', "NotIn", "True")
    ready = expression('.status.conditions.[] | select( .type == "Ready" ) | .status', "In", "True")
    heartbeat = """
conditions:
{{ range .status.conditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ .lastTransitionTime | Quote }}
{{ end }}
"""
    return [
        stage(
            "ktest-node-initialize",
            "Node",
            {"matchExpressions": [not_ready]},
            {"patches": [status_patch(initialize)]},
        ),
        # The node-lifecycle controller calls a node unknown after 40-50 s without a heartbeat.
        stage(
            "ktest-node-heartbeat",
            "Node",
            {"matchExpressions": [ready]},
            {"patches": [status_patch(heartbeat)]},
            delay_ms=10_000,
            jitter_ms=15_000,
        ),
    ]


def _pod_stages() -> list[dict[str, Any]]:
    running = "\n".join(
        [
            "phase: Running",
            pod_conditions(ready=True),
            _ADDRESSES,
            container_statuses(RUNNING_CONTAINER),
            _init_statuses(),
        ]
    )
    completed = finished_pod("Succeeded", 0, "Completed", "PodCompleted")
    return [
        stage(
            "ktest-pod-running",
            "Pod",
            {"matchExpressions": [NOT_DELETED, PENDING]},
            {"patches": [status_patch(running)]},
        ),
        # A Job's Pod runs to completion (exit 0); other Pods keep running.
        stage(
            "ktest-pod-complete",
            "Pod",
            {"matchExpressions": [NOT_DELETED, RUNNING, OWNED_BY_JOB]},
            {"patches": [status_patch(completed)]},
        ),
        # A container out of its back-off runs again; a running container passes its probes.
        stage(
            "ktest-pod-restart",
            "Pod",
            {"matchExpressions": [NOT_DELETED, RUNNING, CRASH_LOOP_WAITING]},
            {"patches": [status_patch(RESTARTED_POD)]},
        ),
        stage(
            "ktest-pod-recover",
            "Pod",
            {"matchExpressions": [NOT_DELETED, RUNNING, FIRST_RUNNING, NOT_READY]},
            {"patches": [status_patch(RECOVERED_POD)]},
        ),
        # The kubelet confirms a deletion once the containers are stopped.
        stage(
            "ktest-pod-delete",
            "Pod",
            {"matchExpressions": [expression(".metadata.deletionTimestamp", "Exists")]},
            {"delete": True},
        ),
    ]


def default_stages(kubelet_version: str) -> list[dict[str, Any]]:
    """The Stages every simulated cluster has: nodes become Ready and keep a heartbeat; scheduled
    Pods become Running and Ready; a Job's Pods complete; deleted Pods go."""
    return _node_stages(kubelet_version) + _pod_stages()
