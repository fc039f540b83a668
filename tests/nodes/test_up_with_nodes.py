"""``ktest up --nodes N`` keeps a warm plane with simulated nodes; a run asking for the same nodes
attaches to it (``--ktest-reuse``) and its Pods run; one asking for other nodes does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runs import run_ktest_cli
from inner_runs import run_inner

from ktest.assets import Assets

INNER = """
from ktest import eventually

def test_runs_on_the_warm_plane(cluster, namespace):
    print("TAG", cluster.server)
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                    "spec": {"containers": [{"name": "c", "image": "example/app:1"}]}})
    eventually(lambda: cluster.get(("v1", "Pod", "p", namespace))["status"]["phase"] == "Running", timeout=30)
"""


def test_a_warm_plane_with_nodes_serves_runs_asking_for_them(
    pytester: pytest.Pytester, k8s_assets: Assets, inner_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**os.environ, **inner_env}
    started = run_ktest_cli(
        "up",
        "--nodes",
        "2",
        "--name",
        "with-nodes",
        "--k8s-version",
        k8s_assets.version,
        env=env,
        timeout=180,
    )
    assert started.returncode == 0, started.stderr
    try:
        status = run_ktest_cli("status", env=env)
        assert "with-nodes: Kubernetes" in status.stdout and "2 simulated nodes" in status.stdout
        attached = run_inner(
            pytester,
            INNER,
            "-s",
            "--ktest-reuse",
            "--ktest-nodes=2",
            "-p",
            "no:xdist",
            f"--ktest-k8s-version={k8s_assets.version}",
        )
        attached.assert_outcomes(passed=1)
        attached.stdout.fnmatch_lines(["*warm control plane 'with-nodes'*"])
    finally:
        stopped = run_ktest_cli("down", "--name", "with-nodes", env=env)
        assert stopped.returncode == 0, stopped.stderr
