"""``ktest status`` and ``ktest down --kind`` without the ``kind`` extra: a kind
cluster ktest made is still there, so they say so, that the docker Python package is needed to
act on it, and how to install it; no ModuleNotFoundError traceback.

The command runs in a child Python whose import system refuses ``docker`` (a meta path finder
put first), as in an environment where the extra was never installed."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ktest.backends.kind import records

WITHOUT_DOCKER = """
import sys

class NoDocker:
    def find_spec(self, name, path=None, target=None):
        if name == "docker" or name.startswith("docker."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoDocker())
from ktest.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def kept_kind_record(tmp_path: Path) -> records.ClusterRecord:
    """The record ``ktest up --backend kind`` leaves for its kept cluster, in a private state dir."""
    record = records.held_by_this_process("ktest-up-5f3a9c", tmp_path / "cluster", "kindest/node:v1.37.2",
                                           "1.37.2")
    record = dataclasses.replace(record, kept=True, owner_pid=None, purpose="up")
    records.write_record(record, tmp_path / "state" / "ktest" / "kind")
    return record


def run_without_docker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "KTEST_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-c", WITHOUT_DOCKER, *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_status_names_the_kind_cluster_and_how_to_install_the_extra(
    tmp_path: Path, kept_kind_record: records.ClusterRecord
) -> None:
    done = run_without_docker(tmp_path, "status")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "kind ktest-up-5f3a9c: state unknown (asking Docker needs the docker Python package), "
        "Kubernetes 1.37.2, kept (ktest up / --ktest-keep-cluster)"
    ) in lines, done.stdout
    assert f"  kubeconfig: {kept_kind_record.kubeconfig}" in lines
    assert lines[-1] == (
        "kind: the docker Python package is not installed (No module named 'docker'); ktest needs it to "
        "check, use or delete these clusters: install ktest's kind extra (pip install \"ktest[kind]\")"
    )
    assert lines[0].startswith("no warm control planes")  # backend bare's part ran as ever


def test_down_says_what_is_left_and_how_to_go_on(
    tmp_path: Path, kept_kind_record: records.ClusterRecord
) -> None:
    done = run_without_docker(tmp_path, "down", "--kind")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "ktest: error: kind cluster ktest-up-5f3a9c made by ktest exists (`ktest status` lists them), but "
        "the docker Python package is not installed (No module named 'docker'), which ktest needs to delete "
        "kind clusters: install ktest's kind extra (pip install \"ktest[kind]\"), then run "
        "`ktest down --kind` again\n"
    )
    still = records.read_record(kept_kind_record.name, tmp_path / "state" / "ktest" / "kind")
    assert still == kept_kind_record  # nothing was half-done
    assert not (tmp_path / "cache").exists()  # no kind binary was looked for, downloaded or built
