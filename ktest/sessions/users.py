"""Issue user credentials for an embedded control plane from another process.

:meth:`ControlPlane.add_user` needs the ControlPlane object, which lives in one
process only (the pytest-xdist controller, or the ``ktest up`` daemon). Every
other process attached to it signs client certificates with the CA files in
the control plane's directory (``certs/ca.crt``, ``certs/ca.key``) and writes
a kubeconfig pointing at the same server as the admin kubeconfig.
"""

from __future__ import annotations

import datetime
import os
import re
import secrets
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ktest.base.kubeconfig import write_kubeconfig
from ktest.cluster import UserIssuer
from ktest.errors import ClusterError

_VALIDITY = datetime.timedelta(days=30)
_CLOCK_SKEW = datetime.timedelta(hours=1)


def user_issuer_for(directory: str | Path) -> UserIssuer:
    """A ``Cluster(user_issuer=...)`` callable for the control plane in ``directory``."""
    return partial(issue_user, Path(directory))


def issue_user(directory: Path, name: str, groups: Sequence[str] = ()) -> Path:
    """Write a kubeconfig for user ``name`` in ``groups`` (client certificate CN=name, O=groups)."""
    if not name:
        raise ClusterError("a user needs a non-empty name")
    ca_cert_path = directory / "certs" / "ca.crt"
    ca_key_path = directory / "certs" / "ca.key"
    try:
        ca_pem = ca_cert_path.read_bytes()
        ca_cert = x509.load_pem_x509_certificate(ca_pem)
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
        admin = yaml.safe_load((directory / "admin.kubeconfig").read_text())
        server = admin["clusters"][0]["cluster"]["server"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        raise ClusterError(
            f"cannot issue credentials for user {name!r}: the control plane's files in {directory} "
            f"are unreadable or gone ({error}); is the control plane still running?"
        ) from None
    if not isinstance(ca_key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        # ktest's own CA is ECDSA; kubeadm's (kind) is RSA.
        raise ClusterError(f"{ca_key_path}: expected an ECDSA or RSA key, found {type(ca_key).__name__}")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, name))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    # Several processes issue users into the same directory: the suffix keeps files apart.
    path = directory / "users" / f"{stem}-{os.getpid()}-{secrets.token_hex(3)}.kubeconfig"
    return write_kubeconfig(
        path,
        server=server,
        ca_pem=ca_pem,
        user=name,
        client_cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        client_key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
