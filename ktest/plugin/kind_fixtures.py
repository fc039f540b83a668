"""Fixtures of the kind backend: ``kind`` (ktest's handle) and ``kind_cluster`` (pytest-kind's API).

Registered by the main plugin at configure time. ``kind_cluster`` is
registered when the backend is ``kind`` (then it overrides pytest-kind's
fixture of the same name, so a pytest-kind suite runs on ktest's cluster
unchanged) or when pytest-kind is not installed; otherwise pytest-kind's own
fixture is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def compat_cluster_class() -> type:
    """A pytest-kind ``KindCluster`` subclass when pytest-kind is installed (isinstance keeps working)."""
    try:
        from pytest_kind import KindCluster as PytestKindCluster
    except ImportError:
        return object
    return PytestKindCluster


def make_compat(handle: KindHandle) -> Any:
    """An object with pytest-kind's ``KindCluster`` API over ktest's cluster (no downloads)."""
    base = compat_cluster_class()

    class KtestKindCluster(base):  # type: ignore[misc, valid-type]
        """pytest-kind's API on a cluster ktest created; ``create``/``delete`` are ktest's business."""

        def __init__(self) -> None:  # pytest-kind's __init__ makes .pytest-kind/ directories: not wanted
            self.name = handle.name
            self.image = None
            self.kubeconfig_path = handle.kubeconfig
            self.kind_path = handle.kind
            self.kubectl_path: Path | None = None
            self.ktest = handle

        def ensure_kind(self) -> None:
            return None

        def ensure_kubectl(self) -> None:
            if self.kubectl_path is None:
                from ktest.kind.kubectl import find_kubectl

                self.kubectl_path = find_kubectl(handle.version)

        def create(self, config_file: Any = None) -> None:
            return None  # ktest created it (and merged ktest_kind_config)

        def delete(self) -> None:
            return None  # ktest deletes it at the end of the session (unless kept)

        def load_docker_image(self, docker_image: str) -> None:
            handle.load_image(docker_image)

        def kubectl(self, *args: str, **kwargs: Any) -> str:
            return handle.kubectl(*args, input=kwargs.get("input"))

        @contextlib.contextmanager
        def port_forward(
            self,
            service_or_pod_name: str,
            remote_port: int,
            *args: str,
            local_port: int | None = None,
            retries: int = 10,
        ) -> Iterator[int]:
            namespace = None
            rest = list(args)
            for flag in ("-n", "--namespace"):
                if flag in rest:
                    namespace = rest[rest.index(flag) + 1]
            with handle.port_forward(service_or_pod_name, remote_port, namespace=namespace) as port:
                yield port

    return KtestKindCluster()


@pytest.fixture(scope="session")
def kind_cluster(kind: KindHandle) -> Any:
    """pytest-kind's ``kind_cluster`` on ktest's kind cluster (``--ktest-backend kind``)."""
    return make_compat(kind)


def register(config: pytest.Config, backend: str) -> None:
    """Register the fixtures; ``kind_cluster`` only where it cannot take pytest-kind's place by surprise."""
    import sys

    module = sys.modules[__name__]
    pytest_kind_loaded = config.pluginmanager.hasplugin("pytest-kind")
    if backend == "kind" or not pytest_kind_loaded:
        config.pluginmanager.register(module, "ktest-kind-fixtures")
    else:
        config.pluginmanager.register(_KindOnly(), "ktest-kind-fixtures")


class _KindOnly:
    """Only the ``kind`` fixture (pytest-kind keeps its own ``kind_cluster``)."""

    kind = kind
