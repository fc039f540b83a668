"""Conditions: their ``metav1.Condition`` shape, their fields, and a ``lastTransitionTime`` that
moves only when a condition's status changes (design document 004, "Status Subresource").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import short, status_write_notes, who_wrote
from ktest.assertions.history import History, Target
from ktest.assertions.objects import (
    describe,
    duration_or_default,
    failure,
    read_existing,
    timeout_or_default,
    uid_of,
)
from ktest.assertions.objects import field as get_field
from ktest.assertions.waiting import until_read
from ktest.cluster.refs import RefLike, as_ref

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_CONDITION = (
    "conditions follow metav1.Condition: type, status (True/False/Unknown), reason (CamelCase), "
    "message, lastTransitionTime and observedGeneration (the generation the condition describes)"
)
RULE_TRANSITION = (
    "a condition's lastTransitionTime changes when, and only when, its status changes; rewriting it "
    "on every reconcile hides how long a state has lasted and makes every status write a real change"
)
_CONDITION_STATUSES = ("True", "False", "Unknown")


# --------------------------------------------------------------- conditions


def assert_condition(
    cluster: Cluster,
    obj: RefLike,
    type: str,
    status: str | None = "True",
    *,
    reason: str | None = None,
    message: str | re.Pattern[str] | None = None,
    observed_generation: int | bool | None = None,
    timeout: float | None = None,
    path: str = "status.conditions",
) -> dict[str, Any]:
    """Eventually the condition ``type`` exists with the given fields; returns it.

    ``status``/``reason`` compare exactly (None: not checked); ``message`` is an exact
    string or a compiled regex searched in the message; ``observed_generation=True``
    requires the condition's observedGeneration to equal ``metadata.generation``, an
    int requires that value.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    wait = timeout_or_default(timeout)
    last: dict[str, Any] = {}

    def condition_holds(current: dict[str, Any]) -> dict[str, Any]:
        _conditions = get_field(current, path) or []
        found = _find(_conditions, type)
        if found is None:
            present = (
                ", ".join(f"{c.get('type')}={c.get('status')}" for c in _conditions if isinstance(c, Mapping))
                or "none"
            )
            raise AssertionError(f"no condition of type {type!r} in {path} (present: {present})")
        last["condition"] = found
        mismatches = _condition_mismatches(found, current, status, reason, message, observed_generation)
        if mismatches:
            raise AssertionError(f"condition {type!r}: " + "; ".join(mismatches))
        return dict(found)

    def explain(report: str, seen: dict[str, Any] | None) -> str:
        condition = last.get("condition")
        headline = (
            f"{describe(ref, uid_of(seen))}: condition {type!r} "
            f"{'never appeared' if condition is None else 'is not as expected'} within {wait:g}s"
        )
        lines = []
        if condition is not None:
            lines.append(f"condition last seen: {dict(condition)}")
            lines += [f"malformed: {problem}" for problem in condition_shape_problems(condition)]
        elif seen is not None and not (get_field(seen, path) or []):
            lines += status_write_notes(seen)
        return failure(headline, RULE_CONDITION, [*lines, report])

    return until_read(
        cluster, ref, condition_holds, timeout=wait, description=f"{ref} condition {type}", explain=explain
    )


def condition_shape_problems(condition: Mapping[str, Any]) -> list[str]:
    """How a condition departs from the metav1.Condition shape."""
    problems = []
    if condition.get("status") not in _CONDITION_STATUSES:
        problems.append(f"status {condition.get('status')!r} is not one of True, False, Unknown")
    if not condition.get("reason"):
        problems.append("reason is empty (metav1.Condition requires a CamelCase reason)")
    elif not re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", str(condition["reason"])):
        problems.append(f"reason {condition['reason']!r} is not CamelCase")
    if not condition.get("lastTransitionTime"):
        problems.append("lastTransitionTime is missing")
    return problems


def _condition_mismatches(
    condition: Mapping[str, Any],
    obj: Mapping[str, Any],
    status: str | None,
    reason: str | None,
    message: str | re.Pattern[str] | None,
    observed_generation: int | bool | None,
) -> list[str]:
    wrong = []
    if status is not None and condition.get("status") != status:
        wrong.append(f"status expected {status!r}, got {condition.get('status')!r}")
    if reason is not None and condition.get("reason") != reason:
        wrong.append(f"reason expected {reason!r}, got {condition.get('reason')!r}")
    text = condition.get("message")
    if isinstance(message, re.Pattern):
        if not isinstance(text, str) or not message.search(text):
            wrong.append(f"message expected to match /{message.pattern}/, got {short(text)}")
    elif message is not None and text != message:
        wrong.append(f"message expected {message!r}, got {short(text)}")
    if observed_generation is not None and observed_generation is not False:
        want = obj["metadata"].get("generation") if observed_generation is True else observed_generation
        if condition.get("observedGeneration") != want:
            wrong.append(
                f"observedGeneration expected {want!r}"
                f"{' (metadata.generation)' if observed_generation is True else ''}, "
                f"got {condition.get('observedGeneration')!r}"
            )
    return wrong


def _find(conditions: Any, type: str) -> Mapping[str, Any] | None:
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == type:
            return condition
    return None


# --------------------------------------------------------------- lastTransitionTime


@dataclass(frozen=True)
class TransitionHistory:
    """The condition's (status, lastTransitionTime) in every version seen, oldest first."""

    versions: tuple[tuple[str, Any, Any], ...]  # (resourceVersion, status, lastTransitionTime)
    window: float


def assert_transition_time_stable(
    cluster: Cluster,
    obj: RefLike,
    type: str,
    *,
    duration: float | None = None,
    trigger: Callable[[], object] | None = None,
    path: str = "status.conditions",
) -> TransitionHistory:
    """For ``duration`` seconds, every write of ``obj`` keeps condition ``type``'s
    ``lastTransitionTime`` unless its status changed (and moves it when it did).

    A controller only writes when it reconciles: ``trigger`` (called once the watch
    is recording, e.g. ``lambda: cluster.patch(obj, {"metadata": {"annotations": ...}})``)
    makes it reconcile during the window. Every version is captured with a watch.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    seconds = duration_or_default(duration)
    start = read_existing(cluster, ref, purpose="watch its conditions")
    name = describe(ref, uid_of(start))
    if _find(get_field(start, path), type) is None:
        raise AssertionError(
            failure(
                f"{name} has no condition {type!r} to watch",
                RULE_TRANSITION,
                f"{path} is {get_field(start, path)!r}: wait for it first (assert_condition)",
            )
        )
    target = Target.of(ref)
    history = History(cluster, [target])
    history.record_for(seconds, first=trigger)
    versions = [(start["metadata"]["resourceVersion"], start, 0.0)]
    versions += [(w.resource_version, w.obj, w.at) for w in target.writes if w.type == "MODIFIED"]
    seen: list[tuple[str, Any, Any]] = []
    violations: list[str] = []
    previous: Mapping[str, Any] = {}
    for index, (resource_version, version, at) in enumerate(versions):
        who = who_wrote(versions[index - 1][1], version) if index else []
        where, by = f"+{at:.2f}s rv {resource_version}", f" (written by {', '.join(who)})" if who else ""
        condition = _find(get_field(version, path), type) or {}
        status, moved = condition.get("status"), condition.get("lastTransitionTime")
        seen.append((resource_version, status, moved))
        if not condition:
            violations.append(f"{where}: condition {type!r} was removed{by}")
        elif previous:
            was_status, was_moved = previous.get("status"), previous.get("lastTransitionTime")
            if status == was_status and moved != was_moved:
                violations.append(
                    f"{where}: status stayed {status!r} but lastTransitionTime moved {was_moved} -> "
                    f"{moved}{by}"
                )
            elif status != was_status and moved == was_moved:
                violations.append(
                    f"{where}: status changed {was_status!r} -> {status!r} but lastTransitionTime "
                    f"stayed {moved}{by}"
                )
        previous = condition
    if violations:
        shown = violations[:8] + ([f"... {len(violations) - 8} more"] if len(violations) > 8 else [])
        raise AssertionError(
            failure(
                f"{name}: condition {type!r} lastTransitionTime is not stable "
                f"({len(violations)} of {len(versions) - 1} writes in {seconds:g}s)",
                RULE_TRANSITION,
                [*shown, *target.problems],
            )
        )
    return TransitionHistory(tuple(seen), history.window)
