"""The recipe's facts as data: images kubeadm asks for, and the cluster config an image needs."""

from __future__ import annotations

import pytest

from ktest.backends.kind import recipe
from ktest.errors import KindError


def test_expected_images_follow_kubeadm_naming() -> None:
    images = recipe.expected_images("1.37.2")
    assert images == [
        "registry.k8s.io/kube-apiserver:v1.37.2",
        "registry.k8s.io/kube-controller-manager:v1.37.2",
        "registry.k8s.io/kube-scheduler:v1.37.2",
        "registry.k8s.io/kube-proxy:v1.37.2",
        "registry.k8s.io/coredns/coredns:v1.14.6",
        "registry.k8s.io/pause:3.10.2",
        "registry.k8s.io/etcd:3.7.0-0",
    ]


def test_required_config_for_a_ktest_image_on_cgroup_v1() -> None:
    config = recipe.required_cluster_config("1.35.4", cgroup_version=1)
    assert config["networking"] == {"disableDefaultCNI": True, "podSubnet": "10.244.0.0/16"}
    assert config["nodes"] == [{"role": "control-plane"}]
    assert config["kubeadmConfigPatches"] == ["kind: KubeletConfiguration\nfailCgroupV1: false\n"]


def test_required_config_on_cgroup_v2_and_for_official_images() -> None:
    config = recipe.required_cluster_config("1.37.2", ktest_image=False, cgroup_version=2, workers=1)
    assert config == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "nodes": [{"role": "control-plane"}, {"role": "worker"}],
    }


def test_the_cgroup_v1_patch_is_left_out_where_the_kubelet_lacks_the_field() -> None:
    assert "kubeadmConfigPatches" not in recipe.required_cluster_config("1.30.0", cgroup_version=1)


def test_unknown_minor_is_a_clear_error() -> None:
    with pytest.raises(KindError, match=r"Kubernetes 1\.99\.0 is not supported .* 1\.35, 1\.36, 1\.37"):
        recipe.minor_recipe("1.99.0")
