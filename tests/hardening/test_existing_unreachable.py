"""Backend ``existing`` on a server it cannot use says which context and
server, what failed, and how to check by hand. Real servers throughout: a real
control plane for TLS and credentials, real sockets for refused and silent ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.backends.existing.backend import ExistingBackend
from ktest.base.certs import CertificateAuthority
from ktest.base.kubeconfig import write_kubeconfig
from ktest.controlplane import ControlPlane
from ktest.errors import ClusterError

CONTEXT = "tester@ktest"


def _kubeconfig(path: Path, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> Path:
    return write_kubeconfig(
        path, server=server, ca_pem=ca_pem, user="tester", client_cert_pem=cert_pem, client_key_pem=key_pem
    )


def _admin(plane: ControlPlane) -> tuple[bytes, bytes, bytes]:
    certs = plane.directory / "certs"
    ca, cert, key = (certs / name for name in ("ca.crt", "admin.crt", "admin.key"))
    return ca.read_bytes(), cert.read_bytes(), key.read_bytes()


def _refusal(kubeconfig: Path, timeout: float = 5.0) -> str:
    with pytest.raises(ClusterError) as caught:
        ExistingBackend(kubeconfig, CONTEXT, timeout=timeout)
    message = str(caught.value)
    assert f"context {CONTEXT!r}" in message and str(kubeconfig) in message
    assert f"kubectl --kubeconfig {kubeconfig} --context {CONTEXT} get --raw /version" in message
    error = caught.value
    assert error.__context__ is None or error.__suppress_context__, "a raw urllib3 traceback would be chained"
    return message


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that completes TCP handshakes (backlog) but never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


def test_a_reachable_server_with_good_credentials_works(plane: ControlPlane, tmp_path: Path) -> None:
    """Positive control for the cases below: same helper, right settings."""
    kubeconfig = _kubeconfig(tmp_path / "k", plane.server, *_admin(plane))
    with ExistingBackend(kubeconfig, CONTEXT, timeout=5) as backend:
        assert backend.cluster.version == plane.version


def test_connection_refused(plane: ControlPlane, tmp_path: Path, closed_port: int) -> None:
    server = f"https://127.0.0.1:{closed_port}"
    message = _refusal(_kubeconfig(tmp_path / "k", server, *_admin(plane)))
    assert f"API server {server}" in message
    assert f"connection refused: nothing listens on 127.0.0.1:{closed_port}" in message


def test_host_name_that_does_not_resolve(plane: ControlPlane, tmp_path: Path) -> None:
    server = "https://ktest-no-such-host.invalid:6443"
    message = _refusal(_kubeconfig(tmp_path / "k", server, *_admin(plane)))
    assert "DNS: the host name 'ktest-no-such-host.invalid' does not resolve" in message


def test_server_certificate_from_another_ca(plane: ControlPlane, tmp_path: Path) -> None:
    _ca, cert, key = _admin(plane)
    wrong_ca = CertificateAuthority(tmp_path / "other-ca").cert_pem
    message = _refusal(_kubeconfig(tmp_path / "k", plane.server, wrong_ca, cert, key))
    assert "TLS: the server's certificate is not signed by the certificate authority" in message


def test_client_certificate_the_server_does_not_trust(plane: ControlPlane, tmp_path: Path) -> None:
    ca, _cert, _key = _admin(plane)
    stranger = CertificateAuthority(tmp_path / "stranger-ca").client("tester", "tester", ["system:masters"])
    message = _refusal(_kubeconfig(tmp_path / "k", plane.server, ca, stranger.cert_pem, stranger.key_pem))
    assert "the server rejected the credentials" in message and "HTTP 401" in message


def test_server_that_never_answers(plane: ControlPlane, tmp_path: Path, silent_port: int) -> None:
    message = _refusal(
        _kubeconfig(tmp_path / "k", f"https://127.0.0.1:{silent_port}", *_admin(plane)), timeout=0.5
    )
    assert "timeout:" in message and f"127.0.0.1:{silent_port}" in message
