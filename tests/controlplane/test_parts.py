"""The pieces the control plane is built from, checked on their own."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from ktest.assets.bundle import Assets
from ktest.base.certs import CertificateAuthority
from ktest.base.kubeconfig import write_kubeconfig
from ktest.base.ports import free_ports, is_address_in_use, is_free
from ktest.controlplane import flags
from ktest.controlplane.controller_manager import requested_controllers, resolve_controllers
from ktest.errors import ControlPlaneError


def test_merge_flags_user_value_replaces_default() -> None:
    merged = flags.merge_flags(
        {"authorization-mode": "RBAC", "allow-privileged": "true"},
        ["--authorization-mode=AlwaysAllow", "--v=4", "--some-bool"],
    )
    assert merged == [
        "--authorization-mode=AlwaysAllow",
        "--allow-privileged=true",
        "--v=4",
        "--some-bool",
    ]


def test_merge_flags_mapping_and_bad_shapes() -> None:
    assert flags.merge_flags({"a": "1"}, {"--a": "2", "b": None}) == ["--a=2", "--b"]
    with pytest.raises(ControlPlaneError, match="does not start with '--'"):
        flags.merge_flags({}, ["v=4"])
    with pytest.raises(ControlPlaneError, match="not a single string"):
        flags.merge_flags({}, "--v=4")  # type: ignore[arg-type]


def test_help_parsing_finds_flags_and_controllers() -> None:
    text = (
        "Flags:\n"
        "      --controllers strings   A list of controllers to enable.\n"
        "                All controllers: cronjob-controller, garbage-collector-controller,\n"
        "                namespace-controller\n"
        "                Disabled-by-default controllers: bootstrap-signer-controller\n"
        "  -h, --help   help\n"
        "  --unsafe-no-fsync 'false'\n"
    )
    parsed = flags._parse(text)
    assert {"controllers", "help", "unsafe-no-fsync"} <= parsed.flags
    assert parsed.controllers == (
        "cronjob-controller",
        "garbage-collector-controller",
        "namespace-controller",
    )


def test_probe_is_cached_per_binary(assets: Assets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(flags, "_memo", {})
    etcd = assets.binary("etcd")
    first = flags.probe(etcd)
    assert first.accepts("--data-dir")
    assert list((tmp_path / "ktest" / "flags").glob("etcd-*.json"))
    monkeypatch.setattr(flags, "_memo", {})

    def no_more_probes(binary: Path) -> flags.BinaryFlags:
        raise AssertionError("the disk cache should have answered")

    monkeypatch.setattr(flags, "_run_help", no_more_probes)
    assert flags.probe(etcd) == first


def test_controller_names_accept_short_aliases() -> None:
    known = flags.BinaryFlags(
        frozenset(), ("garbage-collector-controller", "namespace-controller", "job-controller")
    )
    resolved = resolve_controllers(("garbagecollector", "namespace-controller"), known, Path("kcm"))
    assert resolved == {
        "garbagecollector": "garbage-collector-controller",
        "namespace-controller": "namespace-controller",
    }
    with pytest.raises(ControlPlaneError, match=r"(?s)'gc'.*job-controller"):
        resolve_controllers(("gc",), known, Path("kcm"))


def test_requested_controllers_shapes() -> None:
    assert requested_controllers("none") == ()
    assert requested_controllers(()) == ()
    assert requested_controllers(None) == ()
    assert requested_controllers("garbagecollector, namespace") == ("garbagecollector", "namespace")
    assert requested_controllers(["namespace", "namespace"]) == ("namespace",)


def test_free_ports_are_distinct_free_and_keep_preferences() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5 and all(is_free(port) for port in ports)
    again = free_ports(2, prefer=(ports[0], 0))
    assert again[0] == ports[0]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports[1]))
        holder.listen()
        assert not is_free(ports[1])
        assert free_ports(1, prefer=(ports[1],))[0] != ports[1]


def test_address_in_use_is_recognised() -> None:
    assert is_address_in_use('listen tcp 127.0.0.1:2379: bind: address already in use')
    assert not is_address_in_use("unknown flag: --foo")


def test_certificates_name_the_right_identities(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    serving = ca.serving("api", ["localhost"], ["127.0.0.1", "10.0.0.1"])
    cert = x509.load_pem_x509_certificate(serving.cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.0.0.1"),
    ]
    client = x509.load_pem_x509_certificate(ca.client("u", "alice", ["g1", "g2"]).cert_pem)
    subject = client.subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["alice"]
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "g1",
        "g2",
    ]
    client.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    assert (tmp_path / "u.key").stat().st_mode & 0o077 == 0


def test_kubeconfig_refers_to_private_credential_files(tmp_path: Path) -> None:
    """No embedded *-data: the kubernetes client would copy it to $TMPDIR."""
    path = write_kubeconfig(
        tmp_path / "k",
        server="https://127.0.0.1:1",
        ca_pem=b"CA",
        user="bob",
        client_cert_pem=b"CERT",
        client_key_pem=b"KEY",
    )
    text = path.read_text()
    assert "-data" not in text
    config = yaml.safe_load(text)
    assert config["current-context"] == "bob@ktest"
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1"
    user = config["users"][0]["user"]
    key = Path(user["client-key"])
    assert key.is_absolute() and key.read_bytes() == b"KEY"
    assert Path(user["client-certificate"]).read_bytes() == b"CERT"
    assert Path(config["clusters"][0]["cluster"]["certificate-authority"]).read_bytes() == b"CA"
    assert key.stat().st_mode & 0o077 == 0
    assert key.parent.stat().st_mode & 0o077 == 0
    assert path.stat().st_mode & 0o077 == 0
