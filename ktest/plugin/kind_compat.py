"""pytest-kind's ``kind_cluster`` fixture and ``KindCluster`` API on ktest's kind cluster.

Registered only when the backend is ``kind`` or pytest-kind is not installed
(see :func:`ktest.plugin.kind_fixtures.register`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ktest.kind.handle import KindHandle


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
