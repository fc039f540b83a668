"""The user's extra kind config: validated (file, line, key) and merged with what the node image needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktest.backends.kind.node_choice import load_extra_config, merge_config
from ktest.backends.kind.records import check_cluster_name
from ktest.errors import KindError

REQUIRED = {
    "kind": "Cluster",
    "apiVersion": "kind.x-k8s.io/v1alpha4",
    "networking": {"disableDefaultCNI": True, "podSubnet": "10.244.0.0/16"},
    "nodes": [{"role": "control-plane"}],
    "kubeadmConfigPatches": ["kind: KubeletConfiguration\nfailCgroupV1: false\n"],
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kind.yaml"
    path.write_text(text)
    return path


def test_a_valid_extra_config_is_merged(tmp_path: Path) -> None:
    extra = load_extra_config(
        _write(
            tmp_path,
            """
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes: [{role: control-plane}, {role: worker}]
networking: {serviceSubnet: 10.97.0.0/16}
featureGates: {SomeGate: true}
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  apiServer: {extraArgs: {v: "2"}}
""",
        )
    )
    merged = merge_config(REQUIRED, extra)
    assert merged["nodes"] == [{"role": "control-plane"}, {"role": "worker"}]
    assert merged["networking"] == {
        "disableDefaultCNI": True,
        "podSubnet": "10.244.0.0/16",
        "serviceSubnet": "10.97.0.0/16",
    }
    assert merged["featureGates"] == {"SomeGate": True}
    assert len(merged["kubeadmConfigPatches"]) == 2 and "failCgroupV1" in merged["kubeadmConfigPatches"][0]
    assert REQUIRED["networking"] == {"disableDefaultCNI": True, "podSubnet": "10.244.0.0/16"}  # not mutated


def test_yaml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes:\n- role: control-plane\n  bad: [unclosed\n")
    with pytest.raises(KindError, match=rf"kind config {path} line \d+: not valid YAML"):
        load_extra_config(path)


def test_wrong_keys_and_roles_are_each_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: mine\nnode: []\nnodes: [{role: master}]\nkind: Cluster\n")
    with pytest.raises(KindError) as failed:
        load_extra_config(path)
    message = str(failed.value)
    assert f"kind config {path} is not usable" in message
    assert "name: ktest names its clusters itself" in message
    assert "node: not a kind Cluster key" in message
    assert "nodes[0].role: 'master' (must be control-plane or worker)" in message
    assert "nodes: needs at least one control-plane node" in message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KindError, match=rf"kind config {tmp_path / 'absent.yaml'}: cannot read it"):
        load_extra_config(tmp_path / "absent.yaml")


def test_a_setting_the_image_needs_cannot_be_overridden() -> None:
    with pytest.raises(
        KindError, match=r"networking.disableDefaultCNI: False conflicts with what the node image"
    ):
        merge_config(REQUIRED, {"networking": {"disableDefaultCNI": False}}, source="kind.yaml")


@pytest.mark.parametrize("name", ["my-cluster", "ktest-UPPER", "ktest-" + "x" * 40, "ktest-run-", "kind"])
def test_cluster_names_ktest_would_not_give_are_refused(name: str) -> None:
    with pytest.raises(KindError, match="is not a name ktest gives to a kind cluster"):
        check_cluster_name(name)


def test_ktest_cluster_names_are_accepted() -> None:
    check_cluster_name("ktest-run-0a1b2c")


def test_image_from_a_dynamically_linked_binary_is_refused() -> None:
    from ktest.backends.kind.binary_image import image_from_binary

    with pytest.raises(KindError, match=r"/bin/ls is dynamically linked \(it needs /lib64/ld-linux"):
        image_from_binary("/bin/ls", "ktest-fixtures/ls:v1")


def test_image_tags_that_would_be_pulled_are_refused(tmp_path: Path) -> None:
    from ktest.backends.kind.binary_image import image_from_binary

    with pytest.raises(KindError, match=r"give 'ktest-fixtures/x:latest' a version tag other than latest"):
        image_from_binary("/bin/ls", "ktest-fixtures/x:latest")
