"""The certificates one control plane runs on and the kubeconfigs it writes.

Under the plane's directory (layout: ``ControlPlane.directory``); created once per start, kept by
a restart, whose new port the kubeconfigs are rewritten for. A full disk while writing them is a
ControlPlaneError saying where (:func:`writing_in`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ktest.base.certs import CertificateAuthority, KeyPair, service_account_key_pair
from ktest.base.kubeconfig import write_kubeconfig
from ktest.controlplane.admission import write_webhook_client
from ktest.controlplane.apiserver import SERVING_DNS_NAMES, SERVING_IPS, ApiServerClient, ApiServerFiles
from ktest.controlplane.etcd import EtcdCredentials
from ktest.controlplane.run_directory import writing_in

ADMIN_USER = "ktest-admin"
ADMIN_GROUPS = ("system:masters",)


@dataclass
class _User:
    name: str
    groups: tuple[str, ...]
    pair: KeyPair
    kubeconfig: Path


@dataclass(frozen=True)
class _ClusterCertificates:
    ca: CertificateAuthority
    admin: KeyPair
    files: ApiServerFiles


class PlaneCertificates:
    """The CA, serving and client certificates of the control plane in ``directory``, and the
    kubeconfigs of the admin and of each user :meth:`add_user` made."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._etcd: EtcdCredentials | None = None
        self._cluster: _ClusterCertificates | None = None
        self._users: list[_User] = []

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    def etcd(self) -> EtcdCredentials:
        """etcd's CA and certificates (created on first use)."""
        if self._etcd is None:
            with writing_in(self.directory):
                self._etcd = EtcdCredentials.create(self.directory / "certs" / "etcd")
        return self._etcd

    def apiserver_files(
        self, *, audit: tuple[Path, Path] | None = None, admission_config: bool = True
    ) -> ApiServerFiles:
        """The files kube-apiserver is pointed at, certificates created on first use:
        ``audit`` is (policy, log); ``admission_config=False`` when the user brings their own
        ``--admission-control-config-file`` (then no webhook client certificate)."""
        with writing_in(self.directory):
            return self._certificates(audit, admission_config).files

    def admin_client(self, port: int) -> ApiServerClient:
        """An HTTPS client of the API server on ``port`` with the admin's certificate."""
        cluster = self._require()
        return ApiServerClient(port, cluster.ca.cert_path, cluster.admin.cert_path, cluster.admin.key_path)

    def write_admin_kubeconfig(self, path: Path, server: str) -> Path:
        """A kubeconfig for the admin identity at ``path``, pointing at ``server``."""
        with writing_in(self.directory):
            return self._write_kubeconfig(path, server, ADMIN_USER, self._require().admin)

    def write_kubeconfigs(self, server: str) -> None:
        """(Re)write the admin's kubeconfig and every user's for ``server``."""
        with writing_in(self.directory):
            self._write_kubeconfig(self.admin_kubeconfig, server, ADMIN_USER, self._require().admin)
            for user in self._users:
                self._write_kubeconfig(user.kubeconfig, server, user.name, user.pair)

    def add_user(self, name: str, groups: tuple[str, ...], server: str) -> Path:
        """A client certificate (CN=name, O=groups) and its kubeconfig, under
        ``users/<name>.kubeconfig`` (a suffix makes the file name unique)."""
        cluster = self._require()
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
        taken = {user.kubeconfig.stem for user in self._users}
        unique, counter = stem, 1
        while unique in taken:
            counter += 1
            unique = f"{stem}-{counter}"
        pair = cluster.ca.client(f"user-{unique}", name, groups)
        user = _User(name, groups, pair, self.directory / "users" / f"{unique}.kubeconfig")
        self._write_kubeconfig(user.kubeconfig, server, name, pair)
        self._users.append(user)
        return user.kubeconfig

    def _write_kubeconfig(self, path: Path, server: str, user: str, pair: KeyPair) -> Path:
        return write_kubeconfig(
            path,
            server=server,
            ca_pem=self._require().ca.cert_pem,
            user=user,
            client_cert_pem=pair.cert_pem,
            client_key_pem=pair.key_pem,
        )

    def _certificates(self, audit: tuple[Path, Path] | None, admission_config: bool) -> _ClusterCertificates:
        if self._cluster is not None:
            return self._cluster
        certs = self.directory / "certs"
        ca = CertificateAuthority(certs)
        serving = ca.serving("apiserver", SERVING_DNS_NAMES, SERVING_IPS)
        admin = ca.client("admin", ADMIN_USER, ADMIN_GROUPS)
        sa_key, sa_public = service_account_key_pair(certs)
        admission = write_webhook_client(self.directory).admission_config if admission_config else None
        files = ApiServerFiles(
            ca_cert=ca.cert_path,
            serving_cert=serving.cert_path,
            serving_key=serving.key_path,
            service_account_key=sa_key,
            service_account_public_key=sa_public,
            cert_dir=certs,
            etcd=self.etcd(),
            audit_policy=audit[0] if audit else None,
            audit_log=audit[1] if audit else None,
            admission_config=admission,
        )
        self._cluster = _ClusterCertificates(ca, admin, files)
        return self._cluster

    def _require(self) -> _ClusterCertificates:
        if self._cluster is None:
            raise RuntimeError("the control plane's certificates are not made yet (apiserver_files first)")
        return self._cluster

