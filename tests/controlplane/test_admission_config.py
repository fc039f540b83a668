"""The API server's client certificate for admission webhooks: what the
control plane writes, the flag it passes, and that the user's own admission
configuration replaces it."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ktest.controlplane import ControlPlane
from ktest.controlplane.admission import (
    ADMISSION_CONFIG_FLAG,
    WEBHOOK_CLIENT_USER,
    WEBHOOK_PLUGINS,
    webhook_client_ca,
    write_webhook_client,
)

if TYPE_CHECKING:
    from startup_planes import Seen

pytest_plugins = ("startup_planes",)  # its planes, one for every module using them
USER_FLAGS_PLANE = pytest.mark.xdist_group("startup-user-flags-plane")  # one worker starts it


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_the_admission_configuration_names_a_client_certificate_for_every_webhook(tmp_path: Path) -> None:
    files = write_webhook_client(tmp_path)
    config = yaml.safe_load(files.admission_config.read_text())
    assert (config["apiVersion"], config["kind"]) == ("apiserver.config.k8s.io/v1", "AdmissionConfiguration")
    assert [plugin["name"] for plugin in config["plugins"]] == list(WEBHOOK_PLUGINS)
    kubeconfigs = set()
    for plugin in config["plugins"]:
        configuration = plugin["configuration"]
        assert configuration["kind"] == "WebhookAdmissionConfiguration"
        kubeconfigs.add(configuration["kubeConfigFile"])
    (kubeconfig,) = kubeconfigs
    users = yaml.safe_load(Path(kubeconfig).read_text())["users"]
    assert [user["name"] for user in users] == ["*"]  # every webhook host:port
    certificate = x509.load_pem_x509_certificate(Path(users[0]["user"]["client-certificate"]).read_bytes())
    authority = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    certificate.verify_directly_issued_by(authority)
    assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == WEBHOOK_CLIENT_USER
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]

    written = [path for path in files.ca_cert.parent.rglob("*")]
    assert not [
        path for path in written if path.name.endswith(".key") and "ca" in path.stem
    ]  # CA key: memory only
    modes = {path.name: stat.S_IMODE(os.stat(path).st_mode) for path in written}
    assert set(modes.values()) == {0o600}, modes
    assert webhook_client_ca(tmp_path) == files.ca_cert
    assert webhook_client_ca(tmp_path / "elsewhere") is None and webhook_client_ca(None) is None


def test_the_api_server_is_given_it(plane: ControlPlane) -> None:
    assert plane.webhook_client_ca is not None and plane.webhook_client_ca.is_file()
    pid = plane.processes()["kube-apiserver"].pid
    assert pid is not None
    arguments = command_line(pid)
    flag = f"--{ADMISSION_CONFIG_FLAG}="
    (given,) = [argument for argument in arguments if argument.startswith(flag)]
    assert Path(given.removeprefix(flag)).is_relative_to(plane.directory)


@dataclasses.dataclass
class Replaced:
    """How the shared ``user_flags_plane`` (startup_planes.py) ran with the user's admission configuration."""

    command: list[str]
    webhook_client_ca: Path | None
    webhook_client_written: bool


def _replaced(plane: ControlPlane) -> Replaced:
    pid = plane.processes()["kube-apiserver"].pid
    assert pid is not None
    written = (plane.directory / "certs" / "webhook-client").exists()
    return Replaced(command_line(pid), plane.webhook_client_ca, written)


SEEN_ON_USER_FLAGS_PLANE = (_replaced,)


@USER_FLAGS_PLANE
@pytest.mark.slow
def test_the_users_admission_configuration_replaces_it(user_flags_plane: Seen) -> None:
    own = user_flags_plane.flags[ADMISSION_CONFIG_FLAG]  # an AdmissionConfiguration without plugins
    replaced: Replaced = user_flags_plane.result(_replaced)
    assert f"--{ADMISSION_CONFIG_FLAG}={own}" in replaced.command
    assert replaced.webhook_client_ca is None
    assert not replaced.webhook_client_written


def test_a_process_attached_to_the_plane_knows_the_ca_too(plane: ControlPlane) -> None:
    """xdist workers and `ktest up` sessions attach to a plane another process runs: their
    webhook sets must require the same certificate."""
    from ktest.backends.bare.backend import share_of
    from ktest.sessions.attached import AttachedBackend

    attached = AttachedBackend(share_of(plane, "the session's plane"))
    try:
        assert attached.cluster.webhook_client_ca == plane.webhook_client_ca is not None
        assert attached.cluster.user("someone").webhook_client_ca == plane.webhook_client_ca
    finally:
        attached.close()
