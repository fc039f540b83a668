"""The Go-module build path, for real, for the default Kubernetes version.

It uses the real ktest cache (~/.cache/ktest) on purpose: the first run builds
(minutes), later runs find the cached entry and only re-check the binaries.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from ktest.assets import resolve_assets, store
from ktest.assets.gotool import find_go
from ktest_offline.kubernetes import (
    ETCD_SERVER_RELEASES,
    kubernetes_go_mod,
    read_kubernetes_module,
)

pytestmark = pytest.mark.slow


def _run(binary: Path, *args: str) -> str:
    finished = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=60, check=True
    )
    return finished.stdout + finished.stderr


@pytest.mark.timeout(3600)
def test_default_version_builds_from_go_modules_and_reports_its_version() -> None:
    assets = resolve_assets(None, source="build")
    version = assets.version
    assert assets.missing == ()

    assert _run(assets.binary("kube-apiserver"), "--version").strip() == f"Kubernetes v{version}"
    assert _run(assets.binary("kube-controller-manager"), "--version").strip() == (
        f"Kubernetes v{version}"
    )
    assert f"Client Version: v{version}" in _run(assets.binary("kubectl"), "version", "--client")

    metadata = json.loads((assets.directory / store.METADATA_FILE).read_text())
    etcd_version = metadata["reported_versions"]["etcd"]
    assert f"etcd Version: {etcd_version}" in _run(assets.binary("etcd"), "--version")
    if metadata["origin"] == "build":
        # The etcd built is the release this minor's kubeadm runs (a kind node image reuses it).
        assert etcd_version == ETCD_SERVER_RELEASES[".".join(version.split(".")[:2])]
        assert metadata["etcd_version"] == etcd_version
        # Every binary's build was timed. Today the three commands share one `go build`
        # ("kube-apiserver+kube-controller-manager+kubectl"); a cache entry built by an
        # older ktest timed them one by one, and its binaries are as good.
        timed = {name for step in metadata["build_seconds"] for name in step.split("+")}
        assert timed >= {"kube-apiserver", "kube-controller-manager", "kubectl", "etcd"}


def test_consumer_module_replaces_every_staging_module(tmp_path: Path) -> None:
    go = find_go()
    assert go is not None, "this test needs `go` on PATH (as the build path does)"
    module = read_kubernetes_module(go, "1.37.2", tmp_path)

    assert {"k8s.io/api", "k8s.io/apiserver", "k8s.io/client-go", "k8s.io/component-base",
            "k8s.io/kubectl"} <= set(module.staging)
    assert all(path.startswith("k8s.io/") for path in module.staging)
    assert module.etcd_version == "3.7.0"
    assert module.go_directive == "1.26.0"
    assert ("default", "go1.26") in module.godebug

    go_mod = kubernetes_go_mod(module)
    assert "require k8s.io/kubernetes v1.37.2" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.37.2" in go_mod
    assert "\tdefault=go1.26" in go_mod
    assert go_mod.count(" => ") == len(module.staging)


def test_etcd_server_release_is_kubeadms_not_the_go_mod_client_version(tmp_path: Path) -> None:
    go = find_go()
    assert go is not None, "this test needs `go` on PATH (as the build path does)"
    module = read_kubernetes_module(go, "1.35.4", tmp_path)

    # 1.35's go.mod requires the etcd 3.6.5 client libraries; its kubeadm runs etcd 3.6.6.
    assert module.etcd_version == "3.6.5"
    assert module.etcd_server_version == "3.6.6"
    unknown = dataclasses.replace(module, version="1.99.0")
    assert unknown.etcd_server_version == "3.6.5"
