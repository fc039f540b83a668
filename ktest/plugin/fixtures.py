"""Every pytest fixture ktest provides, in one place (the model: pytest-django's ``fixtures.py``).

The core's fixtures are defined here. The add-ons' and the kind backend's are built in their
own modules, registered only when their part of ktest is there; they are listed here so that a
reader sees them all (``tests/plugin/test_plugin_fixtures.py`` checks this list against what a
real pytest session registers; ``pytest --fixtures`` and docs/reference/fixtures.md show each
one's whole docstring):

- ``ktest_settings`` (session; defined here): the run's resolved settings, checked before anything starts
- ``ktest_backend`` (session; defined here): where the session's cluster comes from
- ``cluster`` (session; defined here): the session's ``ktest.Cluster`` (admin credentials)
- ``control_plane`` (session; defined here): the embedded ``ktest.ControlPlane`` (backend bare)
- ``ktest_worker`` (session; defined here): this process's pytest-xdist worker id, or ``main``
- ``worker_namespace_selector`` (session; defined here): the label selector of this worker's namespaces
- ``namespace`` (function; defined here): a fresh namespace for the test, deleted afterwards
- ``webhooks`` (function; in ktest.webhooks.fixtures): started webhooks, limited to the test's namespace
- ``control_plane_upgrade`` (function; in ktest.plane_upgrade.fixtures): the test's own plane, to upgrade
- ``kubelet`` (function; in ktest.nodes.fixtures): Pod behaviours on simulated nodes
- ``kind`` (session; in ktest.backends.kind.fixtures): the session's kind cluster (backend kind)
- ``kind_cluster`` (session; in ktest.backends.kind.pytest_kind_compat): pytest-kind's ``kind_cluster``

Operators are started by context managers used inside your own fixtures (``operator_for_test``,
``namespace_for`` in :mod:`ktest.operators`), not by fixtures of ktest's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ktest.config import Settings
from ktest.errors import ConfigError
from ktest.plugin.session import (
    NAMESPACE_KEY,
    REPORTS_KEY,
    KeptNamespaceWarning,
    NamespaceCleanupWarning,
    ktest_session,
)

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.controlplane import ControlPlane
    from ktest.sessions.backend import Backend


@pytest.fixture(scope="session")
def ktest_settings(request: pytest.FixtureRequest) -> Settings:
    """The resolved ktest settings of this run, checked before anything starts.

    Every ktest fixture depends on this one: with bad settings, the first test that
    uses ktest fails with the error (naming the option, ini key or variable, or the
    file and line) and the session stops after it.
    """
    try:
        return ktest_session(request.config).usable_settings()
    except ConfigError as error:
        problem = f"ktest: {error}"
    request.session.shouldstop = "ktest: bad settings (the first ktest test says which)"
    pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def ktest_backend(pytestconfig: pytest.Config, ktest_settings: Settings) -> Iterator[Backend]:
    """Where the session's cluster comes from (opened on first use, closed at the end)."""
    session = ktest_session(pytestconfig)
    backend = session.open_backend()
    health = session.backend_spec.load("health")
    if health is not None:
        health(backend)
    try:
        yield backend
    finally:
        try:
            session.finish_deletions()
        finally:
            session.close_backend()


@pytest.fixture(scope="session")
def cluster(ktest_backend: Backend) -> Cluster:
    """The session's :class:`ktest.Cluster` (admin credentials), with ``ktest_crds`` installed."""
    return ktest_backend.cluster


@pytest.fixture(scope="session")
def control_plane(ktest_backend: Backend) -> ControlPlane:
    """The embedded :class:`ktest.ControlPlane` (backend bare, in the process running the tests)."""
    plane = ktest_backend.control_plane
    if plane is None:
        pytest.skip(
            "the control_plane fixture needs the embedded control plane in this process "
            f"(backend bare, without pytest-xdist or reuse); this session uses {ktest_backend.describe()}"
        )
    return plane


@pytest.fixture(scope="session")
def ktest_worker(pytestconfig: pytest.Config) -> str:
    """This process's pytest-xdist worker id (``gw0``, ``gw1``...), or ``main`` without xdist."""
    workerinput = getattr(pytestconfig, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.fixture(scope="session")
def worker_namespace_selector(ktest_worker: str) -> str:
    """The label selector of the test namespaces this worker creates (``ktest.dev/worker=gw0``).

    With ``-n N`` every worker runs its own copy of a session-scoped operator against the
    one shared cluster; an operator watching every namespace would then reconcile other
    workers' objects too, two copies writing the same object. Give it this selector."""
    from ktest.cluster.namespaces import WORKER_LABEL

    return f"{WORKER_LABEL}={ktest_worker}"


@pytest.fixture
def namespace(
    cluster: Cluster, request: pytest.FixtureRequest, ktest_settings: Settings, ktest_worker: str
) -> Iterator[str]:
    """A fresh namespace named after the test, labelled with its xdist worker, deleted afterwards:
    the deletion is waited for in the background while later tests run
    (``ktest_namespace_deletion = wait``: in the teardown)."""
    from ktest.cluster.namespaces import WORKER_LABEL, delete_namespace, release_namespace, unique_name

    name = unique_name(request.node.nodeid)
    cluster.create_namespace(name, labels={WORKER_LABEL: ktest_worker})
    request.node.stash[NAMESPACE_KEY] = (cluster, name)
    yield name
    if _keep_namespace(request.node, ktest_settings.keep_namespaces):
        release_namespace(cluster, name)  # kept on purpose: no later sweep deletes it
        warnings.warn(
            KeptNamespaceWarning(
                f"kept namespace {name} (ktest_keep_namespaces={ktest_settings.keep_namespaces}); "
                f"cluster: {cluster.server}, kubeconfig {cluster.kubeconfig}"
            ),
            stacklevel=1,
        )
        return
    if ktest_settings.namespace_deletion == "background":
        # Deleted now; waited for on a background thread while the next tests run (see
        # Cluster.namespace_reaper: operators drain it before they stop).
        reaper = cluster.namespace_reaper()
        reaper.timeout = ktest_settings.namespace_timeout
        reaper.force_finalizers_after = ktest_settings.finalizer_grace
        reaper.submit(name, requested_by=request.node.nodeid)
        return
    cleanup = delete_namespace(
        cluster,
        name,
        timeout=ktest_settings.namespace_timeout,
        force_finalizers_after=ktest_settings.finalizer_grace,
    )
    if cleanup.forced:
        warnings.warn(NamespaceCleanupWarning(cleanup.summary()), stacklevel=1)
        request.node.add_report_section("teardown", "ktest namespace cleanup", cleanup.summary())
    elif cleanup.note and ktest_session(request.config).first_time(cleanup.note.replace(name, "<ns>")):
        warnings.warn(NamespaceCleanupWarning(cleanup.note), stacklevel=1)


def _keep_namespace(item: pytest.Item, policy: str) -> bool:
    if policy == "always":
        return True
    if policy == "on-failure":
        reports = item.stash.get(REPORTS_KEY, {})
        return any(report.failed for report in reports.values())
    return False
