"""pytest-kind's ``KindCluster`` API (``kind_cluster``), duck-typed: no pytest-kind import in ktest.

The parts that need no nodes (``api``, ``kubectl``) run here against a real API
server; images and port-forwarding run on kind in tests/on_kind/test_pytest_kind_examples.py.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.pytest_kind_compat import KindClusterCompat
from ktest.controlplane import ControlPlane

KTEST = Path(__file__).resolve().parents[2] / "ktest"


def test_ktest_never_imports_pytest_kind() -> None:
    """pytest-kind is GPL-3.0-or-later, ktest Apache-2.0: API-compatible, never a subclass or import."""
    offenders = []
    for path in KTEST.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            if any(name.split(".")[0] == "pytest_kind" for name in names):
                offenders.append(f"{path.relative_to(KTEST.parent)}:{node.lineno}")
    assert offenders == []


@pytest.fixture
def compat(plane: ControlPlane, admin) -> KindClusterCompat:
    """The compat object over a handle whose kubeconfig is a real (node-less) API server's."""
    handle = KindHandle("not-kind", plane.kubeconfig, plane.version, Path("/nonexistent/kind"), admin)
    return KindClusterCompat(handle)


def test_api_is_a_pykube_client(compat: KindClusterCompat, plane: ControlPlane) -> None:
    pykube = pytest.importorskip("pykube", reason="pykube-ng comes with the kind extra (part of dev)")
    assert isinstance(compat.api, pykube.HTTPClient)
    assert compat.api.version == tuple(plane.version.split(".")[:2])
    names = [ns.name for ns in pykube.Namespace.objects(compat.api)]
    assert "kube-system" in names


def test_kubectl_takes_subprocess_keywords_and_raises_called_process_error(
    compat: KindClusterCompat, plane: ControlPlane, tmp_path: Path
) -> None:
    major_minor = ".".join(plane.version.split(".")[:2])
    assert f"v{major_minor}" in compat.kubectl("version")
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: compat-cm, namespace: default}\n"
    assert "configmap/compat-cm" in compat.kubectl("apply", "-f", "-", input=config_map, timeout=60)
    (tmp_path / "cm.yaml").write_text(config_map.replace("compat-cm", "compat-cm2"))
    assert "compat-cm2" in compat.kubectl("apply", "-f", "cm.yaml", cwd=tmp_path)
    with pytest.raises(subprocess.CalledProcessError) as raised:
        compat.kubectl("get", "nosuchkinds", stderr=subprocess.STDOUT)
    assert raised.value.returncode != 0
    assert "nosuchkinds" in raised.value.output
    compat.kubectl("delete", "configmap", "compat-cm", "compat-cm2", "-n", "default")
