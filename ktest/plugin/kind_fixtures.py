"""Fixtures of the kind backend: ``kind`` (ktest's handle), health check and report helpers.

Registered by the main plugin at configure time, with
:mod:`ktest.plugin.kind_compat` (pytest-kind's ``kind_cluster``) when the
backend is ``kind`` (it then overrides pytest-kind's fixture of the same name,
so a pytest-kind suite runs on ktest's cluster unchanged) or when pytest-kind
is not installed; otherwise pytest-kind's own fixture is left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ktest.backends.base import Backend
    from ktest.kind.handle import KindHandle


def handle_of(backend: Backend) -> KindHandle | None:
    """The kind handle of the session's backend (owned, kept or shared by the xdist controller)."""
    handle = getattr(backend, "handle", None)
    if handle is not None:
        return handle
    from ktest.backends.kind import handle_from_share

    return handle_from_share(backend.share(), backend.cluster)


def watch_nodes(backend: Backend) -> None:
    """On a kind cluster, fail the test with "the kind cluster stopped" rather than connection errors."""
    name = backend.share().kind_cluster
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


def logs_section(directory: Path | None) -> tuple[str, str] | None:
    """The failure-report line saying where the kind cluster's logs will be."""
    if directory is None:
        return None
    return ("kind cluster logs", f"exported at the end of the session (kind export logs) to {directory}")


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


def register(config: pytest.Config) -> None:
    """Register the fixtures; ``kind_cluster`` only where it cannot take pytest-kind's place by
    surprise (the kind backend adds it anyway: :func:`register_for_backend`)."""
    import sys

    config.pluginmanager.register(sys.modules[__name__], "ktest-kind-fixtures")
    if not config.pluginmanager.hasplugin("pytest-kind"):
        register_for_backend(config)


def register_for_backend(config: pytest.Config) -> None:
    """The kind backend's fixtures: pytest-kind's ``kind_cluster``, served by ktest's cluster."""
    from ktest.plugin import kind_compat

    if not config.pluginmanager.is_registered(kind_compat):
        config.pluginmanager.register(kind_compat, "ktest-kind-compat")
