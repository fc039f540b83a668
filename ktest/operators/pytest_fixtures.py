"""Fixture building blocks for operators under test (no pytest import needed here).

Session-scoped operator, namespace per test::

    @pytest.fixture(scope="session")
    def operator(cluster):
        with run_kopf("my_operator.handlers", cluster, cluster_wide=True) as op:
            yield op

    @pytest.fixture
    def ns(cluster, operator):          # requesting the operator orders the teardowns
        with namespace_for(operator, cluster) as name:
            yield name

pytest tears fixtures down in the reverse order of their setup, so a namespace fixture that
requests the operator fixture is deleted while the operator still runs and can process its
finalizers; one that does not may outlive it and stay ``Terminating`` for good.
:func:`namespace_for` checks exactly this and says how to fix it.

Operator per test, limited to the test's namespace: :func:`operator_for_test` stops the operator
only after what the test left in the namespace is deleted and gone::

    @pytest.fixture
    def operator(cluster, namespace):
        with operator_for_test(run_kopf("my_operator.handlers", cluster, namespaces=[namespace]),
                               cluster, namespace) as op:
            yield op
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ktest.cluster.rest import for_upkeep
from ktest.errors import ClusterError, OperatorError
from ktest.errors.api import ApiError

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.cluster.discovery import ResourceInfo
    from ktest.operators.operator import OperatorHandle


@contextlib.contextmanager
def namespace_for(
    operator: OperatorHandle,
    cluster: Cluster,
    *,
    prefix: str = "ktest",
    labels: Mapping[str, str] | None = None,
    delete_timeout: float = 60.0,
) -> Iterator[str]:
    """A fresh namespace deleted (and waited for) while ``operator`` still runs.

    ``cluster`` must be allowed to create namespaces (the admin cluster, not
    a least-privilege operator identity). If the operator is no longer running
    when the namespace is to be deleted, the namespace is deleted in the
    background and ``OperatorError`` explains the fixture order to use.
    """
    from ktest.cluster.namespaces import create_namespace, unique_name

    name = unique_name(prefix)
    create_namespace(cluster, name, labels=labels)
    try:
        yield name
    finally:
        if operator.alive:
            _delete_while_running(operator, cluster, name, delete_timeout)
        else:
            cluster.namespace_reaper().submit(name)
            raise OperatorError(
                f"namespace {name} was deleted after operator {operator.name!r} had stopped "
                f"(it is {operator.state}), so the operator could not process the finalizers of the "
                "objects in it. Make the namespace fixture request the operator fixture, so pytest "
                "tears the namespace down first."
            )


def _delete_while_running(operator: OperatorHandle, cluster: Cluster, name: str, timeout: float) -> None:
    from ktest.cluster.namespaces import delete_namespace

    try:
        cleanup = delete_namespace(cluster, name, timeout=timeout)
    except ClusterError as error:
        failure = operator.error
        if failure is not None:
            raise OperatorError(f"namespace {name} could not be deleted: {error}\n{failure}") from error
        raise
    if cleanup.forced and cleanup.held_by:
        held = "; ".join(str(item) for item in cleanup.held_by)
        raise OperatorError(
            f"namespace {name} was deleted only after ktest removed finalizers by force: {held}. "
            f"Operator {operator.name!r} was running but did not finish those objects' deletion; "
            "its log tells why (a failing deletion handler, missing RBAC for update/patch)."
        )


@contextlib.contextmanager
def operator_for_test(
    operator: OperatorHandle,
    cluster: Cluster,
    namespace: str,
    *,
    before_cleanup: Callable[[], object] | None = None,
    timeout: float = 60.0,
) -> Iterator[OperatorHandle]:
    """Yield the started ``operator``; afterwards, while it still runs, delete the custom
    resources and every object carrying finalizers in ``namespace``, and the cluster-scoped
    custom objects the test created through ktest (``cluster.create``/``apply``), and wait
    until they are gone (:func:`finalize_namespace`, :func:`finalize_cluster_objects`), then
    stop it. Stopping waits for no other namespace deletion (other tests' namespaces are not
    this operator's concern, even for a cluster-wide one).

    Right after the test, work the operator still retries by design is judged
    (:meth:`~ktest.operators.operator.OperatorHandle.settle`: a kopf handler still failing with
    ``TemporaryError`` fails the test). ``before_cleanup`` runs next (e.g. make a fake backend
    healthy again so deletions can succeed). An operator the test crashed or stopped is
    restarted for the clean-up only if some object to clean up still carries a finalizer it
    owns (:meth:`~ktest.operators.operator.OperatorHandle.owns_finalizer`), since only a running
    operator removes its finalizers; otherwise the deletions need no operator and it stays
    stopped. ``cluster`` must be allowed to list and delete them (the admin cluster). An
    object still present after ``timeout`` seconds fails the teardown, naming it and its
    finalizers.
    """
    from ktest import run_context

    test = run_context.current_test()
    created_before = len(test.created) if test is not None else 0
    operator.wait_for_namespaces = [namespace]
    with operator:
        yield operator
        operator.settle()
        if before_cleanup is not None:
            before_cleanup()
        unreported = operator.unreported_error()
        created = test.created[created_before:] if test is not None else []
        if not operator.alive:
            holders = _held_finalizers(cluster, namespace, created, operator)
            if holders:
                operator.log.write(
                    f"---- ktest: restarting {operator.name} for the clean-up: {'; '.join(holders)} ----"
                )
                operator.restart()  # forgets the error: it is raised below if no check reported it
        finalize_namespace(cluster, namespace, timeout=timeout, operator=operator)
        finalize_cluster_objects(cluster, created, timeout=timeout, operator=operator)
        if unreported is not None:
            raise unreported


def _held_finalizers(
    cluster: Cluster,
    namespace: str,
    created: Sequence[tuple[str, str, str, str]],
    operator: OperatorHandle,
) -> list[str]:
    """The objects of the clean-up (in ``namespace``, and the cluster-scoped ``created``) that
    carry a finalizer ``operator`` owns, as "<kind> <name> holds <finalizer>" lines."""
    found = []
    for info, obj in _namespaced_objects(cluster, namespace):
        found.extend(_owned(info.kind, obj, operator))
    for api_version, kind, name, uid in dict.fromkeys(created):
        try:
            info = cluster.info(api_version, kind)
            obj = cluster.rest.request("GET", info.path(None, name))
        except (ClusterError, ApiError):
            continue  # gone (or its kind is), so nothing to finalize
        if (obj.get("metadata") or {}).get("uid") == uid:
            found.extend(_owned(kind, obj, operator))
    return found


def _owned(kind: str, obj: Mapping[str, Any], operator: OperatorHandle) -> list[str]:
    meta = obj.get("metadata") or {}
    return [
        f"{kind} {meta.get('name')} holds {finalizer}"
        for finalizer in meta.get("finalizers") or []
        if operator.owns_finalizer(finalizer)
    ]


def finalize_namespace(
    cluster: Cluster, namespace: str, *, timeout: float = 60.0, operator: OperatorHandle | None = None
) -> None:
    """Delete the custom resources and every object carrying finalizers in ``namespace``, then
    wait until those are gone: what the namespace controller would do, but now, while the
    operator that owns the finalizers still runs."""

    from ktest.cluster.discovery import is_custom_api_version

    doomed = [
        (info, namespace, obj["metadata"]["name"], obj["metadata"].get("uid", ""))
        for info, obj in _namespaced_objects(cluster, namespace)
        if is_custom_api_version(info.api_version) or (obj.get("metadata") or {}).get("finalizers")
    ]
    _delete_and_wait(cluster, doomed, where=f"in {namespace}", timeout=timeout, operator=operator)


def finalize_cluster_objects(
    cluster: Cluster,
    created: Sequence[tuple[str, str, str, str]],
    *,
    timeout: float = 60.0,
    operator: OperatorHandle | None = None,
) -> None:
    """Delete cluster-scoped objects, given as (apiVersion, kind, name, uid) (what a test
    created: ``ktest.run_context.current_test().created``), and wait until they are gone, while
    the operator that owns their finalizers still runs. One recreated since (another uid)
    is left alone."""
    doomed = []
    for api_version, kind, name, uid in dict.fromkeys(created):
        try:
            info = cluster.info(api_version, kind)
        except ClusterError:
            continue  # its CRD is gone, and the objects with it
        doomed.append((info, None, name, uid))
    _delete_and_wait(cluster, doomed, where="cluster-scoped", timeout=timeout, operator=operator)


def _delete_and_wait(
    cluster: Cluster,
    doomed: Sequence[tuple[ResourceInfo, str | None, str, str]],
    *,
    where: str,
    timeout: float,
    operator: OperatorHandle | None,
) -> None:
    if not doomed:
        return
    from ktest.wait import eventually

    for info, namespace, name, _ in doomed:
        try:
            cluster.rest.request("DELETE", info.path(namespace, name))
        except ApiError as error:
            if error.status != 404:
                raise

    def all_gone() -> bool:
        remaining = []
        for info, namespace, name, uid in doomed:
            try:
                obj = cluster.rest.request("GET", info.path(namespace, name))
            except ApiError as error:
                if error.status == 404:
                    continue
                raise
            if obj["metadata"].get("uid") == uid:
                remaining.append(f"{info.kind} {name} (finalizers {obj['metadata'].get('finalizers') or []})")
        assert not remaining, f"still there ({where}): {'; '.join(remaining)}"
        return True

    who = f"operator {operator.name!r}" if operator is not None else "the operator"
    eventually(
        all_gone,
        timeout=timeout,
        description=f"the test's objects ({where}) are finalized by {who} and gone",
    )


def _namespaced_objects(cluster: Cluster, namespace: str) -> Iterator[tuple[ResourceInfo, dict[str, Any]]]:
    """Every object in ``namespace`` (Events aside) with its kind, skipping kinds it cannot list."""
    for info in cluster.discovery.namespaced_kinds():
        if info.kind == "Event":
            continue
        try:
            with for_upkeep():
                items = cluster.rest.request("GET", info.path(namespace)).get("items") or []
        except ApiError as error:
            if error.status in (403, 404, 405, 503):  # not ours to see, gone, or an unavailable API
                continue
            raise
        for obj in items:
            yield info, obj
