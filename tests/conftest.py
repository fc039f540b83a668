"""Fixtures shared by ktest's own test folders.

All folders use the same binaries: ``KTEST_ASSETS`` when set (any version,
used as is), else the version given with ``--ktest-k8s-version`` (the plugin's
option, so ``make test K8S_VERSION=1.35`` runs the whole suite on 1.35), else
the default.

``plane``, ``admin`` and ``ns`` are defined here once: one control plane per
session (per xdist worker) serves every folder that can share it. A folder
overrides one of them only where it needs something else, and says why
(``tests/wait``: a namespace per module; ``tests/hardening``: a plane per module
without controllers; ``tests/controlplane``: a plane of its own with the audit log).

Objects for tests are built with ``builders`` (tests/builders.py), messages checked
with ``messages.assert_says`` (tests/messages.py) and processes looked up with
``processes`` (tests/processes.py); a Cluster on a test's own control plane is wired with
``bare_wiring.plane_cluster`` (tests/bare_wiring.py); ``tests`` is on ``sys.path`` because this
conftest.py is in it. ``closed_port`` serves the folders that need a refused connection;
``inner_env`` the tests that run an inner pytest session with ``pytester`` (tests/plugin,
tests/sessions, the webhook report test), whose helpers are in tests/inner_runs.py. An inner
session attaches to the worker's warm control plane (``inner_warm_plane``, tests/warm_planes.py)
unless its test is marked ``own_plane`` (start-up, reuse or the plane's own settings are what it
tests) or its settings shape the plane (then it finds no compatible plane and starts its own): the
session's ``plane``, recorded for reuse (``inner_warm_plane``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bare_wiring import plane_cluster
from warm_planes import WarmPlane, shared_for_the_session

from ktest.assets import Assets, resolve_assets
from ktest.assets.store import Locations
from ktest.base.ports import free_ports
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

GO_CACHE_VARIABLES = ("GOCACHE", "GOMODCACHE")


@pytest.fixture(scope="session", autouse=True)
def real_go_caches() -> Iterator[None]:
    """Go's build and module caches stay the user's when ``pytester`` points HOME elsewhere: Go
    derives them from HOME, so every Go build in an inner session (ktest building kind, a Go
    operator) compiled the standard library and its modules again, 1.2 CPU-minutes a run. What a
    test isolates is ktest's own cache and state, never Go's."""
    go = shutil.which("go")
    if go is None:
        yield
        return
    found = subprocess.run([go, "env", *GO_CACHE_VARIABLES], capture_output=True, text=True, check=True)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in zip(GO_CACHE_VARIABLES, found.stdout.splitlines(), strict=True):
            if value and not os.environ.get(name):
                patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def k8s_assets(pytestconfig: pytest.Config) -> Assets:
    return resolve_assets(pytestconfig.getoption("--ktest-k8s-version", default=None))


@pytest.fixture(scope="session")
def session_plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    """The session's control plane (etcd, kube-apiserver, kube-controller-manager), under a name no
    folder overrides: what ``inner_warm_plane`` shares, whichever folder's test asks first."""
    with ControlPlane(assets=k8s_assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def plane(session_plane: ControlPlane) -> ControlPlane:
    """The plane a folder's tests use: the session's, unless the folder overrides it."""
    return session_plane


@pytest.fixture(scope="session")
def admin(plane: ControlPlane) -> Iterator[Cluster]:
    """The plane's admin, like the bare backend's: it issues users, and CRDs installed through
    it restart the garbage collector (which otherwise notices new kinds only every 30 s)."""
    with plane_cluster(plane, "admin") as cluster:
        yield cluster


@pytest.fixture
def ns(admin: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted in the background afterwards; named after the
    test, cut short so that tests can derive names from it (``f"{ns}-other"``)."""
    with admin.namespace(prefix=request.node.name[:30], background=True) as name:
        yield name


@pytest.fixture
def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (connections are refused at once), picked by ktest's
    own port finder, below the ephemeral range that outgoing connections draw from."""
    (port,) = free_ports(1)
    return port


@pytest.fixture(scope="session")
def binary_cache() -> Path:
    """The binary cache as seen from the real HOME (before pytester replaces it)."""
    return Locations.from_env().cache_root


@pytest.fixture(scope="session")
def inner_warm_plane(
    session_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[WarmPlane]:
    """The session's plane, shared for the inner sessions of this worker to attach to (with the
    default controllers and version: what an inner session gets when its settings do not say
    otherwise; asked for by ``inner_env`` before ``pytester`` points HOME elsewhere)."""
    with shared_for_the_session(session_plane, tmp_path_factory, pytestconfig, "inner-warm-state") as warm:
        yield warm


@pytest.fixture
def inner_env(
    inner_warm_plane: WarmPlane,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    binary_cache: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> dict[str, str]:
    """Environment of an inner run: the real binary cache, no KTEST_*, and the worker's warm control
    plane (or, for a test marked ``own_plane``, a private state directory: nothing to attach to)."""
    pytester.syspathinsert()
    for name in list(os.environ):
        if name.startswith("KTEST_") and name not in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
            monkeypatch.delenv(name)  # the outer run's settings must not leak in
    values = {
        "KTEST_CACHE_DIR": os.environ.get("KTEST_CACHE_DIR") or str(binary_cache),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTEST_ADDOPTS": "-p no:cacheprovider -W ignore::DeprecationWarning",
    }
    if request.node.get_closest_marker("own_plane") is None:
        values.update(inner_warm_plane.env)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


# `make check` (the inner loop) leaves out the tests marked slow: those running child pytest
# sessions, starting control planes of their own, building or running Go operators, or waiting on
# the garbage collector's discovery. A test is slow when it uses one of these fixtures, or when its
# module (or folder, ending in "/") is listed here: what takes seconds a test, measured in make
# check's JUnit XML (.ktest-stages/bare-quick.xml). A single test of 5 s or more there carries
# @pytest.mark.slow itself (one basic test per feature stays in the inner loop).
SLOW_FIXTURES = frozenset({"pytester", "inner_env", "docs_warm_plane"})
SLOW_MODULES = frozenset({
    "examples/",  # the demo suite: `make demo` runs it
    "tests/docs/test_docs_examples.py",  # each page a child pytest session
    "tests/nodes/test_behaviours.py",  # Pods through their lifecycles on simulated nodes
    "tests/replicas/test_replicas_go.py",  # failovers of real leader elections
    "tests/replicas/test_replicas_kopf.py",
    "tests/crd_versions/test_crd_evolution.py",  # storage migrations
    "tests/operators/test_operators_subprocess.py",  # operators as subprocesses
    "tests/operators/test_operators_fixtures.py",
    "tests/webhooks/test_idle_connections.py",  # waits out idle timeouts
    "tests/proxy/test_http2.py",
    "tests/assertions/test_assert_ownership.py",  # a new kind's GC waits for discovery (30-60 s)
    "tests/controlplane/test_deferred_controllers.py",  # planes of their own: start-up
    "tests/controlplane/test_etcd_template.py",
    "tests/controlplane/test_lifecycle.py",
    "tests/controlplane/test_startup_gate.py",
    "tests/hardening/test_soak.py",
    "tests/hardening/test_existing_namespaces.py",
    "tests/hardening/test_leftovers.py",
    "tests/hardening/test_environment_proxy.py",
    "tests/nodes/test_up_with_nodes.py",
    "tests/operators/test_operators_go.py",  # Go managers as subprocesses
    "tests/operators/test_operators_go_traces.py",
    "tests/operators/test_operators_go_build_progress.py",
    "tests/operators/test_operators_in_the_wild.py",
    "tests/operators/test_operators_kopf_request_retries.py",
    "tests/packaging/test_packaging.py",  # the sdist and wheel
    "tests/packaging/test_release.py",
    "tests/sessions/test_reuse.py",
    "tests/sessions/test_xdist_sharing.py",
    "tests/timeline/browser/test_timeline_in_browser.py",  # Chromium
    "tests/webhooks/test_go_manager.py",
    "tests/wait/test_wakeup.py",  # restarts the API server
})


# Session planes with a folder's own settings are started by each xdist worker that runs one of
# their tests, and then idle there until the session ends. Their tests go to one worker instead
# (--dist loadgroup): one start a run, one idle plane. (path prefix, fixture or None: every
# test there, group)
PLANE_GROUPS = (
    ("tests/hardening/", "plane", "hardening-plane"),
    ("tests/controlplane/", "shared_plane", "controlplane-audit-plane"),
    ("tests/nodes/", "nodes_plane", "nodes-plane"),
    ("tests/docs/test_docs_examples.py", None, "docs-warm-plane"),
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        module = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        listed = module in SLOW_MODULES or any(module.startswith(folder) for folder in SLOW_MODULES
                                                if folder.endswith("/"))
        if listed or SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        group = next((name for prefix, fixture, name in PLANE_GROUPS
                      if module.startswith(prefix) and (fixture is None or fixture in fixtures)), None)
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
