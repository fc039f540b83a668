"""What a failing test's report shows about its namespace (usable from plain Python too).

For each object in the namespace: kind/name, ``metadata.generation`` against
``status.observedGeneration`` (an operator that has not caught up yet),
conditions, finalizers and deletionTimestamp; then the namespace's Events.
No pytest here: :func:`describe_namespace` takes a Cluster and a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

if TYPE_CHECKING:
    from ktest.cluster import Cluster

_SKIPPED_KINDS = {("v1", "Event"), ("events.k8s.io/v1", "Event")}
MAX_EVENTS = 50


def describe_namespace(cluster: Cluster, namespace: str) -> str:
    """A readable summary of every object and the Events in ``namespace``."""
    try:
        objects = namespace_objects(cluster, namespace)
    except (ApiException, OSError) as error:
        return f"(could not list the objects in namespace {namespace}: {error})"
    lines = [f"objects in namespace {namespace}: {len(objects)}"]
    for obj in objects:
        lines.extend(describe_object(obj))
    lines.append("")
    lines.extend(describe_events(cluster, namespace))
    return "\n".join(lines)


def namespace_objects(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """Every listable object in ``namespace`` (preferred API versions, Events excluded)."""
    found: list[dict[str, Any]] = []
    for api_version in _preferred_api_versions(cluster):
        for info in cluster.discovery.group_version_resources(api_version).values():
            if not info.namespaced or "list" not in info.verbs or (api_version, info.kind) in _SKIPPED_KINDS:
                continue
            try:
                answer = cluster.rest.request("GET", info.path(namespace))
            except ApiException:
                continue  # forbidden or an unavailable aggregated API: nothing to show
            for item in answer.get("items") or ():
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", info.kind)
                found.append(item)
    return sorted(found, key=lambda obj: (obj["kind"], obj["metadata"]["name"]))


def describe_object(obj: dict[str, Any]) -> list[str]:
    """Lines for one object: identity, generation, conditions, finalizers, deletion."""
    meta = obj.get("metadata") or {}
    raw_status = obj.get("status")
    status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    head = f"  {obj['kind']}/{meta.get('name')} ({obj['apiVersion']})"
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    if generation is not None:
        if observed is None:
            head += f" generation {generation}, no status.observedGeneration"
        else:
            lag = " (status is behind the spec)" if observed < generation else ""
            head += f" generation {generation}, observedGeneration {observed}{lag}"
    if obj["kind"] == "Pod" and obj["apiVersion"] == "v1":
        return [head, *pod_lines(obj)]
    lines = [head]
    for condition in status.get("conditions") or ():
        if not isinstance(condition, dict):
            continue
        text = f"{condition.get('type')}={condition.get('status')}"
        reason, message = condition.get("reason"), condition.get("message")
        if reason or message:
            text += f" ({reason or ''}{': ' if reason and message else ''}{message or ''})"
        if condition.get("observedGeneration") is not None:
            text += f" [observedGeneration {condition['observedGeneration']}]"
        lines.append(f"    condition {text}")
    if meta.get("finalizers"):
        lines.append(f"    finalizers: {', '.join(meta['finalizers'])}")
    if meta.get("deletionTimestamp"):
        lines.append(f"    deletionTimestamp: {meta['deletionTimestamp']} (being deleted)")
    return lines


def pod_lines(pod: dict[str, Any]) -> list[str]:
    """A Pod as an operator author reads it: phase (and reason), node, Ready, and each container's
    state, restarts and last termination."""
    status = pod.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), "-")
    phase = status.get("phase", "?") + (f" ({status['reason']})" if status.get("reason") else "")
    node = (pod.get("spec") or {}).get("nodeName") or "not scheduled"
    lines = [f"    phase {phase}, node {node}, Ready={ready}"]
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        kind = next(iter(state), "unknown")
        detail = (state.get(kind) or {}).get("reason") or ""
        exit_code = (state.get(kind) or {}).get("exitCode")
        text = kind + (f" {detail}" if detail else "")
        text += f" (exit {exit_code})" if exit_code is not None else ""
        text += f", restarts {container.get('restartCount', 0)}"
        last = (container.get("lastState") or {}).get("terminated")
        if last:
            text += f", last terminated {last.get('reason', '')} (exit {last.get('exitCode')})"
        lines.append(f"    container {container.get('name')}: {text}")
    return lines


def describe_events(cluster: Cluster, namespace: str) -> list[str]:
    """The namespace's Events, oldest first (the last :data:`MAX_EVENTS`)."""
    try:
        answer = cluster.rest.request("GET", f"/api/v1/namespaces/{namespace}/events")
    except ApiException as error:
        return [f"events: could not be listed ({error.status} {error.reason})"]
    events = sorted(answer.get("items") or (), key=_event_time)
    if not events:
        return [f"events in namespace {namespace}: none"]
    lines = [f"events in namespace {namespace}: {len(events)}"]
    for event in events[-MAX_EVENTS:]:
        involved = event.get("involvedObject") or {}
        count = f" (x{event['count']})" if (event.get("count") or 1) > 1 else ""
        lines.append(
            f"  {_event_time(event)} {event.get('type', '')} {event.get('reason', '')} "
            f"{involved.get('kind')}/{involved.get('name')}: {event.get('message', '')}{count}"
        )
    return lines


def _event_time(event: dict[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _preferred_api_versions(cluster: Cluster) -> list[str]:
    versions = ["v1"]
    for group in cluster.rest.request("GET", "/apis").get("groups") or ():
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            versions.append(preferred)
    return versions
