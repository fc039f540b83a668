"""Who moved a Pod along, for a timeline on a plane with simulated nodes: its binding by
kube-scheduler, the status writes of the simulated kubelet (KWOK); and what each one changed.

A binding (``pods/binding``) leaves no managedFields entry: it shows as ``spec.nodeName`` set on a
Pod that had none, by the scheduler its ``spec.schedulerName`` names. The kubelet's writes are the
status writes whose newest ``status`` managedFields entry is KWOK's (manager ``kwok``)."""

from __future__ import annotations

from typing import Any

from ktest.timeline.model import KUBELET_LANE, SCHEDULER_LANE, Event

KUBELET_MANAGERS = ("kwok",)
SCHEDULER_MANAGERS = ("kube-scheduler",)
_DEFAULT_SCHEDULER = "default-scheduler"
_EVENT_SOURCES = {_DEFAULT_SCHEDULER: SCHEDULER_LANE, "kwok_controller": KUBELET_LANE}
"""The components that report Events (Scheduled, BackOff, ...) for the scheduler and KWOK."""


def node_event_lane(source: str) -> str | None:
    """The lane of an Event its reporting component puts on the scheduler's or the kubelet's lane."""
    return _EVENT_SOURCES.get(source)


def pod_writer_event(
    old: dict[str, Any] | None, new: dict[str, Any], at: float, where: str
) -> Event | None:
    """The scheduler's or the simulated kubelet's event for one write of a Pod (``old`` the
    version before it, None if unseen), or None if neither made it."""
    spec, old_spec = new.get("spec") or {}, (old or {}).get("spec") or {}
    node = spec.get("nodeName")
    if old is not None and node and not old_spec.get("nodeName"):
        scheduler = spec.get("schedulerName") or _DEFAULT_SCHEDULER
        by = "kube-scheduler" if scheduler == _DEFAULT_SCHEDULER else scheduler
        detail = {"by": by, "pod": where, "node": node, "changes": [f"bound to {node}"]}
        return Event(SCHEDULER_LANE, "scheduling", at, f"{by} bound Pod {where} to {node}", detail)
    manager = _newest_status_manager(new)
    if manager is None or old is None:
        return None
    changes = status_changes(old.get("status") or {}, new.get("status") or {})
    if not changes:
        return None
    if manager in KUBELET_MANAGERS:
        lane, kind, by = KUBELET_LANE, "kubelet", f"simulated kubelet on {node or '(no node)'}"
    elif manager in SCHEDULER_MANAGERS:  # an unschedulable Pod's PodScheduled condition
        lane, kind, by = SCHEDULER_LANE, "scheduling", "kube-scheduler"
    else:
        return None
    detail = {"by": by, "manager": manager, "pod": where, "node": node, "changes": changes}
    return Event(lane, kind, at, f"{by}: Pod {where} " + "; ".join(changes), detail)


def status_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What a reader wants of a Pod status write: phase, the Ready and PodScheduled conditions,
    each container's state (with its reason) and restarts."""
    changes = []
    if old.get("phase") != new.get("phase"):
        changes.append(f"phase {old.get('phase') or '(none)'} -> {new.get('phase') or '(none)'}")
    for kind in ("Ready", "PodScheduled"):
        before, after = _condition(old, kind), _condition(new, kind)
        if before != after:
            changes.append(f"{kind} {before[0] or '(none)'} -> {after[0] or '(none)'}" + _reason(after[1]))
    for field in ("initContainerStatuses", "containerStatuses"):
        before_by_name = {status.get("name"): status for status in old.get(field) or ()}
        for status in new.get(field) or ():
            name = status.get("name")
            previous = before_by_name.get(name) or {}
            state, previous_state = _state(status), _state(previous)
            if state != previous_state:
                changes.append(f"container {name} {state}")
            restarts, previous_restarts = status.get("restartCount") or 0, previous.get("restartCount") or 0
            if restarts != previous_restarts:
                changes.append(f"container {name} restarts {previous_restarts} -> {restarts}")
    return changes


def _condition(status: dict[str, Any], kind: str) -> tuple[str | None, str | None]:
    for condition in status.get("conditions") or ():
        if condition.get("type") == kind:
            return condition.get("status"), condition.get("reason")
    return None, None


def _reason(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


def _state(container: dict[str, Any]) -> str:
    """``running``, ``waiting (CrashLoopBackOff)``, ``terminated (Error, exit 1)``; "" if none."""
    for name, state in (container.get("state") or {}).items():
        state = state or {}
        details = [state["reason"]] if state.get("reason") else []
        if "exitCode" in state:
            details.append(f"exit {state['exitCode']}")
        return name + (f" ({', '.join(details)})" if details else "")
    return ""


def _newest_status_manager(obj: dict[str, Any]) -> str | None:
    """The manager of the latest status write (ties by time: the later entry)."""
    entries = [
        entry
        for entry in (obj.get("metadata") or {}).get("managedFields") or ()
        if entry.get("subresource") == "status"
    ]
    newest = None
    for entry in entries:
        if newest is None or (entry.get("time") or "") >= (newest.get("time") or ""):
            newest = entry
    return newest.get("manager") if newest else None
