"""Backend ``existing``: any cluster reachable through a kubeconfig context.

Before any test runs, the server is asked for ``/version``: when that fails,
the error says which context and server, what failed (DNS, refused, timeout,
TLS, credentials) and how to check it by hand.

Safety first: the context must be named explicitly and be the kubeconfig's
current context, so a test run cannot land on a production cluster because
someone's kubeconfig pointed there. ktest never deletes what it did not create
(namespaces it creates carry ``app.kubernetes.io/managed-by=ktest``, and only
those are deleted).
"""

from __future__ import annotations

import dataclasses
import shlex
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import urllib3
import yaml

from ktest.cluster import Cluster
from ktest.cluster.rest import auth_headers
from ktest.config import Settings
from ktest.controlplane.plane import default_base_directory
from ktest.errors import ClusterError, ConfigError
from ktest.sessions.backend import Backend, ClusterShare
from ktest.sessions.private_kubeconfig import PrivateKubeconfig

DEFAULT_PROBE_TIMEOUT = 10.0


class ExistingBackend(Backend):
    """A cluster ktest did not start: nothing is stopped on :meth:`close`."""

    name = "existing"

    def __init__(
        self,
        kubeconfig: Path,
        context: str,
        *,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
        run_dir: Path | None = None,
    ) -> None:
        check_context(kubeconfig, context)
        self.kubeconfig = kubeconfig
        self.context = context
        # The client gets a copy whose credentials are files, so it writes none to $TMPDIR.
        self._private = PrivateKubeconfig(kubeconfig, context, base=run_dir or default_base_directory())
        try:
            super().__init__(Cluster(self._private.path, context=context, controllers=None, name=context))
        except BaseException:
            self._private.close()
            raise
        try:
            check_reachable(self.cluster, kubeconfig, context, timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._private.close()

    def describe(self) -> str:
        cluster = self.cluster
        return f"existing cluster {cluster.server} (context {self.context}, Kubernetes {cluster.version})"

    def share(self) -> ClusterShare:
        return ClusterShare(
            kubeconfig=str(self._private.path),
            version=self.cluster.version,
            description=self.describe(),
            context=self.context,
        )


def check_context(kubeconfig: Path, context: str) -> None:
    """Raise ConfigError unless ``context`` exists in ``kubeconfig`` and is its current context."""
    try:
        config: Any = yaml.safe_load(kubeconfig.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"backend existing: cannot read kubeconfig {kubeconfig}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"backend existing: {kubeconfig} is not a kubeconfig (no mapping at the top)")
    names = [entry.get("name") for entry in config.get("contexts") or () if isinstance(entry, dict)]
    if context not in names:
        raise ConfigError(
            f"backend existing: context {context!r} is not in {kubeconfig} "
            f"(it has: {', '.join(map(str, names)) or 'no contexts'}); name one of those"
        )
    current = config.get("current-context") or ""
    if current != context:
        raise ConfigError(
            f"backend existing: refusing to run: the current context of {kubeconfig} is "
            f"{current or '(unset)'!r}, not {context!r} as named for the tests. Switch to it first "
            f"(kubectl --kubeconfig {kubeconfig} config use-context {context}) or name {current!r} "
            "if that is really the cluster to test against"
        )


def check_reachable(cluster: Cluster, kubeconfig: Path, context: str, timeout: float) -> None:
    """GET ``/version`` once, without retries; raise ClusterError saying what failed and how to check."""
    server = cluster.server
    client = cluster.api_client
    headers = {"Accept": "application/json", **client.default_headers, **auth_headers(client.configuration)}
    try:
        response = client.rest_client.pool_manager.request(
            "GET",
            server.rstrip("/") + "/version",
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
        )
    except urllib3.exceptions.HTTPError as error:
        what = _what_failed(error, server, timeout)
        raise ClusterError(_unreachable(server, kubeconfig, context, what)) from None
    if response.status in (401, 403):
        what = (
            f"the server rejected the credentials of context {context!r} (HTTP {response.status}: "
            f"{'not authenticated' if response.status == 401 else 'forbidden'}): the client "
            "certificate or token is expired, revoked, or belongs to another cluster"
        )
        raise ClusterError(_unreachable(server, kubeconfig, context, what))
    if response.status >= 400:
        what = f"GET /version answered HTTP {response.status}: {response.data[:200]!r}"
        raise ClusterError(_unreachable(server, kubeconfig, context, what))


def _what_failed(error: urllib3.exceptions.HTTPError, server: str, timeout: float) -> str:
    url = urlparse(server)
    host, port = url.hostname or server, url.port or (443 if url.scheme == "https" else 80)
    causes = _causes(error)
    if isinstance(error, urllib3.exceptions.NameResolutionError) or any(
        isinstance(cause, socket.gaierror) for cause in causes
    ):
        return (
            f"DNS: the host name {host!r} does not resolve "
            "(is it spelled right, are you on the right network or VPN?)"
        )
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return (
            f"connection refused: nothing listens on {host}:{port} "
            "(is the cluster running, is the port right?)"
        )
    if isinstance(error, urllib3.exceptions.ConnectTimeoutError):
        return (
            f"timeout: no connection to {host}:{port} within {timeout:g} s "
            "(a firewall, a missing VPN, or the host is down)"
        )
    if isinstance(error, urllib3.exceptions.ReadTimeoutError) or any(
        isinstance(cause, (TimeoutError, socket.timeout)) for cause in causes
    ):
        return f"timeout: {host}:{port} accepted the connection but did not answer within {timeout:g} s"
    if any(isinstance(cause, (urllib3.exceptions.SSLError, ssl.SSLError)) for cause in causes):
        detail = str(error)
        if "CERTIFICATE_VERIFY_FAILED" in detail and "ostname" in detail:
            return f"TLS: the server's certificate is not valid for the host name {host!r} ({detail})"
        if "CERTIFICATE_VERIFY_FAILED" in detail:
            return (
                "TLS: the server's certificate is not signed by the certificate authority in the kubeconfig "
                f"(certificate-authority/-data of the context's cluster): {detail}"
            )
        return f"TLS handshake failed: {detail}"
    return f"{type(error).__name__}: {error}"


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(found) < 10:
        found.append(current)
        reason = getattr(current, "reason", None)
        current = reason if isinstance(reason, BaseException) else current.__cause__ or current.__context__
    return found


def _unreachable(server: str, kubeconfig: Path, context: str, what: str) -> str:
    check = (
        f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))} --context {shlex.quote(context)} "
        "get --raw /version"
    )
    return (
        f"backend existing: cannot use the API server {server} of context {context!r} in {kubeconfig}: "
        f"{what}.\nCheck by hand with: {check}"
    )


def open_existing(settings: Settings, notes: list[str]) -> Backend:
    """The existing backend: the cluster of the named context (checked by :func:`check_settings`)."""
    assert settings.kubeconfig is not None and settings.context is not None
    return ExistingBackend(settings.kubeconfig, settings.context, run_dir=settings.run_dir)


def check_settings(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Backend existing needs the context named explicitly (a run must not land on another
    cluster by accident) and a kubeconfig that exists (default: ``$KUBECONFIG``, ~/.kube/config)."""
    from ktest.config import SPECS_BY_NAME, default_kubeconfig

    if not settings.context:
        spec = SPECS_BY_NAME["context"]
        raise ConfigError(
            "backend existing needs the kubeconfig context named explicitly, so that a test run "
            f"cannot land on another cluster by accident: set {spec.option}, ini {spec.ini} or "
            f"{spec.env} to the context to test against"
        )
    kubeconfig = settings.kubeconfig or default_kubeconfig(env)
    if not kubeconfig.is_file():
        spec = SPECS_BY_NAME["kubeconfig"]
        raise ConfigError(
            f"backend existing: kubeconfig {kubeconfig} ({settings.source_of('kubeconfig')}) does not "
            f"exist; point {spec.option}, ini {spec.ini} or {spec.env} at one"
        )
    return dataclasses.replace(settings, kubeconfig=kubeconfig)


def preflight(settings: Settings) -> None:
    """The named context must be the kubeconfig's current one (see :func:`check_context`)."""
    if settings.kubeconfig is not None and settings.context:
        check_context(settings.kubeconfig, settings.context)
