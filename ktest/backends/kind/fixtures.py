"""Fixtures of the kind backend: ``kind`` (ktest's handle), pytest-kind's ``kind_cluster``, health check.

The registry's ``fixtures`` part (:func:`register`) runs for every session: ``kind``
exists on every backend (and skips off kind); :mod:`.pytest_kind_compat`
(pytest-kind's ``kind_cluster``) is added when the backend is ``kind`` (it then
overrides pytest-kind's fixture of the same name, so a pytest-kind suite runs on
ktest's cluster unchanged) or when pytest-kind is not installed; otherwise
pytest-kind's own fixture is left alone. ``health`` is :func:`watch_nodes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ktest.kind.handle import KindHandle
    from ktest.sessions.backend import Backend


def handle_of(backend: Backend) -> KindHandle | None:
    """The kind handle of the session's backend (owned, kept or shared by the xdist controller);
    None on another backend."""
    from ktest.backends.kind.backend import AttachedKindBackend, KindBackend

    return backend.handle if isinstance(backend, KindBackend | AttachedKindBackend) else None


def watch_nodes(backend: Backend) -> None:
    """The registry's ``health``: fail the test with "the kind cluster stopped" rather than
    connection errors."""
    from ktest.backends.kind.backend import cluster_name_of

    name = cluster_name_of(backend)
    if not name:
        return
    from ktest.context import add_health_check
    from ktest.errors import KindError
    from ktest.kind.cluster import cluster_stopped
    from ktest.kind.engine import connect

    client = connect(check_runtime=False)  # one connection for the session, whatever tests do to DOCKER_HOST

    def check() -> None:
        problem = cluster_stopped(name, client)
        if problem:
            raise KindError(f"{problem}: the tests cannot reach their cluster any more")

    add_health_check(check)


@pytest.fixture(scope="session")
def kind(ktest_backend: Backend) -> KindHandle:
    """The session's kind cluster: ``load_image``, ``kubectl``, ``port_forward``, ``deploy_operator``."""
    handle = handle_of(ktest_backend)
    if handle is None:
        pytest.skip(
            "this test needs real nodes (the kind fixture): run it with --ktest-backend kind; "
            f"this session uses {ktest_backend.describe()}"
        )
    return handle


def register(config: pytest.Config, selected: bool) -> None:
    """The registry's ``fixtures``: ``kind`` always; ``kind_cluster`` when the session's backend
    is kind (``selected``) or where it cannot take pytest-kind's place by surprise."""
    import sys

    config.pluginmanager.register(sys.modules[__name__], "ktest-kind-fixtures")
    if selected or not config.pluginmanager.hasplugin("pytest-kind"):
        from ktest.backends.kind import pytest_kind_compat

        config.pluginmanager.register(pytest_kind_compat, "ktest-kind-compat")
