"""``assert_single_writer``: at most one replica writes any object at a time, read from the
replicas' proxies: every write the API server answered counts, refused ones too (a second
writer's create answered 409 AlreadyExists is a second writer all the same)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ktest.replicas.election import LOCK_KINDS, absolute

if TYPE_CHECKING:
    from ktest.proxy import Call
    from ktest.replicas.replica_set import OperatorReplicas

_SHOWN = 6


@dataclass(frozen=True)
class Write:
    """One write of one replica that reached the API server."""

    replica: str
    at: float
    """Monotonic time."""
    call: Call


ObjectKey = tuple[str, str | None, str]
"""(resource.group, namespace, name)."""


def replica_writes(op: OperatorReplicas, since: float | None = None) -> dict[ObjectKey, list[Write]]:
    """Every write of every replica the API server answered, by object (resource, namespace,
    name), oldest first; the election's own lock objects (Lease, KopfPeering) left out: every
    replica writes those."""
    found: dict[ObjectKey, list[Write]] = defaultdict(list)
    for replica in op.replicas:
        if replica.proxy is None:
            continue
        for call in replica.traffic.calls():
            request = call.request
            answered = call.status is not None and not call.answered_by_fault
            if not call.is_write or not answered or not request.name or request.resource in LOCK_KINDS:
                continue
            at = absolute(replica, call)
            if since is not None and at < since:
                continue
            key = (request.qualified_resource, request.namespace, request.name)
            found[key].append(Write(replica.name, at, call))
    for writes in found.values():
        writes.sort(key=lambda write: write.at)
    return dict(found)


def assert_single_writer(
    op: OperatorReplicas, window: float | None = None, *, since: float | None = None
) -> int:
    """Fail if two replicas of ``op`` wrote the same object within ``window`` seconds of each other
    (None: at any time of the run; a failover hands objects over to the new leader, so pass a
    window shorter than the time between the old leader's last write and the new one's first).

    ``since`` (``time.monotonic()``) ignores earlier writes. The failure names each object, the
    replicas and their requests. Returns how many writes were checked.
    """
    __tracebackhide__ = True
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, (int, float)) or window < 0
    ):
        raise ValueError(
            f"assert_single_writer: window={window!r} must be seconds, 0 or more (or None: the whole run)."
        )
    writes = replica_writes(op, since)
    clashes: list[Clash] = []
    for (resource, namespace, name), ordered in writes.items():
        pairs = [
            (first, second)
            for first, second in itertools.pairwise(ordered)
            if first.replica != second.replica and (window is None or second.at - first.at <= window)
        ]
        if pairs:
            clashes.append(((resource, namespace, name), ordered, pairs))
    if clashes:
        raise AssertionError(_message(op, clashes, window))
    return sum(len(ordered) for ordered in writes.values())


Clash = tuple[ObjectKey, list[Write], list[tuple[Write, Write]]]
"""An object, every write of it, and the pairs of writes by two replicas too close together."""


def _message(op: OperatorReplicas, clashes: list[Clash], window: float | None) -> str:
    within = "during the run" if window is None else f"within {window:g} s of each other"
    lines = [
        f"two writers: replicas of operator {op.name!r} wrote the same objects {within} "
        f"({len(clashes)} object{'s' if len(clashes) != 1 else ''}); one leader should write at a time."
    ]
    for (resource, namespace, name), ordered, pairs in clashes[:_SHOWN]:
        where = f"{namespace}/{name}" if namespace else name
        replicas = sorted({write.replica for pair in pairs for write in pair})
        closest = min(second.at - first.at for first, second in pairs)
        lines.append(
            f"- {resource} {where}: written by {' and '.join(replicas)}, "
            f"{closest * 1000:.0f} ms apart at the closest:"
        )
        origin = ordered[0].at
        lines += [
            f"    +{write.at - origin:.3f}s {write.replica}: "
            f"{write.call.request.verb_and_target()} -> {write.call.status}"
            for write in ordered[-8:]
        ]
    if len(clashes) > _SHOWN:
        lines.append(f"... and {len(clashes) - _SHOWN} more objects.")
    election = op.leadership()
    lines.append(f"Leader election: {election.describe(op.names)}.")
    lines.append(
        "Run the operator with leader election (controller-runtime: --leader-elect, i.e. "
        "Options.LeaderElection; kopf: peering with distinct priorities), and make a replica stop "
        "writing as soon as it loses its lease."
    )
    return "\n".join(lines)
