"""Owner references and garbage collection.

A child an operator creates carries an ownerReference to its owner (apiVersion,
kind, name and, above all, uid; ``controller: true`` for the managing
controller). The garbage collector then deletes the child after the owner
(propagation Background or Foreground) or strips the reference and leaves the
child alone (Orphan). Without a garbage collector nothing of this happens, and
the assertions say so instead of timing out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from ktest.assertions.objects import (
    Clock,
    crd_of,
    describe,
    duration_or_default,
    failure,
    field,
    finalizers_of,
    timeout_or_default,
    uid_of,
)
from ktest.assertions.waiting import Vanished, throughout, until
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.errors import ClusterError

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_OWNED = (
    "a child created by an operator carries an ownerReference to its owner with the owner's "
    "apiVersion, kind, name and uid (controller: true for the controller that manages it), so "
    "that the garbage collector deletes it with the owner and the owner is reconciled when it changes"
)
RULE_COLLECTED = (
    "the garbage collector deletes an object once no owner named in its ownerReferences (by uid) "
    "exists any more; with propagationPolicy=Foreground the owner itself waits for those dependents"
)
RULE_ORPHANED = (
    "deleting an owner with propagationPolicy=Orphan leaves its dependents in place: the garbage "
    "collector only removes their ownerReference to it"
)

_POLICIES = ("Background", "Foreground")
GC_RESYNC_HINT = 90.0
GC_DISCOVERY_PERIOD = 30.0
"""kube-controller-manager refreshes its discovery cache, and its garbage collector compares
the resource kinds it watches with discovery, each this often: a new kind can take two
periods to be watched."""
YOUNG_CHILD_SECONDS = 5.0
"""A child created this shortly before its owner's deletion may not be in the garbage collector's
view yet (its watch of the child's kind lags behind the API, more so on a loaded machine)."""
GC_DISCOVERY_ALLOWANCE = 2 * GC_DISCOVERY_PERIOD + 5.0
"""Seconds after a CRD's creation during which a slow collection may be the garbage
collector not watching that kind yet (it rediscovers kinds every 30 s)."""


def assert_owned_by(
    cluster: Cluster,
    child: RefLike,
    owner: RefLike,
    *,
    controller: bool | None = True,
    block_owner_deletion: bool | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Eventually ``child`` has an ownerReference to ``owner`` matching its uid, group/kind
    and name; ``controller``/``block_owner_deletion`` are checked unless None.

    Returns the matching ownerReference.
    """
    __tracebackhide__ = True
    child_ref, owner_ref = as_ref(child), as_ref(owner)
    wait = timeout_or_default(timeout)
    last: dict[str, Any] = {}

    def owned() -> dict[str, Any]:
        _owner = cluster.get(owner_ref)
        _child = cluster.get(child_ref)
        last.update(owner=_owner, child=_child)
        problems = owner_reference_problems(
            _child, _owner, controller=controller, block_owner_deletion=block_owner_deletion
        )
        if problems:
            raise AssertionError("; ".join(problems))
        return _matching(_child, _owner) or {}

    def explain(report: str) -> str:
        seen_child, seen_owner = last.get("child"), last.get("owner")
        return failure(
            f"{describe(child_ref, uid_of(seen_child))} is not owned by "
            f"{describe(owner_ref, uid_of(seen_owner))} as required after {wait:g}s",
            RULE_OWNED,
            [f"ownerReferences of the child: {_refs_text(seen_child)}", report],
        )

    return until(owned, timeout=wait, description=f"{child_ref} owned by {owner_ref}", explain=explain)


def owner_reference_problems(
    child: dict[str, Any],
    owner: dict[str, Any],
    *,
    controller: bool | None = True,
    block_owner_deletion: bool | None = None,
) -> list[str]:
    """Why ``child``'s ownerReferences do not (correctly) point at ``owner``; empty if they do."""
    owner_ref = ObjectRef.of(owner)
    child_ref = ObjectRef.of(child)
    owner_uid = uid_of(owner)
    refs = list(field(child, "metadata.ownerReferences") or [])
    problems = []
    if owner_ref.namespace and child_ref.namespace != owner_ref.namespace:
        problems.append(
            f"the owner is namespaced in {owner_ref.namespace} but the child is "
            f"{'cluster-scoped' if not child_ref.namespace else 'in ' + child_ref.namespace}: "
            "a namespaced owner must be in the child's namespace, otherwise the reference is "
            "treated as absent"
        )
    match = _matching(child, owner)
    if match is None:
        if not refs:
            problems.append("the child has no ownerReferences at all")
            return problems
        by_name = [r for r in refs if r.get("kind") == owner_ref.kind and r.get("name") == owner_ref.name]
        if by_name:
            problems.append(
                f"it refers to {owner_ref.kind} {owner_ref.name} with uid {by_name[0].get('uid')}, "
                f"but the owner's uid is {owner_uid} (a stale uid: the owner was recreated, or the "
                "uid came from an old copy)"
            )
        else:
            problems.append(f"no ownerReference has the owner's uid {owner_uid}")
        return problems
    group = match.get("apiVersion", "").rpartition("/")[0]
    if group != owner_ref.group or match.get("kind") != owner_ref.kind:
        problems.append(
            f"the reference says apiVersion {match.get('apiVersion')!r}, kind {match.get('kind')!r}; "
            f"the owner is apiVersion {owner_ref.api_version!r}, kind {owner_ref.kind!r}"
        )
    if match.get("name") != owner_ref.name:
        problems.append(f"the reference names {match.get('name')!r}, the owner is named {owner_ref.name!r}")
    if controller is not None and bool(match.get("controller")) != controller:
        problems.append(f"controller is {match.get('controller')!r}, expected {controller}")
        if controller:
            others = [r for r in refs if r.get("controller") and r is not match]
            if others:
                problems.append(f"the controller reference points elsewhere: {_ref_text(others[0])}")
    if block_owner_deletion is not None and bool(match.get("blockOwnerDeletion")) != block_owner_deletion:
        problems.append(
            f"blockOwnerDeletion is {match.get('blockOwnerDeletion')!r}, expected {block_owner_deletion}"
        )
    return problems


def assert_garbage_collected(
    cluster: Cluster,
    child: RefLike | Sequence[RefLike],
    owner: RefLike | None = None,
    *,
    propagation: str = "Background",
    delete_owner: bool = True,
    timeout: float | None = None,
) -> None:
    """Delete ``owner`` (with ``propagation``: Background or Foreground), then eventually
    ``child`` is gone (404 or recreated under a new uid); with Foreground, the owner too.

    ``child`` may be a list of children of the one owner (a Deployment *and* a Service):
    each is read before the owner is deleted, so a quick garbage collector cannot have
    taken one before it was seen, and the failure names the ones that stayed.

    With ``delete_owner=False`` (or no owner) the owner is assumed deleted already.
    While the owner's CRD is younger than the minute the garbage collector may take to
    discover it, the wait is extended to the end of that minute (the collector cannot act
    on a kind it does not watch yet), unless the cluster restarts the controllers after
    installing CRDs (ktest's bare backend does). Raises ClusterError at once if no garbage collector
    runs on the cluster.
    """
    __tracebackhide__ = True
    if propagation not in _POLICIES:
        raise ValueError(
            f"propagation must be Background or Foreground for garbage collection, not {propagation!r} "
            "(use assert_orphaned for Orphan)"
        )
    child_refs = [as_ref(one) for one in _several(child)]
    if not child_refs:
        raise ValueError("no child given: pass the child (or a list of the children) to check")
    names = ", ".join(describe(ref) for ref in child_refs)
    _require_gc(cluster, f"garbage collection of {names}")
    wait = timeout_or_default(timeout)
    before: dict[ObjectRef, dict[str, Any]] = {}
    for child_ref in child_refs:
        seen = cluster.get_or_none(child_ref)
        if seen is None:
            raise AssertionError(f"{describe(child_ref)} does not exist, so its garbage collection cannot be "
                                 "checked: create the child (and its owner) first")
        before[child_ref] = seen
    owner_ref = as_ref(owner) if owner is not None else None
    extra, why_extra = _gc_discovery_allowance(cluster, owner_ref)
    wait += extra
    owner_uid = None if owner_ref is None else _delete_owner(cluster, owner_ref, propagation, delete_owner)
    remaining: dict[ObjectRef, dict[str, Any]] = dict(before)  # the children not collected yet

    def collected() -> None:
        for child_ref in list(remaining):
            _child = cluster.get_or_none(child_ref)
            if _child is None or uid_of(_child) != uid_of(before[child_ref]):
                del remaining[child_ref]
            else:
                remaining[child_ref] = _child
        if remaining:
            raise AssertionError("; ".join(
                f"{'the child' if len(before) == 1 else ref.kind + ' ' + ref.name} still exists "
                f"(finalizers {finalizers_of(obj)})" for ref, obj in remaining.items()
            ))
        if propagation == "Foreground" and owner_ref is not None:
            _owner = cluster.get_or_none(owner_ref)
            if _owner is not None and uid_of(_owner) == owner_uid:
                raise AssertionError(
                    f"the {'child is' if len(before) == 1 else 'children are'} gone but the owner is still "
                    f"there (finalizers {finalizers_of(_owner)})"
                )

    def explain(report: str) -> str:
        observed = [f"{'the owner was deleted' if delete_owner and owner_ref else 'owner deletion assumed'}"
                    f" with propagationPolicy={propagation}; waited {wait:g}s{why_extra}"]
        stayed = [ref for ref in child_refs if ref in remaining] or child_refs  # all gone: the owner stayed
        for child_ref in stayed:
            seen = remaining.get(child_ref) or before[child_ref]
            notes = _why_not_collected(cluster, seen, owner_ref, owner_uid)
            prefix = "" if len(before) == 1 else f"{child_ref.kind} {child_ref.name}: "
            observed += [prefix + note for note in notes]
        observed.append(report)
        headline = " and ".join(describe(ref, uid_of(before[ref])) for ref in stayed)
        if len(before) == 1:
            headline += " was not garbage-collected"
        else:
            gone = [f"{ref.kind} {ref.name}" for ref in child_refs if ref not in remaining]
            headline += (f" {'was' if len(stayed) == 1 else 'were'} not garbage-collected ({len(stayed)} of "
                         f"{len(before)} children{'; collected: ' + ', '.join(gone) if gone else ''})")
        return failure(headline, RULE_COLLECTED, observed)

    until(collected, timeout=wait, description=f"{names} garbage-collected", explain=explain)


def assert_orphaned(
    cluster: Cluster,
    child: RefLike,
    owner: RefLike,
    *,
    delete_owner: bool = True,
    for_seconds: float | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Delete ``owner`` with propagation Orphan: the owner goes, ``child`` loses its
    ownerReference to it and stays (same uid) for ``for_seconds``. Returns the child.

    Raises ClusterError at once if no garbage collector runs (it does the orphaning).
    """
    __tracebackhide__ = True
    _require_gc(cluster, f"orphaning of {describe(child)}")
    child_ref, owner_ref = as_ref(child), as_ref(owner)
    wait = timeout_or_default(timeout)
    window = duration_or_default(for_seconds, "for_seconds")
    before = cluster.get_or_none(child_ref)
    if before is None:
        raise AssertionError(f"{describe(child_ref)} does not exist, so its survival cannot be checked")
    child_uid = uid_of(before)
    name = describe(child_ref, child_uid)
    extra, why_extra = _gc_discovery_allowance(cluster, owner_ref)
    wait += extra
    owner_uid = _delete_owner(cluster, owner_ref, "Orphan", delete_owner)
    young = _young_child_note(before, datetime.now(timezone.utc))
    clock = Clock()
    broke: list[str] = []

    def child_alive() -> dict[str, Any]:
        _child = cluster.get_or_none(child_ref)
        if _child is None or uid_of(_child) != child_uid:
            broke.append(f"at {clock} the child was {'gone (404)' if _child is None else 'recreated'}")
            raise Vanished()
        return _child

    def orphaned() -> dict[str, Any]:
        _child = child_alive()
        _owner = cluster.get_or_none(owner_ref)
        if _owner is not None and uid_of(_owner) == owner_uid:
            raise AssertionError(f"the owner still exists (finalizers {finalizers_of(_owner)})")
        _refs = [r.get("uid") for r in field(_child, "metadata.ownerReferences") or []]
        if owner_uid in _refs:
            raise AssertionError("the child still has its ownerReference to the deleted owner")
        return _child

    def deleted_message(report: str = "") -> str:
        return failure(
            f"{name} was deleted although its owner {describe(owner_ref, owner_uid)} was deleted with "
            "propagationPolicy=Orphan",
            RULE_ORPHANED,
            [*broke, "something else deleted it: typically an operator that deletes children "
             "explicitly instead of relying on ownerReferences", *young, *([report] if report else [])],
        )

    try:
        result = until(orphaned, timeout=wait, description=f"{child_ref} orphaned", explain=lambda report:
                       failure(f"{name} was not orphaned within {wait:g}s{why_extra}", RULE_ORPHANED,
                               [*_gc_discovery_note(cluster, owner_ref), report]))
        throughout(child_alive, duration=window, description=f"{child_ref} survives",
                   explain=deleted_message)
    except Vanished:
        raise AssertionError(deleted_message()) from None
    return result


def _young_child_note(child: dict[str, Any], owner_deleted: datetime) -> list[str]:
    """A hint when ``child`` was created moments before its owner's deletion: the garbage collector
    orphans only the dependents it has seen, and deletes one it saw later as dangling."""
    created = field(child, "metadata.creationTimestamp")
    try:
        born = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return []
    age = (owner_deleted - born).total_seconds()
    if age > YOUNG_CHILD_SECONDS:
        return []
    return [
        f"the child was created {max(age, 0.0):.0f}s before its owner's deletion (creationTimestamp "
        f"{created}): kube-controller-manager's garbage collector may not have seen it yet. It orphans "
        "only the dependents it knows, and when its watch then delivers this child, whose owner is gone, "
        "it deletes the child as dangling. If no operator deletes children here, let the collector see "
        "the child first: delete the owner once a later object of the child's kind whose owner does not "
        "exist has been collected (one watch delivers a kind's objects in order)"
    ]


def _several(child: RefLike | Sequence[RefLike]) -> list[RefLike]:
    """The children of ``child``: a list (or tuple) of references, or one reference (an object,
    an ObjectRef or an ``(apiVersion, kind, name[, namespace])`` tuple of strings)."""
    if isinstance(child, list) or (
        isinstance(child, tuple) and not all(part is None or isinstance(part, str) for part in child)
    ):
        return list(child)
    return [cast("RefLike", child)]  # a Mapping or a tuple of strings: one reference


def _delete_owner(cluster: Cluster, owner_ref: ObjectRef, propagation: str, delete: bool) -> str | None:
    """The owner's uid (None: it is gone already), deleting it with ``propagation`` when ``delete``."""
    owner = cluster.get_or_none(owner_ref)
    if delete and owner is not None:
        cluster.delete(owner_ref, propagation=propagation)
    return uid_of(owner)


def _require_gc(cluster: Cluster, what: str) -> None:
    if not cluster.gc_available:
        running = ", ".join(sorted(cluster.controllers or ())) or "none"
        raise ClusterError(
            f"cannot check {what}: no garbage collector runs on this cluster "
            f"(kube-controller-manager controllers: {running}), so owned objects are never deleted "
            "or orphaned. Run the control plane with the 'garbagecollector' controller, or use a "
            "cluster that runs one"
        )


def _owner_crd_age(cluster: Cluster, owner_ref: ObjectRef | None) -> tuple[str, float] | None:
    """The owner's CustomResourceDefinition name and age in seconds (None for built-in kinds)."""
    try:
        crd = crd_of(cluster, owner_ref) if owner_ref is not None else None
    except ClusterError:
        return None
    created = field(crd, "metadata.creationTimestamp")
    if crd is None or not created:
        return None
    try:
        age = (datetime.now(timezone.utc) - datetime.fromisoformat(created.replace("Z", "+00:00")))
    except ValueError:
        return None
    return crd["metadata"]["name"], age.total_seconds()


def _gc_discovery_allowance(cluster: Cluster, owner_ref: ObjectRef | None) -> tuple[float, str]:
    """Extra seconds to wait, and why, while the garbage collector may not watch the owner's
    young CRD kind yet (none when the cluster restarts its controllers after installing CRDs)."""
    if cluster.on_crds_installed is not None:
        return 0.0, ""
    found = _owner_crd_age(cluster, owner_ref)
    if found is None:
        return 0.0, ""
    name, age = found
    extra = float(math.ceil(max(0.0, GC_DISCOVERY_ALLOWANCE - age)))
    if not extra:
        return 0.0, ""
    return extra, (f" (+{extra:.0f}s: CustomResourceDefinition {name} was {age:.0f}s old, and the garbage "
                   f"collector may take {2 * GC_DISCOVERY_PERIOD:.0f}s to discover a new kind)")


def _gc_discovery_note(cluster: Cluster, owner_ref: ObjectRef | None) -> list[str]:
    """A hint when the owner's kind is a recently created CRD: kube-controller-manager's
    garbage collector looks for new kinds only every 30 seconds."""
    found = _owner_crd_age(cluster, owner_ref)
    if found is None or found[1] > GC_RESYNC_HINT:
        return []
    name, age = found
    return [
        f"the owner's kind comes from CustomResourceDefinition {name}, created "
        f"{age:.0f}s ago: kube-controller-manager's garbage collector picks up new "
        "resource kinds only on its 30-second discovery sync (up to a minute with kube-controller-manager's "
        "discovery cache), and until it watches a kind it does not "
        "notice owners of that kind going away. Install CRDs before the controller-manager starts, "
        "restart it afterwards (ControlPlane.restart_controllers()), or allow a longer timeout"
    ]


def _matching(child: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any] | None:
    owner_uid = uid_of(owner)
    for reference in field(child, "metadata.ownerReferences") or []:
        if reference.get("uid") == owner_uid:
            return dict(reference)
    return None


def _why_not_collected(
    cluster: Cluster, child: dict[str, Any], owner_ref: ObjectRef | None, owner_uid: str | None
) -> list[str]:
    notes = [f"ownerReferences of the child: {_refs_text(child)}"]
    refs = field(child, "metadata.ownerReferences") or []
    if not refs:
        notes.append("the child has no ownerReferences, so nothing ties it to the owner: the operator "
                     "must set one when it creates the child")
    elif owner_uid and owner_uid not in [r.get("uid") for r in refs]:
        notes.append(f"none of them has the owner's uid {owner_uid}")
    else:
        notes += _gc_discovery_note(cluster, owner_ref)
        alive = [_ref_text(r) for r in refs if r.get("uid") != owner_uid and _owner_exists(cluster, child, r)]
        if alive:
            notes.append("other owners still exist and keep it: " + "; ".join(alive))
    if finalizers_of(child):
        notes.append(f"the child has finalizers {finalizers_of(child)} that must be removed first")
    if child["metadata"].get("deletionTimestamp"):
        notes.append(f"deletion of the child started at {child['metadata']['deletionTimestamp']}")
    if owner_ref is not None:
        owner_now = cluster.get_or_none(owner_ref)
        if owner_now is not None and uid_of(owner_now) == owner_uid:
            notes.append(f"the owner still exists (finalizers {finalizers_of(owner_now)}, "
                         f"deletionTimestamp {owner_now['metadata'].get('deletionTimestamp')})")
    return notes


def _owner_exists(cluster: Cluster, child: dict[str, Any], reference: dict[str, Any]) -> bool:
    namespace = child["metadata"].get("namespace")
    try:
        ref = ObjectRef(reference["apiVersion"], reference["kind"], reference["name"], namespace)
        found = cluster.get_or_none(ref)
    except (KeyError, ClusterError):
        return False
    return found is not None and uid_of(found) == reference.get("uid")


def _refs_text(obj: dict[str, Any] | None) -> str:
    refs = field(obj, "metadata.ownerReferences") or []
    return "none" if not refs else "; ".join(_ref_text(r) for r in refs)


def _ref_text(reference: dict[str, Any]) -> str:
    flags = [name for name in ("controller", "blockOwnerDeletion") if reference.get(name)]
    return (f"{reference.get('kind')} {reference.get('name')} ({reference.get('apiVersion')}, "
            f"uid {reference.get('uid')}{', ' + ', '.join(flags) if flags else ''})")
