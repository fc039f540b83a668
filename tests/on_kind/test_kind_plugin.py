"""The kind backend through the pytest plugin and the CLI, as a user meets it.

`ktest up --backend kind` keeps a cluster; an inner pytest run attaches to it
with reuse, uses ktest's ``kind`` fixture and pytest-kind's ``kind_cluster``
API, and a failing inner test carries the kind diagnostics in its report;
`ktest status` lists the cluster and `ktest down --kind` deletes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ktest.backends.kind import records
from ktest.backends.kind.cluster import existing_clusters
from ktest.backends.kind.handle import KindHandle

INNER_TESTS = """
import time
import pytest
from ktest.wait import eventually

def test_first(cluster):
    print("FIRST-TEST", time.time(), flush=True)
    assert cluster.version

def test_pytest_kind_api(kind_cluster, kind):
    assert kind_cluster.name == kind.name
    assert kind_cluster.kubeconfig_path == kind.kubeconfig
    assert "Ready" in kind_cluster.kubectl("get", "nodes")
    kind_cluster.load_docker_image(ECHO)
    # duck-typed, never a pytest-kind subclass (GPL-3.0 vs ktest's Apache-2.0)
    assert type(kind_cluster).__module__ == "ktest.backends.kind.pytest_kind_compat"

def test_fails_with_pod_logs(cluster, namespace, kind):
    kind.load_image(ECHO)
    talker = {"name": "talker", "labels": {"app": "talker"}}
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": talker,
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": ECHO,
                             "imagePullPolicy": "Never", "args": ["resolve", "no-such-service"]}]}},
                   namespace=namespace)
    kind.collect_pod_logs(namespace, "app=talker")
    eventually(lambda: cluster.get(("v1", "Pod", "talker", namespace))["status"].get("phase") == "Failed",
               timeout=90)
    assert False, "on purpose: the report must show the pod's log"

def test_zz_the_node_dies_mid_run(cluster, kind):
    import subprocess
    subprocess.run(["docker", "stop", "-t", "1", kind.nodes[0]], check=True, capture_output=True)
    # no request here: the health check after the body names the cause
"""


def _ktest(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ktest.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=900,
    )


@pytest.mark.timeout(1800)  # two cluster starts on a loaded 2-core machine
def test_up_attach_report_status_down(
    pytester: pytest.Pytester, kind: KindHandle, echo_image: str, monkeypatch: pytest.MonkeyPatch,
    binary_cache: Path,
) -> None:
    pytest.importorskip("pytest_kind", reason="pytest-kind-ng is in the dev extra; `make test` installs it")
    # The inner runs inherit our (pytester's) HOME, so they keep the records we read; ktest's cache is
    # the real one (pytester's HOME has an empty one): its kind binary, not a build of kind.
    monkeypatch.setenv("KTEST_CACHE_DIR", str(binary_cache))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KTEST_") or k == "KTEST_CACHE_DIR"}
    up = _ktest("up", "--backend", "kind", "--k8s-version", kind.version, env=env)
    assert up.returncode == 0, up.stderr
    kept = [r for r in records.list_records() if r.kept and f"export KUBECONFIG={r.kubeconfig}" in up.stdout]
    assert len(kept) == 1, (up.stdout, records.list_records())
    name = kept[0].name
    try:
        pytester.makepyfile(test_inner=f"ECHO = {echo_image!r}\n" + INNER_TESTS)
        result = pytester.runpytest_subprocess(
            "-s",
            "-p",
            "no:cacheprovider",
            "--ktest-backend",
            "kind",
            "--ktest-reuse",
            "--ktest-k8s-version",
            kind.version,
        )
        result.assert_outcomes(passed=2, failed=2, errors=1)  # the dead node cannot delete namespaces
        output = result.stdout.str()
        assert f"KindError: the kind cluster {name} stopped: node container {name}-control-plane" in output
        assert f"attached to kept kind cluster {name}" in output
        assert "ktest: pod logs app=talker in" in output and "no-such-service" in output, output
        assert "container main: terminated, 0 restart(s)" in output
        assert name in existing_clusters(kind.kind)  # attaching never deletes

        status = _ktest("status", env=env)
        assert f"kind {name}: STOPPED (the kind cluster {name} stopped" in status.stdout, status.stdout
        assert f"Kubernetes {kind.version}, kept" in status.stdout
    finally:
        down = _ktest("down", f"--kind={name}", env=env)
    assert down.returncode == 0, down.stderr
    assert f"deleted kind cluster {name}: kept by `ktest up`" in down.stderr
    assert name not in existing_clusters(kind.kind)
    assert records.read_record(name) is None
    assert Path(kept[0].directory).exists() is False
