"""Certificates and keys for one control plane: a CA, the API server's serving
certificate, client certificates and the service-account signing key pair.

ECDSA P-256 keys throughout: generating one takes well under a millisecond
(an RSA-2048 key takes tens), and every component accepts them.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ktest.base.procfs import private_directory, write_private_file

__all__ = [
    "CertificateAuthority",
    "KeyPair",
    "private_directory",
    "service_account_key_pair",
    "write_private_file",
]

_VALIDITY = datetime.timedelta(days=365)
_CLOCK_SKEW = datetime.timedelta(hours=1)
_KEY_USAGE_FLAGS = (
    "digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
    "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only",
)


@dataclass(frozen=True)
class KeyPair:
    """PEM-encoded certificate and private key, plus where they were written."""

    cert_pem: bytes
    key_pem: bytes
    cert_path: Path
    key_path: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    validity: datetime.timedelta = _VALIDITY,
) -> x509.CertificateBuilder:
    """What every certificate here has: names, key, a random serial, ``validity`` (a year,
    from an hour ago for clock skew), and the basic constraints and key usage of a CA
    (``ca=True``: may sign certificates) or of a leaf."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_cert_sign=ca, crl_sign=ca), critical=True)
    )


def _key_usage(**allowed: bool) -> x509.KeyUsage:
    """A key usage extension that allows ``allowed`` and nothing else (every flag is required)."""
    flags = dict.fromkeys(_KEY_USAGE_FLAGS, False)
    flags.update(allowed)
    return x509.KeyUsage(**flags)


class CertificateAuthority:
    """A self-signed CA that signs serving and client certificates."""

    def __init__(self, directory: Path, common_name: str = "ktest-ca", *, write_key: bool = True) -> None:
        """``write_key=False`` keeps the CA's key in memory only: nothing but this
        object can sign for it (etcd's CA, whose certificates are all issued at start)."""
        self.directory = directory
        key = _new_key()
        self._key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = key
        subject = _name(common_name)
        self._cert = (
            _builder(subject, subject, key, ca=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.cert_path = directory / "ca.crt"
        private_directory(directory)
        write_private_file(self.cert_path, self.cert_pem)
        if write_key:
            write_private_file(directory / "ca.key", _key_pem(key))

    @classmethod
    def load(cls, directory: Path) -> CertificateAuthority:
        """The CA whose ``ca.crt`` and ``ca.key`` are in ``directory`` (ktest's own, ECDSA, or
        kubeadm's, RSA), to sign for it from another process. Raises OSError or ValueError
        when they are unreadable or not PEM, TypeError for a key neither ECDSA nor RSA."""
        cert_pem = (directory / "ca.crt").read_bytes()
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
            found = type(key).__name__
            raise TypeError(f"{directory / 'ca.key'}: expected an ECDSA or RSA key, found {found}")
        authority = cls.__new__(cls)
        authority.directory = directory
        authority._key = key
        authority._cert = x509.load_pem_x509_certificate(cert_pem)
        authority.cert_pem = cert_pem
        authority.cert_path = directory / "ca.crt"
        return authority

    def _sign(
        self,
        subject: x509.Name,
        usages: list[x509.ObjectIdentifier],
        alternative_names: list[x509.GeneralName] | None = None,
        validity: datetime.timedelta = _VALIDITY,
    ) -> tuple[bytes, bytes]:
        """A new key and its certificate signed by this CA, both PEM."""
        key = _new_key()
        builder = (
            _builder(subject, self._cert.subject, key, ca=False, validity=validity)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if alternative_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    def _issue(
        self,
        stem: str,
        subject: x509.Name,
        usages: list[x509.ObjectIdentifier],
        alternative_names: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        cert_pem, key_pem = self._sign(subject, usages, alternative_names)
        cert_path = self.directory / f"{stem}.crt"
        key_path = self.directory / f"{stem}.key"
        write_private_file(cert_path, cert_pem)
        write_private_file(key_path, key_pem)
        return KeyPair(cert_pem, key_pem, cert_path, key_path)

    def serving(
        self,
        stem: str,
        dns_names: Iterable[str],
        ip_addresses: Iterable[str],
        *,
        common_name: str = "kube-apiserver",
        also_client: bool = False,
    ) -> KeyPair:
        """A TLS server certificate valid for the given names and addresses;
        ``also_client``: usable as a client certificate too (etcd's peer certificate)."""
        names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH]
        if also_client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        return self._issue(stem, _name(common_name), usages, names)

    def client(self, stem: str, user: str, groups: Iterable[str] = ()) -> KeyPair:
        """A client certificate: the API server reads the user from CN, groups from O."""
        return self._issue(stem, _name(user, groups), [ExtendedKeyUsageOID.CLIENT_AUTH])

    def client_pem(
        self, user: str, groups: Iterable[str] = (), validity: datetime.timedelta = _VALIDITY
    ) -> tuple[bytes, bytes]:
        """A client certificate and its key (PEM), written nowhere: the caller embeds them."""
        return self._sign(_name(user, groups), [ExtendedKeyUsageOID.CLIENT_AUTH], validity=validity)


def service_account_key_pair(directory: Path) -> tuple[Path, Path]:
    """Write the key pair that signs and verifies service-account tokens."""
    key = _new_key()
    private_path = directory / "sa.key"
    public_path = directory / "sa.pub"
    write_private_file(private_path, _key_pem(key))
    write_private_file(
        public_path,
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return private_path, public_path
