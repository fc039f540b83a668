"""What the simulated kubelet does to the Pods a test selects: Stages of weight 1.

Each function returns the Stage objects (without names: :class:`~ktest.nodes.kubelet.Kubelet`
names them per test) that make the selected Pods behave as the real kubelet reports it:
``crash_loop`` (``CrashLoopBackOff``, ``lastState.terminated`` ``Error``), ``oom_killed``
(``OOMKilled``, exit code 137), ``image_pull_error`` (``ErrImagePull``/``ImagePullBackOff``),
``not_ready`` (readiness failing), ``slow_start`` (Ready only after some seconds), ``complete``
and ``fail`` (a Pod's containers exit), ``evict`` (kubelet eviction), ``node_not_ready``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ktest.nodes.stages import (
    _ADDRESSES,
    NOT_DELETED,
    PENDING,
    RECOVERED_POD,
    RESTARTED_POD,
    RUNNING,
    container_statuses,
    expression,
    finished_pod,
    pod_conditions,
    stage,
    status_patch,
)

Selector = list[dict[str, Any]]
_POD_REF = "{{ $.metadata.name }}_{{ $.metadata.namespace }}({{ $.metadata.uid }})"
BEHAVIOUR_WEIGHT = 1
_FIRST = ".status.containerStatuses.[0]"
_IS_RUNNING = expression(f"{_FIRST}.state.running.startedAt", "Exists")
_READY_REASON = '.status.conditions.[] | select( .type == "Ready" ) | .reason'


def _pod(
    name: str,
    selector: Selector,
    template: str,
    *,
    delay_ms: int | None = None,
    event: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    step: dict[str, Any] = {"patches": [status_patch(template)]}
    if event:
        step["event"] = {"type": event[0], "reason": event[1], "message": event[2]}
    return stage(
        name,
        "Pod",
        {"matchExpressions": [NOT_DELETED, *selector]},
        step,
        weight=BEHAVIOUR_WEIGHT,
        delay_ms=delay_ms,
    )


def _running_not_ready(started: bool = True) -> str:
    return "\n".join(
        [
            "phase: Running",
            pod_conditions(ready=False),
            _ADDRESSES,
            container_statuses(
                f"""
ready: false
started: {"true" if started else "false"}
restartCount: 0
lastState: {{}}
state:
  running:
    startedAt: {{{{ $now | Quote }}}}
"""
            ),
        ]
    )


def crash_loop(
    selector: Selector, *, exit_code: int = 1, reason: str = "Error", backoff: float = 1.0
) -> list[dict[str, Any]]:
    """Every container starts, exits with ``exit_code`` (``reason``) after half a second, and waits
    in ``CrashLoopBackOff`` for ``backoff`` seconds before the next start; restartCount counts."""
    crashed = "\n".join(
        [
            "phase: Running",
            pod_conditions(ready=False),
            container_statuses(
                f"""
ready: false
started: false
restartCount: {{{{ add (or .restartCount 0) 1 }}}}
lastState:
  terminated:
    exitCode: {exit_code}
    reason: {reason}
    startedAt: {{{{ .state.running.startedAt | Quote }}}}
    finishedAt: {{{{ $now | Quote }}}}
    containerID: "containerd://{{{{ printf "%s/%s" $.metadata.uid .name | sha256sum }}}}"
state:
  waiting:
    reason: CrashLoopBackOff
    message: "back-off {backoff:g}s restarting failed container={{{{ .name }}}} pod={_POD_REF}"
""",
                ".status.containerStatuses",
            ),
        ]
    )
    waiting = expression(f"{_FIRST}.state.waiting.reason", "In", "CrashLoopBackOff")
    return [
        _pod("start", [*selector, PENDING], _running_not_ready()),
        _pod(
            "crash",
            [*selector, RUNNING, _IS_RUNNING],
            crashed,
            delay_ms=500,
            event=("Warning", "BackOff", "Back-off restarting failed container"),
        ),
        _pod("restart", [*selector, waiting], RESTARTED_POD, delay_ms=int(backoff * 1000)),
    ]


def oom_killed(selector: Selector, *, backoff: float = 1.0) -> list[dict[str, Any]]:
    """Every container is OOM-killed (exit code 137, ``OOMKilled``) and restarted in a loop."""
    return crash_loop(selector, exit_code=137, reason="OOMKilled", backoff=backoff)


def image_pull_error(selector: Selector, *, backoff: float = 1.0) -> list[dict[str, Any]]:
    """The image cannot be pulled: ``ErrImagePull``, then ``ImagePullBackOff``, alternating."""

    def waiting(reason: str, message: str) -> str:
        return "\n".join(
            [
                "phase: Pending",
                pod_conditions(ready=False),
                _ADDRESSES,
                container_statuses(
                    f"""
ready: false
started: false
restartCount: 0
lastState: {{}}
state:
  waiting:
    reason: {reason}
    message: {message}
"""
                ),
            ]
        )

    pull_failed = waiting(
        "ErrImagePull",
        "'failed to pull and unpack image \"{{ .image }}\": not found'",
    )
    backing_off = waiting("ImagePullBackOff", "'Back-off pulling image \"{{ .image }}\"'")
    reason_key = f"{_FIRST}.state.waiting.reason"
    return [
        _pod(
            "pull",
            [*selector, PENDING, expression(reason_key, "NotIn", "ErrImagePull", "ImagePullBackOff")],
            pull_failed,
            event=("Warning", "Failed", "Failed to pull image"),
        ),
        _pod(
            "backoff",
            [*selector, PENDING, expression(reason_key, "In", "ErrImagePull")],
            backing_off,
            delay_ms=500,
            event=("Normal", "BackOff", "Back-off pulling image"),
        ),
        _pod(
            "retry",
            [*selector, PENDING, expression(reason_key, "In", "ImagePullBackOff")],
            pull_failed,
            delay_ms=int(backoff * 1000),
        ),
    ]


def not_ready(selector: Selector) -> list[dict[str, Any]]:
    """The containers run but their readiness probe fails: Running, ``Ready`` False."""
    ready_or_new = expression(_READY_REASON, "NotIn", "ContainersNotReady")
    held = expression(_READY_REASON, "In", "ContainersNotReady")
    return [
        _pod(
            "unready",
            [*selector, ready_or_new],
            _running_not_ready(),
            event=("Warning", "Unhealthy", "Readiness probe failed"),
        ),
        # Outweighs the default that makes a running container Ready again; does nothing.
        stage(
            "hold",
            "Pod",
            {"matchExpressions": [NOT_DELETED, *selector, RUNNING, held]},
            {},
            weight=BEHAVIOUR_WEIGHT,
            delay_ms=24 * 3600 * 1000,
        ),
    ]


def slow_start(selector: Selector, seconds: float) -> list[dict[str, Any]]:
    """The containers start at once and become Ready only after ``seconds``."""
    not_ready_reason = expression(_READY_REASON, "In", "ContainersNotReady")
    return [
        _pod("start", [*selector, PENDING], _running_not_ready(started=False)),
        _pod(
            "ready",
            [*selector, RUNNING, _IS_RUNNING, not_ready_reason],
            RECOVERED_POD,
            delay_ms=int(seconds * 1000),
        ),
    ]


def complete(selector: Selector, *, after: float = 0.0) -> list[dict[str, Any]]:
    """The containers exit 0 ``after`` seconds of running: the Pod Succeeds."""
    return [
        _pod(
            "complete",
            [*selector, RUNNING, _IS_RUNNING],
            finished_pod("Succeeded", 0, "Completed", "PodCompleted"),
            delay_ms=int(after * 1000),
        )
    ]


def fail(selector: Selector, *, exit_code: int = 1, after: float = 0.0) -> list[dict[str, Any]]:
    """The containers exit with ``exit_code`` (``Error``) ``after`` seconds of running: the Pod Fails."""
    return [
        _pod(
            "fail",
            [*selector, RUNNING, _IS_RUNNING],
            finished_pod("Failed", exit_code, "Error", "PodFailed"),
            delay_ms=int(after * 1000),
            event=("Warning", "BackOff", "container exited with an error"),
        )
    ]


def evict(selector: Selector) -> list[dict[str, Any]]:
    """The kubelet evicts the Pods (node memory pressure): Failed, reason ``Evicted``."""
    pressure = "The node was low on resource: memory."
    evicted = "\n".join(
        [
            "reason: Evicted",
            f"message: '{pressure} Threshold quantity: 100Mi, available: 64Mi. '",
            finished_pod(
                "Failed",
                137,
                "ContainerStatusUnknown",
                "PodFailed",
                message="The container could not be located when the pod was terminated",
            ).replace(
                "conditions:",
                'conditions:\n- type: DisruptionTarget\n  status: "True"\n  reason: TerminationByKubelet\n'
                f"  message: '{pressure}'\n  lastTransitionTime: {{{{ $now | Quote }}}}",
            ),
        ]
    )
    return [
        _pod(
            "evict",
            [*selector, RUNNING],
            evicted,
            event=("Warning", "Evicted", "The node was low on resource: memory."),
        )
    ]


def node_not_ready(node: str) -> list[dict[str, Any]]:
    """Node ``node``'s kubelet reports NotReady (the node-lifecycle controller then taints it)."""
    template = """
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  {{ if eq .type "Ready" }}
  status: "False"
  reason: KubeletNotReady
  message: "container runtime network not ready: NetworkReady=false (simulated by ktest)"
  {{ else }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  {{ end }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
"""
    ready = expression('.status.conditions.[] | select( .type == "Ready" ) | .status', "NotIn", "False")
    return [
        stage(
            "not-ready",
            "Node",
            {"matchExpressions": [expression(".metadata.name", "In", node), ready]},
            {"patches": [status_patch(template)]},
            weight=BEHAVIOUR_WEIGHT,
        )
    ]


POD_BEHAVIOURS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "crash_loop": crash_loop,
    "oom_killed": oom_killed,
    "image_pull_error": image_pull_error,
    "not_ready": not_ready,
    "slow_start": slow_start,
    "complete": complete,
    "fail": fail,
    "evict": evict,
}
"""The behaviours that select Pods by label, by name."""
