"""Finalizers: added before side effects, blocking deletion while cleanup fails, then gone.

The rules (see the design documents' BucketClaim operator): an operator that
creates something outside the object adds its finalizer first; on deletion the
API server keeps the object (``deletionTimestamp`` set) as long as any finalizer
is listed; the operator removes its finalizer only once cleanup succeeded, and
treats "already gone" as success, so the object then disappears.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ktest.assertions.objects import (
    Clock,
    describe,
    duration_or_default,
    failure,
    finalizers_of,
    timeout_or_default,
    uid_of,
)
from ktest.assertions.waiting import Vanished, throughout, until, until_read
from ktest.cluster.refs import RefLike, as_ref

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_ADD = (
    "an operator that cleans up on deletion adds its finalizer to metadata.finalizers before it "
    "creates anything outside the object; otherwise a deletion in between leaks what it created"
)
RULE_BLOCK = (
    "while a finalizer is listed in metadata.finalizers the API server keeps a deleted object "
    "(metadata.deletionTimestamp set); the operator must keep its finalizer while cleanup fails "
    "and remove it only after cleanup succeeded"
)
RULE_GONE = (
    "an object marked for deletion is removed as soon as metadata.finalizers is empty: each "
    "finalizer's owner must finish its cleanup (treating 'already gone' as done) and then remove it"
)
RULE_NOT_DELETED = (
    "nothing removes an object until it is deleted: metadata.deletionTimestamp is unset, "
    "so no deletion was requested (delete it first, e.g. cluster.delete(obj))"
)

_WELL_KNOWN = {
    "foregroundDeletion": "the garbage collector removes it after deleting the dependents "
    "that have blockOwnerDeletion (foreground deletion)",
    "orphan": "the garbage collector removes it after removing the ownerReferences of the dependents",
    "kubernetes": "the namespace controller removes it once the namespace is empty",
}


def assert_has_finalizer(
    cluster: Cluster, obj: RefLike, finalizer: str, *, timeout: float | None = None
) -> dict[str, Any]:
    """Eventually ``obj`` lists ``finalizer`` in ``metadata.finalizers``; returns the object."""
    __tracebackhide__ = True
    ref = as_ref(obj)
    wait = timeout_or_default(timeout)

    def has_finalizer(current: dict[str, Any]) -> dict[str, Any]:
        present = finalizers_of(current)
        deleting = current["metadata"].get("deletionTimestamp")
        if finalizer not in present:
            raise AssertionError(
                f"metadata.finalizers is {present}"
                + (f" (and deletion already requested at {deleting})" if deleting else "")
            )
        return current

    def explain(report: str, seen: dict[str, Any] | None) -> str:
        headline = (
            f"{describe(ref, uid_of(seen))} never got finalizer {finalizer!r} within {wait:g}s"
            if seen is not None
            else f"{describe(ref)} never existed with finalizer {finalizer!r} within {wait:g}s"
        )
        return failure(headline, RULE_ADD, report)

    return until_read(
        cluster,
        ref,
        has_finalizer,
        timeout=wait,
        description=f"{ref} has finalizer {finalizer!r}",
        explain=explain,
    )


def assert_deletion_blocked(
    cluster: Cluster,
    obj: RefLike,
    finalizer: str,
    for_seconds: float | None = None,
    *,
    delete: bool = False,
    propagation: str | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """After a delete request, ``obj`` stays (same UID, ``deletionTimestamp`` set,
    ``finalizer`` listed) for ``for_seconds`` (default: the consistently duration).

    With ``delete=True`` the assertion sends the delete request itself; otherwise
    it waits up to ``timeout`` for someone else's. Returns the object as last seen.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    window = duration_or_default(for_seconds, "for_seconds")
    before = cluster.get_or_none(ref)
    if before is None:
        raise AssertionError(
            failure(
                f"deletion of {describe(ref)} was not blocked by finalizer {finalizer!r}: it does not exist",
                RULE_BLOCK,
                "the object was already gone before the check started (404): the finalizer was "
                "removed, or never added, before cleanup could run",
            )
        )
    uid = uid_of(before)
    name = describe(ref, uid)
    clock = Clock()
    if delete:
        cluster.delete(ref, propagation=propagation)
    marked = _wait_marked(cluster, ref, uid, name, finalizer, timeout_or_default(timeout), before)
    at_request = finalizers_of(marked)
    if finalizer not in at_request:
        raise AssertionError(
            failure(
                f"deletion of {name} is not blocked by finalizer {finalizer!r}",
                RULE_BLOCK,
                f"when deletion was requested (deletionTimestamp {marked['metadata']['deletionTimestamp']}) "
                f"metadata.finalizers was {at_request}: {finalizer!r} was not there",
            )
        )
    history: list[str] = []
    last: dict[str, Any] = {"obj": marked}

    def still_blocked() -> str:
        _current = cluster.get_or_none(ref)
        if _current is None:
            history.append(f"at {clock}: the object is gone (404)")
            raise AssertionError("the object is gone (404 Not Found)")
        if uid_of(_current) != uid:
            history.append(f"at {clock}: the object was deleted and recreated (uid {uid_of(_current)})")
            raise AssertionError(f"the object was deleted and recreated with uid {uid_of(_current)}")
        last["obj"] = _current
        present = finalizers_of(_current)
        if finalizer not in present:
            history.append(f"at {clock}: finalizer {finalizer!r} removed; finalizers now {present}")
            raise AssertionError(f"finalizer {finalizer!r} was removed (finalizers now {present})")
        return f"blocked at {clock}: finalizers {present}"

    def explain(report: str) -> str:
        observed = [
            f"delete requested (deletionTimestamp {marked['metadata']['deletionTimestamp']}), "
            f"finalizers then {at_request}",
            *history[-1:],
            f"(times are since the check started; required to stay blocked for {window:g}s)",
            report,
        ]
        return failure(f"deletion of {name} was not blocked by finalizer {finalizer!r}", RULE_BLOCK, observed)

    throughout(
        still_blocked, duration=window, description=f"{ref} still blocked by {finalizer!r}", explain=explain
    )
    return last["obj"]


def assert_gone(cluster: Cluster, obj: RefLike, *, timeout: float | None = None) -> None:
    """Eventually ``obj`` no longer exists: 404, or present under a new UID (recreated).

    The UID compared against is ``obj``'s own ``metadata.uid`` when ``obj`` is a
    dict that has one, else that of the object found when the check starts.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    wait = timeout_or_default(timeout)
    uid = uid_of(obj) if isinstance(obj, dict) else None
    if uid is None:
        found = cluster.get_or_none(ref)
        if found is None:
            return
        uid = uid_of(found)
    last: dict[str, Any] = {}

    def gone() -> None:
        _current = cluster.get_or_none(ref)
        if _current is None or uid_of(_current) != uid:
            return
        last["obj"] = _current
        raise AssertionError(_still_there(_current))

    def explain(report: str) -> str:
        seen = last.get("obj") or {}
        rule = RULE_GONE if (seen.get("metadata") or {}).get("deletionTimestamp") else RULE_NOT_DELETED
        return failure(
            f"{describe(ref, uid)} still exists {wait:g}s later",
            rule,
            [*_finalizer_notes(cluster, seen), report],
        )

    until(gone, timeout=wait, description=f"{ref} is gone", explain=explain)


@dataclass
class FinalizerScenario:
    """What :func:`finalizer_scenario` saw: the UID checked and seconds per step."""

    obj: str
    uid: str | None
    timings: dict[str, float] = field(default_factory=dict)


def finalizer_scenario(
    cluster: Cluster,
    obj: RefLike,
    finalizer: str,
    *,
    break_cleanup: Callable[[], object] | None = None,
    fix_cleanup: Callable[[], object] | None = None,
    cleanup_failing: AbstractContextManager[Any] | None = None,
    blocked_for: float | None = None,
    timeout: float | None = None,
    propagation: str | None = None,
) -> FinalizerScenario:
    """The classic finalizer test: make cleanup fail, delete, assert deletion is
    blocked; let cleanup succeed, assert the object is gone.

    Give either ``break_cleanup`` and ``fix_cleanup`` (two callables), or
    ``cleanup_failing``, a context manager inside which cleanup fails. Cleanup is
    always let succeed again before returning, even when a step fails.
    """
    __tracebackhide__ = True
    break_it, fix_it = _cleanup_steps(break_cleanup, fix_cleanup, cleanup_failing)
    ref = as_ref(obj)
    result = FinalizerScenario(str(ref), None)
    clock = Clock()

    def step(name: str, action: Callable[[], Any]) -> Any:
        started = clock.elapsed()
        try:
            value = action()
        except AssertionError as error:
            raise AssertionError(f"finalizer scenario, step '{name}' failed:\n{error}") from None
        result.timings[name] = clock.elapsed() - started
        return value

    current = step("has finalizer", lambda: assert_has_finalizer(cluster, ref, finalizer, timeout=timeout))
    result.uid = uid_of(current)
    break_it()
    try:
        cluster.delete(ref, propagation=propagation)
        step(
            "deletion blocked while cleanup fails",
            lambda: assert_deletion_blocked(cluster, ref, finalizer, blocked_for, timeout=timeout),
        )
    finally:  # cleanup succeeds again, even when the step failed
        fix_it()
    step("gone once cleanup succeeds", lambda: assert_gone(cluster, current, timeout=timeout))
    return result


def _cleanup_steps(
    break_cleanup: Callable[[], object] | None,
    fix_cleanup: Callable[[], object] | None,
    cleanup_failing: AbstractContextManager[Any] | None,
) -> tuple[Callable[[], object], Callable[[], object]]:
    """The two callables that make cleanup fail and let it succeed again."""
    if cleanup_failing is not None:
        if break_cleanup is not None or fix_cleanup is not None:
            raise TypeError("finalizer_scenario: pass cleanup_failing or break_cleanup/fix_cleanup, not both")
        manager = cleanup_failing
        return manager.__enter__, lambda: manager.__exit__(None, None, None)
    if break_cleanup is None or fix_cleanup is None:
        raise TypeError(
            "finalizer_scenario needs a way to make cleanup fail and succeed again: pass "
            "break_cleanup=... and fix_cleanup=... (two callables), or cleanup_failing=<context manager>"
        )
    return break_cleanup, fix_cleanup


def _wait_marked(
    cluster: Cluster,
    ref: Any,
    uid: str | None,
    name: str,
    finalizer: str,
    timeout: float,
    before: dict[str, Any],
) -> dict[str, Any]:
    """The object once its deletionTimestamp is set (the delete request arrived)."""

    def marked() -> dict[str, Any]:
        _current = cluster.get_or_none(ref)
        if _current is None or uid_of(_current) != uid:
            raise Vanished()
        if not _current["metadata"].get("deletionTimestamp"):
            raise AssertionError("metadata.deletionTimestamp is unset")
        return _current

    try:
        return until(
            marked,
            timeout=timeout,
            description=f"{ref} has a deletionTimestamp",
            explain=lambda report: failure(
                f"no deletion of {name} was requested within {timeout:g}s",
                RULE_BLOCK,
                [
                    "metadata.deletionTimestamp stayed unset: delete the object first, or pass delete=True",
                    report,
                ],
            ),
        )
    except Vanished:
        raise AssertionError(
            failure(
                f"deletion of {name} was not blocked by finalizer {finalizer!r}",
                RULE_BLOCK,
                f"the object was already gone when the check looked (finalizers before: "
                f"{finalizers_of(before)}): {finalizer!r} was removed without waiting for cleanup",
            )
        ) from None


def _still_there(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    deleting = meta.get("deletionTimestamp")
    state = f"deletionTimestamp {deleting}" if deleting else "no deletionTimestamp (not being deleted)"
    return f"still present with {state}, finalizers {finalizers_of(obj)}"


def _finalizer_notes(cluster: Cluster, obj: dict[str, Any]) -> list[str]:
    notes = []
    for name in finalizers_of(obj):
        known = _WELL_KNOWN.get(name)
        if known is None:
            notes.append(f"finalizer {name!r}: waiting for the controller that owns it to remove it")
        elif name in ("foregroundDeletion", "orphan") and not cluster.gc_available:
            notes.append(f"finalizer {name!r}: {known}, but no garbage collector runs on this cluster")
        else:
            notes.append(f"finalizer {name!r}: {known}")
    return notes
