"""ktest reads etcd itself (the API server's etcd client certificate, etcd's JSON gateway):
what a key holds, every key under a prefix, and a clear error when the API server's command
line does not say where etcd is."""

from __future__ import annotations

import re

import pytest
from crd_backups import Backups

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.crd_versions.etcd_reads import EtcdReader, custom_resource_key
from ktest.crd_versions.evolution import stored_versions
from ktest.errors import ControlPlaneError


def test_the_reader_finds_etcd_on_the_api_servers_command_line(plane: ControlPlane, admin: Cluster) -> None:
    reader = EtcdReader.of(plane)
    assert reader.prefix == "/registry"
    default = reader.get("/namespaces/default")
    assert default is not None and b"default" in default  # built-in kinds are stored as protobuf
    assert reader.get("/namespaces/no-such-namespace") is None
    keys = [key for key, _ in reader.scan("/namespaces/")]
    assert "/namespaces/default" in keys and "/namespaces/kube-system" in keys
    assert all(key.startswith("/namespaces/") for key in keys)


def test_a_command_line_without_etcd_flags_is_explained() -> None:
    with pytest.raises(ControlPlaneError) as missing:
        EtcdReader.from_apiserver_flags(["kube-apiserver", "--etcd-servers=https://127.0.0.1:2379"])
    assert str(missing.value) == (
        "cannot find the API server's etcd: its command line lacks --etcd-cafile, --etcd-certfile, "
        "--etcd-keyfile"
    )
    with pytest.raises(
        ControlPlaneError, match=re.escape("unexpected --etcd-servers 'http://127.0.0.1:2379'")
    ):
        EtcdReader.from_apiserver_flags(
            [
                "--etcd-servers=http://127.0.0.1:2379",
                "--etcd-cafile=a",
                "--etcd-certfile=b",
                "--etcd-keyfile=c",
            ]
        )


def test_custom_resource_keys() -> None:
    assert custom_resource_key("example.com", "backups", "ns", "nightly") == "/example.com/backups/ns/nightly"
    assert (
        custom_resource_key("example.com", "backups", None, "cluster-wide")
        == "/example.com/backups/cluster-wide"
    )
    assert custom_resource_key("example.com", "backups", None) == "/example.com/backups/"


def test_stored_versions_groups_a_crds_objects_by_the_version_etcd_holds(
    admin: Cluster, plane: ControlPlane, backups: Backups
) -> None:
    admin.create(backups.obj("a", retention="7d"))
    admin.create(backups.obj("b", retention="7d"))
    assert stored_versions(admin, backups.crd_name, plane) == {
        "v1alpha1": [f"{backups.namespace}/a", f"{backups.namespace}/b"]
    }
