"""Users issued from another process (ktest.sessions.users) with the CA files of a control plane:
ktest's own ECDSA CA and kubeadm's RSA CA (kind) both sign, through ktest.base.certs."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ktest.base.certs import CertificateAuthority
from ktest.errors import ClusterError
from ktest.sessions.users import issue_user


def _pkcs8(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _rsa_ca(certs: Path) -> None:
    """A CA as kubeadm writes it: RSA, ``ca.crt`` and ``ca.key``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certs.mkdir(parents=True)
    (certs / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (certs / "ca.key").write_bytes(_pkcs8(key))


def _control_plane_files(directory: Path, rsa_ca: bool) -> None:
    if rsa_ca:
        _rsa_ca(directory / "certs")
    else:
        CertificateAuthority(directory / "certs")
    admin = {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}]}
    (directory / "admin.kubeconfig").write_text(yaml.safe_dump(admin))


@pytest.mark.parametrize("rsa_ca", [False, True], ids=["ktest-ecdsa-ca", "kubeadm-rsa-ca"])
def test_a_user_is_signed_by_the_control_planes_ca(tmp_path: Path, rsa_ca: bool) -> None:
    _control_plane_files(tmp_path, rsa_ca)
    config = yaml.safe_load(issue_user(tmp_path, "alice", ["devs", "ops"]).read_text())

    user = config["users"][0]["user"]
    cert = x509.load_pem_x509_certificate(Path(user["client-certificate"]).read_bytes())
    ca = x509.load_pem_x509_certificate((tmp_path / "certs" / "ca.crt").read_bytes())
    ca_key = ca.public_key()
    signature_hash = cert.signature_hash_algorithm
    assert signature_hash is not None
    if isinstance(ca_key, rsa.RSAPublicKey):
        ca_key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), signature_hash)
    else:
        assert isinstance(ca_key, ec.EllipticCurvePublicKey)
        ca_key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(signature_hash))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    groups = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [group.value for group in groups] == ["devs", "ops"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(days=30, hours=1)
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    ca_file = config["clusters"][0]["cluster"].get("certificate-authority")
    assert Path(ca_file).read_bytes() == (tmp_path / "certs" / "ca.crt").read_bytes()


def test_a_ca_key_neither_ecdsa_nor_rsa_is_named_and_missing_files_are_explained(tmp_path: Path) -> None:
    _control_plane_files(tmp_path, rsa_ca=False)
    key = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "certs" / "ca.key").write_bytes(_pkcs8(key))
    with pytest.raises(ClusterError, match=r"ca\.key: expected an ECDSA or RSA key, found Ed25519PrivateKey"):
        issue_user(tmp_path, "bob")
    (tmp_path / "certs" / "ca.key").unlink()
    with pytest.raises(ClusterError, match=r"cannot issue credentials for user 'bob'.*control plane still"):
        issue_user(tmp_path, "bob")
