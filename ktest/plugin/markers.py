"""The ``ktest_nodes`` and ``ktest_min_k8s`` markers: a test the cluster cannot run is skipped,
saying why, before anything starts where the settings already decide it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ktest import backend_registry as registry
from ktest.config import Settings
from ktest.plugin.session import SESSION_KEY, KtestSession, ktest_session

if TYPE_CHECKING:
    from ktest.sessions.backend import Backend

def _with_nodes() -> str:
    """How to choose a backend with nodes: ``--ktest-backend kind (or KTEST_BACKEND=kind)``."""
    return " or ".join(f"--ktest-backend {name} (or KTEST_BACKEND={name})" for name in registry.node_names())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``ktest_nodes`` test on backend bare is skipped before any fixture (``kind`` included) starts;
    so is a ``ktest_min_k8s`` test whose version the settings already rule out (backend bare)."""
    session = item.config.stash.get(SESSION_KEY, None)
    if session is None or session.settings_error is not None:
        return
    if item.get_closest_marker("ktest_nodes") is not None and _nodes(session.settings) == "never":
        pytest.skip(
            f"ktest_nodes: this test needs real nodes (a kubelet: containers that run, exec, logs, "
            f"port-forward, images), and backend {session.settings.backend} runs none (its simulated "
            f"nodes, ktest_nodes=N, schedule Pods and report them Running, but run no container); "
            f"run it with {_with_nodes()}"
        )
    minimum = item.get_closest_marker("ktest_min_k8s")
    if minimum is not None:
        version = _planned_version(session)
        if version is not None:
            _require_version(_minimum_version(minimum), version)


def _nodes(settings: Settings) -> str:
    return registry.spec(settings.backend).nodes


@pytest.fixture(autouse=True)
def _ktest_markers(request: pytest.FixtureRequest) -> None:
    """``ktest_nodes`` and ``ktest_min_k8s``: skip, with the reason, where the cluster cannot run the
    test (costs nothing for unmarked tests). What the settings decide without a control plane
    (backend bare) :func:`pytest_runtest_setup` skipped already; other backends ask the cluster."""
    node = request.node
    needs_nodes = node.get_closest_marker("ktest_nodes") is not None
    minimum = node.get_closest_marker("ktest_min_k8s")
    if not needs_nodes and minimum is None:
        return
    wanted = _minimum_version(minimum) if minimum is not None else None
    settings: Settings = request.getfixturevalue("ktest_settings")
    if needs_nodes and _nodes(settings) == "ask":
        backend: Backend = request.getfixturevalue("ktest_backend")
        if not backend.cluster.list("v1", "Node"):
            pytest.skip(
                f"ktest_nodes: this test needs real nodes, and the existing cluster ({backend.describe()}) "
                f"has none; run it against a cluster with nodes or with {_with_nodes()}"
            )
    if wanted is not None:
        version = _planned_version(ktest_session(request.config))
        if version is None:  # only the cluster can say
            version = request.getfixturevalue("ktest_backend").cluster.version
        _require_version(wanted, version)


def _require_version(wanted: tuple[int, ...], version: str) -> None:
    """Skip the test, saying why, when ``version`` is older than ``wanted`` (major, minor)."""
    if _version_tuple(version) < wanted:
        pytest.skip(
            f"ktest_min_k8s: this test needs Kubernetes {'.'.join(map(str, wanted))} or newer, "
            f"and the cluster runs {version}"
        )


_PLANNED_VERSION = pytest.StashKey[str]()


def _planned_version(session: KtestSession) -> str | None:
    """The Kubernetes version of the session's cluster, known without starting one where the
    settings decide it (a control plane ktest starts runs the k8s_version selector's minor, or
    the binaries ``latest`` resolves to); None when only the cluster can tell."""
    if session.backend is not None:
        return session.backend.cluster.version
    settings = session.settings
    if not registry.spec(settings.backend).starts_control_plane or settings.reuse:
        return None
    selector = settings.k8s_selector
    if not selector.is_latest:
        return f"{selector.major}.{selector.minor}"
    if _PLANNED_VERSION not in session.config.stash:
        from ktest.assets import resolve_assets

        session.config.stash[_PLANNED_VERSION] = resolve_assets(settings.k8s_version).version
    return session.config.stash[_PLANNED_VERSION]


def _version_tuple(text: str) -> tuple[int, ...]:
    from ktest.assets.selectors import KubeVersion

    version = KubeVersion.parse(text)
    return (version.major, version.minor)


def _minimum_version(marker: pytest.Mark) -> tuple[int, ...]:
    """The version of ``@pytest.mark.ktest_min_k8s("1.36")``; a wrong use fails the test saying how to fix."""
    from ktest.assets.selectors import KubeVersion
    from ktest.errors import AssetsError

    args = list(marker.args) or [marker.kwargs.get("version")]
    try:
        if len(args) != 1 or args[0] is None:
            raise AssetsError("one version")
        version = KubeVersion.parse(str(args[0]))
    except AssetsError:
        pytest.fail(
            f"@pytest.mark.ktest_min_k8s{marker.args!r}: give one Kubernetes version as major.minor, "
            'for example @pytest.mark.ktest_min_k8s("1.36")',
            pytrace=False,
        )
    return (version.major, version.minor)
