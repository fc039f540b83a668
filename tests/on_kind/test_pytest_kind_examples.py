"""pytest-kind's own examples (README, its test suite, its aiohttp example), in our words, on
``--ktest-backend kind``: the same calls a pytest-kind user makes, on ktest's cluster.

Under another backend the ``kind`` fixture (behind ``kind_cluster``) skips them with the reason.
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.pytest_kind_compat import KindClusterCompat, LatestImageWarning

pytestmark = pytest.mark.ktest_nodes

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: myapp}}
spec:
  selector: {{matchLabels: {{app: myapp}}}}
  template:
    metadata: {{labels: {{app: myapp}}}}
    spec:
      containers:
      - name: web
        image: {image}
        imagePullPolicy: IfNotPresent
        args: [serve, --port, "8080"]
        ports: [{{containerPort: 8080}}]
        readinessProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1}}
---
apiVersion: v1
kind: Service
metadata: {{name: myapp}}
spec:
  selector: {{app: myapp}}
  ports: [{{port: 80, targetPort: 8080}}]
"""


@pytest.fixture(scope="module")
def untagged_image(echo_image: str) -> str:
    """The echo image under a name without a tag (``:latest``), as in pytest-kind's README."""
    from ktest.backends.kind.engine import connect

    connect().images.get(echo_image).tag("ktest-compat-myapp", "latest")
    return "ktest-compat-myapp"


def test_api_reports_the_cluster_version(kind_cluster: KindClusterCompat, kind: KindHandle) -> None:
    assert kind_cluster.api.version == tuple(kind.version.split(".")[:2])


def test_kubectl_version_names_the_minor(kind_cluster: KindClusterCompat, kind: KindHandle) -> None:
    minor = ".".join(kind.version.split(".")[:2])
    assert f"v{minor}" in kind_cluster.kubectl("version")


def test_untagged_image_loads_with_a_warning(kind_cluster: KindClusterCompat, untagged_image: str) -> None:
    with pytest.warns(LatestImageWarning, match="imagePullPolicy: IfNotPresent"):
        kind_cluster.load_docker_image(untagged_image)


def test_readme_myapp(kind_cluster: KindClusterCompat, namespace: str, untagged_image: str,
                      tmp_path: Path) -> None:
    """README: load the image, apply the manifests, wait for the rollout, read pod logs with
    pykube, and talk to the Service through a port-forward."""
    from pykube import Pod

    (tmp_path / "deployment.yaml").write_text(DEPLOYMENT.format(image=untagged_image))
    with pytest.warns(LatestImageWarning):
        kind_cluster.load_docker_image(untagged_image)
    kind_cluster.kubectl("apply", "-n", namespace, "-f", str(tmp_path / "deployment.yaml"))
    kind_cluster.kubectl("rollout", "status", "-n", namespace, "deployment/myapp", "--timeout=180s")

    pods = list(Pod.objects(kind_cluster.api).filter(namespace=namespace, selector="app=myapp"))
    assert pods and all("serving on :8080" in pod.logs() for pod in pods)

    with kind_cluster.port_forward("service/myapp", 80, "-n", namespace) as port:
        response = urllib.request.urlopen(f"http://localhost:{port}/", timeout=30)
        assert response.read().decode().startswith("echo from myapp-")

    free = _free_port()
    with kind_cluster.port_forward("service/myapp", 80, "--namespace", namespace, local_port=free) as port:
        assert port == free
        assert urllib.request.urlopen(f"http://127.0.0.1:{free}/", timeout=30).status == 200


def test_port_forward_retries_then_raises(kind_cluster: KindClusterCompat, namespace: str) -> None:
    forward = kind_cluster.port_forward("pod/not-there", 80, "-n", namespace, retries=2)
    with pytest.raises(subprocess.CalledProcessError) as raised, forward:
        pass
    assert "failed 2 time(s)" in raised.value.output and "not-there" in raised.value.output


def test_kubectl_failure_is_called_process_error(kind_cluster: KindClusterCompat) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        kind_cluster.kubectl("get", "pod", "not-there", "-n", "default", stderr=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
