"""Helpers shared by the assets tests: stand-in binaries and envtest archives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.37.2"
ETCD_VERSION = "3.7.0"


def fake_binary_script(name: str, version: str, etcd_version: str = ETCD_VERSION) -> str:
    """A shell script that reports versions the way the real binary does."""
    if name == "etcd":
        return f'#!/bin/sh\necho "etcd Version: {etcd_version}"\necho "Git SHA: fake"\n'
    if name == "kubectl":
        return f'#!/bin/sh\necho "Client Version: v{version}"\necho "Kustomize Version: v5"\n'
    return f'#!/bin/sh\necho "Kubernetes v{version}"\n'


def write_fake_binaries(
    directory: Path,
    version: str = K8S_VERSION,
    names: tuple[str, ...] = ("kube-apiserver", "etcd", "kube-controller-manager", "kubectl"),
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text(fake_binary_script(name, version))
        path.chmod(0o755)
    return directory


def build_envtest_archive(version: str) -> bytes:
    """A .tar.gz laid out like controller-tools' envtest archives."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("etcd", "kube-apiserver", "kubectl"):
            data = fake_binary_script(name, version).encode()
            info = tarfile.TarInfo(f"controller-tools/envtest/{name}")
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
