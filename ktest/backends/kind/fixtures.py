"""Fixtures of the kind backend: ``kind`` (ktest's handle), pytest-kind's ``kind_cluster``, health check.

``kind`` exists on every backend (and skips off kind). pytest-kind's ``kind_cluster``
(:mod:`.pytest_kind_compat`) is registered on backend kind, overriding any other plugin's;
on other backends only when no other plugin provides one (:func:`pytest_sessionstart`), so such
a plugin's own fixture is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ktest.backends.kind.handle import KindHandle
    from ktest.sessions.backend import Backend


def watch_nodes(backend: Backend) -> None:
    """The registry's ``health``: fail the test with "the kind cluster stopped" rather than
    connection errors."""
    from ktest.backends.kind.backend import cluster_name_of

    name = cluster_name_of(backend)
    if not name:
        return
    from ktest.backends.kind.cluster import cluster_stopped
    from ktest.backends.kind.engine import connect
    from ktest.errors import KindError
    from ktest.run_context import add_health_check

    client = connect(check_runtime=False)  # one connection for the session, whatever tests do to DOCKER_HOST

    def check() -> None:
        problem = cluster_stopped(name, client)
        if problem:
            raise KindError(f"{problem}: the tests cannot reach their cluster any more")

    add_health_check(check)


@pytest.fixture(scope="session")
def kind(ktest_backend: Backend) -> KindHandle:
    """The session's kind cluster: ``load_image``, ``kubectl``, ``port_forward``, ``deploy_operator``."""
    from ktest.backends.kind.backend import AttachedKindBackend, KindBackend

    # Owned, kept or shared by the xdist controller: each has the handle.
    if not isinstance(ktest_backend, KindBackend | AttachedKindBackend):
        pytest.skip(
            "this test needs real nodes (the kind fixture): run it with --ktest-backend kind; "
            f"this session uses {ktest_backend.describe()}"
        )
    return ktest_backend.handle


COMPAT_PLUGIN = "ktest-kind-compat"
KIND_CLUSTER = "kind_cluster"


def _register_compat(config: pytest.Config) -> None:
    from ktest.backends.kind import pytest_kind_compat

    config.pluginmanager.register(pytest_kind_compat, COMPAT_PLUGIN)


def register(config: pytest.Config, selected: bool) -> None:
    """The registry's ``fixtures``: ``kind`` always; ``kind_cluster`` now when the session's backend
    is kind (``selected``), else at session start unless another plugin provides it
    (:func:`pytest_sessionstart`)."""
    import sys

    config.pluginmanager.register(sys.modules[__name__], "ktest-kind-fixtures")
    if selected:
        _register_compat(config)


def other_kind_cluster_providers(session: pytest.Session) -> list[str]:
    """The modules of the plugins other than ktest that provide ``kind_cluster`` (pytest-kind,
    pytest-kind-ng, ...), as pytest's fixture manager knows them once every plugin is loaded."""
    import inspect

    manager = session._fixturemanager
    # pytest 8.0 looks fixtures up by node id, later versions by node
    by_node = "node" in inspect.signature(manager.getfixturedefs).parameters
    definitions = manager.getfixturedefs(KIND_CLUSTER, session if by_node else "") or ()  # type: ignore[arg-type]
    modules = [getattr(definition.func, "__module__", "") or "" for definition in definitions]
    return [module for module in modules if module.split(".")[0] != "ktest"]


@pytest.hookimpl(trylast=True)  # after pytest's own, which makes the fixture manager
def pytest_sessionstart(session: pytest.Session) -> None:
    """Off backend kind, ktest's ``kind_cluster`` (which skips there) is offered only when no
    other plugin provides one: a pytest-kind user's tests keep that plugin's fixture."""
    config = session.config
    if config.pluginmanager.get_plugin(COMPAT_PLUGIN) is None and not other_kind_cluster_providers(session):
        _register_compat(config)
