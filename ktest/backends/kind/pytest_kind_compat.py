"""pytest-kind's ``kind_cluster`` fixture and ``KindCluster`` API on ktest's kind cluster.

Registered when the backend is ``kind``, and on other backends only when no other
plugin provides ``kind_cluster`` (see :mod:`ktest.backends.kind.fixtures`).

pytest-kind (and its fork pytest-kind-ng) is GPL-3.0-or-later and ktest is
Apache-2.0, so nothing here imports, subclasses or copies pytest-kind, and ktest's
``kind`` extra does not depend on it: :class:`KindClusterCompat` offers the same
attributes and methods (duck typing), with pytest-kind's documented behaviour:
``api`` is a pykube ``HTTPClient`` (pykube-ng, Apache-2.0, comes with ktest's
``kind`` extra), ``kubectl()`` returns stdout as text and raises
:class:`subprocess.CalledProcessError`, ``port_forward`` honours
``local_port=``, ``retries=`` and any extra kubectl arguments.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import warnings
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ktest.backends.kind.kubectl import PORT_FORWARD_TIMEOUT, forwarded_port, stop_forwarding
from ktest.base.process import popen_bound

if TYPE_CHECKING:
    from ktest.backends.kind.handle import KindHandle


class LatestImageWarning(UserWarning):
    """An untagged/``:latest`` image was loaded: Pods need ``imagePullPolicy: IfNotPresent`` or ``Never``."""


class KindClusterCompat:
    """pytest-kind's ``KindCluster`` API on ktest's cluster (``create``/``delete`` are ktest's business)."""

    def __init__(self, handle: KindHandle) -> None:
        self.name = handle.name
        self.image: str | None = None
        self.kubeconfig_path = handle.kubeconfig
        self.kind_path = handle.kind
        self.kubectl_path: Path | None = None
        self.ktest = handle

    def __repr__(self) -> str:
        return f"KindClusterCompat({self.name!r}, kubeconfig_path={str(self.kubeconfig_path)!r})"

    @cached_property
    def api(self) -> Any:
        """A pykube ``HTTPClient`` for the cluster, as pytest-kind's ``kind_cluster.api``."""
        try:
            import pykube
        except ImportError:
            raise ImportError(
                "kind_cluster.api is a pykube client (as in pytest-kind), and pykube is not installed; "
                "pip install 'ktest[kind]' (it brings pykube-ng), or use ktest's `cluster` fixture instead"
            ) from None
        return pykube.HTTPClient(pykube.KubeConfig.from_file(str(self.kubeconfig_path)))

    def ensure_kind(self) -> None:
        return None

    def ensure_kubectl(self) -> None:
        if self.kubectl_path is None:
            from ktest.backends.kind.kubectl import find_kubectl

            self.kubectl_path = find_kubectl(self.ktest.version)

    def create(self, config_file: Any = None) -> None:
        return None  # ktest created it (and merged ktest_kind_config)

    def delete(self) -> None:
        return None  # ktest deletes it at the end of the session (unless kept)

    def load_docker_image(self, docker_image: str) -> None:
        """Load a local Docker image into the nodes; untagged/``:latest`` is loaded with a warning."""
        from ktest.backends.kind.load import is_latest

        if is_latest(docker_image):
            warnings.warn(
                LatestImageWarning(
                    f"loaded {docker_image!r}, an untagged/':latest' image: Kubernetes pulls such images "
                    "by default (imagePullPolicy Always), which fails in a kind node; give its containers "
                    "imagePullPolicy: IfNotPresent (or Never), or tag the image with a version"
                ),
                stacklevel=2,
            )
        self.ktest.load_image(docker_image, allow_latest=True)

    def _environment(self, extra: Any) -> dict[str, str]:
        return {**os.environ, **(extra or {}), "KUBECONFIG": str(self.kubeconfig_path)}

    def kubectl(self, *args: str, **kwargs: Any) -> str:
        """Run kubectl against the cluster and return its output; keyword arguments go to
        :func:`subprocess.check_output` (``input=``, ``timeout=``, ``cwd=``, ``stderr=``...),
        a failure raises :class:`subprocess.CalledProcessError`."""
        self.ensure_kubectl()
        kwargs["env"] = self._environment(kwargs.get("env"))
        kwargs.setdefault("encoding", "utf-8")
        if "input" not in kwargs:
            kwargs.setdefault("stdin", subprocess.DEVNULL)
        return str(subprocess.check_output([str(self.kubectl_path), *args], **kwargs))

    @contextlib.contextmanager
    def port_forward(
        self,
        service_or_pod_name: str,
        remote_port: int,
        *args: str,
        local_port: int | None = None,
        retries: int = 10,
    ) -> Iterator[int]:
        """``kubectl port-forward`` to ``remote_port``; yields the local port (``local_port``, else a free
        one) once kubectl forwards. Extra ``args`` go to kubectl (``"-n", "ns"``, ``--address``...);
        a forwarder that exits before forwarding (a Pod not running yet) is started again, up to
        ``retries`` attempts."""
        self.ensure_kubectl()
        if retries < 1:
            raise ValueError(f"port_forward(retries={retries}): give at least 1 attempt")
        command = [
            str(self.kubectl_path),
            "port-forward",
            service_or_pod_name,
            f"{local_port or ''}:{remote_port}",
            *args,
        ]
        if not any(arg == "--address" or arg.startswith("--address=") for arg in args):
            command[2:2] = ["--address", "127.0.0.1"]
        failures: list[str] = []
        for attempt in range(retries):
            process = popen_bound(  # killed with this process, even by kill -9
                command,
                env=self._environment(None),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                port, output = forwarded_port(process, PORT_FORWARD_TIMEOUT, "kind_cluster")
                if port is not None:
                    yield port
                    return
                failures.append(f"attempt {attempt + 1}: {output}")
            finally:
                stop_forwarding(process)
            if attempt + 1 < retries:
                # kubectl gave up (Pod not Running yet, port taken): the next attempt waits a second
                # for the cluster to move on, as pytest-kind does between its attempts.
                threading.Event().wait(1.0)
        raise subprocess.CalledProcessError(
            1,
            command,
            output=f"kubectl port-forward to {service_or_pod_name}:{remote_port} failed "
            f"{retries} time(s):\n" + "\n".join(failures[-3:]),
        )


@pytest.fixture(scope="session")
def kind_cluster(kind: KindHandle) -> KindClusterCompat:
    """pytest-kind's ``kind_cluster`` on ktest's kind cluster (``--ktest-backend kind``)."""
    return KindClusterCompat(kind)
