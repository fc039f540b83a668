"""``OperatorProxy``: one operator identity behind a recording, fault-injecting proxy.

The operator's kubeconfig points at the proxy (127.0.0.1, a port of its own). Its TLS is ktest's:
a CA made for this proxy (key kept in memory) signs the serving certificate and a client
certificate only this operator's kubeconfig holds, so nothing else on the machine can use it. The
proxy forwards with the credentials of the operator's identity: authentication, RBAC and admission
stay the real server's.
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ktest.base.certs import CertificateAuthority
from ktest.base.kubeconfig import write_kubeconfig
from ktest.proxy import endpoints
from ktest.proxy.faults import Faults, FaultSet
from ktest.proxy.server import ProxyServer, Upstream
from ktest.proxy.traffic import Traffic

if TYPE_CHECKING:
    from kubernetes.client import Configuration

    from ktest.base.janitor_client import JanitorHandle
    from ktest.cluster import Cluster

DIRECTORY_PREFIX = "ktest-proxy-"


class OperatorProxy:
    """A proxy for ``cluster``'s identity; ``kubeconfig`` and ``cluster`` lead through it."""

    def __init__(self, cluster: Cluster, name: str, http2: bool | None = None) -> None:
        from ktest.proxy.defaults import operator_proxy_http2_default

        self.name = name
        self.http2 = operator_proxy_http2_default() if http2 is None else bool(http2)
        """Whether HTTP/2 (h2) is offered besides HTTP/1.1 (setting ``ktest_operator_proxy_http2``)."""
        self.upstream_cluster = cluster
        self._catalogue: dict[str, str] = {}
        self._catalogue_lock = threading.Lock()
        self.traffic = Traffic(name, resolve_kind=self._plurals_of_kind)
        self.fault_set = FaultSet()
        self.faults = Faults(name, self.fault_set, self.traffic, self.catalogue)
        self._directory: Path | None = None
        self._janitor: JanitorHandle | None = None
        self._server: ProxyServer | None = None
        self._cluster: Cluster | None = None
        self.kubeconfig: Path | None = None

    def start(self) -> OperatorProxy:
        from ktest.base import holders
        from ktest.base.janitor_client import JanitorHandle

        self._directory = holders.held_directory(DIRECTORY_PREFIX)
        user = self.name[:64] or "operator"
        try:
            # The operator's client key and the proxy's serving key must not outlive this process,
            # even after kill -9: the janitor removes the directory if this process dies without close().
            self._janitor = JanitorHandle(self._directory)
            authority = CertificateAuthority(self._directory / "pki", "ktest-operator-proxy", write_key=False)
            serving = authority.serving("proxy", ["localhost"], ["127.0.0.1"], common_name="ktest-proxy")
            client = authority.client("operator", user)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(serving.cert_path, serving.key_path)
            context.load_verify_locations(authority.cert_path)
            context.verify_mode = ssl.CERT_REQUIRED
            context.set_alpn_protocols(["h2", "http/1.1"] if self.http2 else ["http/1.1"])
            upstream = upstream_of(self.upstream_cluster.api_client.configuration)
            self._server = ProxyServer(
                self.name, upstream, context, self.traffic, self.fault_set, http2=self.http2
            )
            port = self._server.start()
            endpoints.register(("127.0.0.1", port), (upstream.host, upstream.port))
            self.kubeconfig = write_kubeconfig(
                self._directory / "kubeconfig",
                server=f"https://127.0.0.1:{port}",
                ca_pem=authority.cert_pem,
                user=user,
                client_cert_pem=client.cert_pem,
                client_key_pem=client.key_pem,
                cluster_name="ktest-proxy",
            )
        except BaseException:
            self.close()
            raise
        return self

    @property
    def port(self) -> int:
        return self._server.port if self._server is not None else 0

    @property
    def cluster(self) -> Cluster:
        """A ``Cluster`` whose requests go through the proxy (what the operator is given)."""
        from ktest.cluster import Cluster

        if self._cluster is None:
            assert self.kubeconfig is not None, "start() the proxy first"
            upstream = self.upstream_cluster
            self._cluster = Cluster(
                self.kubeconfig,
                controllers=upstream.controllers,
                name=f"{upstream.name} via the proxy of {self.name}",
                field_manager=upstream.field_manager,
            )
        return self._cluster

    @property
    def open_connections(self) -> int:
        return self._server.open_connections if self._server is not None else 0

    @property
    def partitioned(self) -> bool:
        """Whether the operator is cut off from the API server (:meth:`partition`)."""
        return self._server is not None and self._server.cut_off

    def partition(self, why: str = "partitioned") -> None:
        """Cut the operator off from the API server, as a network partition would: its open
        connections (watches too) end, new ones are closed at once, nothing is forwarded."""
        if self._server is None:
            raise RuntimeError("start() the proxy first")
        self.traffic.note(f"{why}: cut off from the API server")
        self._server.cut()

    def heal(self) -> None:
        """End :meth:`partition`: the operator's new connections are forwarded again."""
        if self._server is not None and self._server.cut_off:
            self._server.mend()
            self.traffic.note("healed: connected to the API server again")

    def close(self) -> None:
        """Close the operator's connections, stop the proxy, remove its files. Idempotent."""
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()
            self._cluster = None
        if self._server is not None:
            endpoints.unregister(("127.0.0.1", self._server.port))
            self._server.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            janitor.release()

    # ------------------------------------------------------------ resource names

    def catalogue(self, refresh: bool = False) -> Mapping[str, str]:
        """Every name a rule may use for a served resource (plural, plural.group, Kind, kind) -> plural."""
        with self._catalogue_lock:
            if self._catalogue and not refresh:
                return self._catalogue
        discovery = self.upstream_cluster.discovery
        names: dict[str, str] = {}
        for api_version in discovery.all_api_versions():
            group = api_version.rpartition("/")[0]
            for info in discovery.group_version_resources(api_version).values():
                for spelling in (info.plural, info.kind, info.kind.lower()):
                    names.setdefault(spelling, info.plural)
                if group:
                    names.setdefault(f"{info.plural}.{group}", info.plural)
        with self._catalogue_lock:
            self._catalogue = names
        return names

    def _plurals_of_kind(self, kind: str) -> set[str]:
        catalogue = self.catalogue()
        plural = catalogue.get(kind) or catalogue.get(kind.lower())
        if plural is None:
            plural = self.catalogue(refresh=True).get(kind)
        return {plural} if plural else {kind.lower() + "s"}


def upstream_of(configuration: Configuration) -> Upstream:
    """Where and as whom to forward: the API server of ``configuration`` and its credentials."""
    url = urlsplit(str(configuration.host))
    host = url.hostname or "127.0.0.1"
    port = url.port or 443
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    context.set_alpn_protocols(["http/1.1"])
    server_name = getattr(configuration, "tls_server_name", None) or host
    authorization = configuration.get_api_key_with_prefix("authorization") or None
    if authorization is None and configuration.username:
        authorization = configuration.get_basic_auth_token() or None
    return Upstream(host, port, context, server_name, authorization)
