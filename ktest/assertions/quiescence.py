"""Quiescence: once converged, an operator stops writing (no hot loop).

A controller that writes status on every reconcile, or patches a child with the
same content plus a timestamp, triggers its own watch and reconciles again: the
status-update loops and no-op patches the design documents call the most
common production incident. :func:`assert_quiescent` watches the object (and
its children) for a window and fails if anything was written, listing every
write with the fields it changed and the field manager that made it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import changed_fields, changed_paths, who_wrote, writer_names
from ktest.assertions.history import History, Target, Write
from ktest.assertions.objects import duration_or_default, failure, read_existing
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.wait.report import plural

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_QUIESCENT = (
    "a controller that has converged writes nothing until something changes: every write is an "
    "event that triggers another reconcile, so writing status or patching children on every "
    "reconcile (a fresh timestamp, a counter, a no-op patch that is not one) is a hot loop"
)

SYSTEM_WRITERS: frozenset[str] = frozenset({"kube-controller-manager", "kube-scheduler", "kubelet"})
"""Field managers of Kubernetes' own controllers. Their writes (a Deployment's status
while its Pods start, on a cluster with real nodes) are the cluster converging, not
the operator looping, so :func:`assert_quiescent` ignores them by default."""

MAX_WRITES_SHOWN = 8
MAX_FIELDS_SHOWN = 4

Child = RefLike | tuple[str, str]
"""A child to watch: an object (dict, ObjectRef or (apiVersion, kind, name[, namespace])),
or ``(apiVersion, kind)`` for every object of that kind in the owner's namespace."""


@dataclass(frozen=True)
class Quiescence:
    """What :func:`assert_quiescent` watched, for how long."""

    targets: tuple[str, ...]
    window: float


def assert_quiescent(
    cluster: Cluster,
    obj: RefLike,
    *,
    children: Sequence[Child] = (),
    window: float | None = None,
    ignore_writers: Collection[str] = SYSTEM_WRITERS,
) -> Quiescence:
    """Nothing writes ``obj`` (or any of ``children``) for ``window`` seconds (default:
    the consistently duration); their resourceVersions stay unchanged.

    Writes made only by the field managers in ``ignore_writers`` (default: Kubernetes'
    own controllers, :data:`SYSTEM_WRITERS`) do not count; pass ``()`` to count every
    write. On failure, the AssertionError lists per object how many writes happened
    and, for each, when, the field manager and the fields that changed.
    """
    __tracebackhide__ = True
    seconds = duration_or_default(window, "window")
    ref = as_ref(obj)
    read_existing(cluster, ref, purpose="check that it stays unchanged")
    targets = [Target.of(ref), *(_child_target(child, ref) for child in children)]
    history = History(cluster, targets)
    history.record_for(seconds)
    ignored = frozenset(ignore_writers)
    counted = {id(t): sum(not skip for *_, skip in _steps(t, ignored)) for t in targets}
    busy = [t for t in targets if counted[id(t)] or (not t.writes and t.end_differs())]
    if busy:
        total = sum(max(counted[id(t)], 1) for t in busy)
        observed: list[str] = []
        for target in targets:
            observed += describe_writes(target, ignored)
        raise AssertionError(failure(
            f"{targets[0].label()} is not quiescent: {plural(total, 'write')} in a {seconds:g}s window"
            + (f" (to {len(busy)} of the {len(targets)} watched targets)" if len(targets) > 1 else ""),
            RULE_QUIESCENT,
            observed,
        ))
    return Quiescence(tuple(t.label() for t in targets), history.window)


def describe_writes(target: Target, ignored: Collection[str] = ()) -> list[str]:
    """Lines about one target: write count, resourceVersions, each write's changes
    (writes made only by managers in ``ignored`` are marked, not counted)."""
    if not target.writes and not target.end_differs():
        return [f"{target.label()}: no writes"]
    steps = _steps(target, ignored)
    skipped = [(before, write) for before, write, skip in steps if skip]
    head = plural(len(target.writes) - len(skipped), "write")
    if skipped:
        by = sorted(set().union(*(writer_names(before or {}, write.obj) for before, write in skipped)))
        head += f" (and {plural(len(skipped), 'ignored write')} by {', '.join(by)})"
    lines = [f"{target.label()}: {head}{_version_span(target)}"]
    counts: Counter[str] = Counter()
    for index, (before, write, skip) in enumerate(steps):
        counts.update(changed_paths(before or {}, write.obj) if write.type == "MODIFIED" else [])
        if index < MAX_WRITES_SHOWN:
            lines.append(f"  {_write_line(target, write, before)}{' [ignored]' if skip else ''}")
    if len(target.writes) > MAX_WRITES_SHOWN:
        lines.append(f"  ... {len(target.writes) - MAX_WRITES_SHOWN} more writes")
    if counts and len(target.writes) > 1:
        common = ", ".join(f"{path} x{count}" for path, count in counts.most_common(MAX_FIELDS_SHOWN))
        lines.append(f"  fields changed most often: {common}")
    if not target.writes:
        lines.append("  the resourceVersion changed but the watch delivered no write")
    lines += [f"  note: {problem}" for problem in target.problems]
    return lines


def _steps(target: Target, ignored: Collection[str]) -> list[tuple[dict[str, Any] | None, Write, bool]]:
    """Each write with the version of its object just before it, and whether only managers in
    ``ignored`` made it."""
    previous = dict(target.baseline)
    steps = []
    for write in target.writes:
        before = previous.get(write.name)
        steps.append((before, write, _is_ignored(before, write, ignored)))
        previous[write.name] = write.obj
    return steps


def _is_ignored(before: dict[str, Any] | None, write: Write, ignored: Collection[str]) -> bool:
    if not ignored or before is None or write.type != "MODIFIED":
        return False
    names = writer_names(before, write.obj)
    return bool(names) and names <= set(ignored)


def _write_line(target: Target, write: Write, before: dict[str, Any] | None) -> str:
    name = f"{write.name} " if target.name is None else ""
    head = f"+{write.at:.2f}s {name}{write.type} rv {write.resource_version}"
    if write.type != "MODIFIED" or before is None:
        return head
    fields = changed_fields(before, write.obj)
    who = who_wrote(before, write.obj)
    by = f" by {', '.join(who)}" if who else ""
    if not fields:
        return f"{head}{by}: only metadata.managedFields changed"
    shown = "; ".join(fields[:MAX_FIELDS_SHOWN])
    more = f"; and {len(fields) - MAX_FIELDS_SHOWN} more" if len(fields) > MAX_FIELDS_SHOWN else ""
    return f"{head}{by}: {shown}{more}"


def _version_span(target: Target) -> str:
    if target.name is None:
        return ""
    start = target.baseline.get(target.name)
    end = target.final.get(target.name)
    first = start["metadata"]["resourceVersion"] if start else "absent"
    last = end["metadata"]["resourceVersion"] if end else "gone"
    return f", resourceVersion {first} -> {last}"


def _child_target(child: Child, owner: ObjectRef) -> Target:
    if isinstance(child, tuple) and len(child) == 2:
        api_version, kind = child
        return Target(api_version, kind, owner.namespace)
    return Target.of(as_ref(child, owner.namespace))

