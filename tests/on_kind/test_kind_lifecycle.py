"""Cluster lifecycle of the kind backend: orphans swept after kill -9, bad input.

Kept clusters (`ktest up --backend kind`) are in test_kind_plugin.py.

These create clusters of their own (besides the session's), so they are few; they run in one
xdist group with the plugin test, since every cluster start sweeps orphans (another test's on purpose).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ktest.backends.kind import records
from ktest.backends.kind.backend import KindBackend
from ktest.backends.kind.cluster import KindCluster, create_cluster, existing_clusters
from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.sweep import sweep_orphans
from ktest.config import Settings
from ktest.errors import KindError
from ktest.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.xdist_group("kind-clusters"), pytest.mark.timeout(1800)]


def _run_owner(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def _wait_line(process: subprocess.Popen[str], prefix: str, timeout: float = 400) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"the owner process never printed {prefix!r}:\n{''.join(seen[-30:])}")


OWNER = """
import time
from ktest.backends.kind.backend import KindBackend
from ktest.config import Settings
backend = KindBackend.start(Settings(backend="kind", k8s_version={version!r}))
print("CLUSTER", backend.kind_cluster.record.name, backend.kind_cluster.janitor.pid, flush=True)
time.sleep(3600)
"""


def _start_owner(version: str) -> tuple[subprocess.Popen[str], str, int]:
    owner = _run_owner(OWNER.format(version=version))
    try:
        name, janitor = _wait_line(owner, "CLUSTER").split()
    except BaseException:
        owner.kill()
        owner.wait()
        raise
    return owner, name, int(janitor)


def test_the_janitor_deletes_the_cluster_of_a_killed_run(kind: KindHandle) -> None:
    owner, name, _ = _start_owner(kind.version)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    eventually(
        lambda: name not in existing_clusters(kind.kind) and records.read_record(name) is None,
        timeout=120,
        description=f"the janitor deleted {name} and its record after its owner was killed",
    )


def test_an_orphan_is_swept_at_the_next_start_and_only_with_its_record(kind: KindHandle) -> None:
    owner, name, janitor = _start_owner(kind.version)
    os.kill(janitor, signal.SIGKILL)  # e.g. the whole process group killed by a CI timeout
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    record = records.read_record(name)
    assert record is not None and record.orphaned()
    assert name in existing_clusters(kind.kind)

    # Without ktest's record, the cluster is not ktest's to delete, whatever its name.
    saved = record.path().read_text()
    record.path().unlink()
    assert not any(name in note for note in sweep_orphans(kind.kind))
    assert name in existing_clusters(kind.kind)

    record.path().write_text(saved)
    # Meanwhile its node container dies: the backend says so in plain words.
    subprocess.run(["docker", "stop", "-t", "1", f"{name}-control-plane"], check=True, capture_output=True)
    stopped = KindCluster(record, kind.kind).stopped()
    assert stopped is not None and f"the kind cluster {name} stopped: node container" in stopped
    notes = sweep_orphans(kind.kind)
    assert f"deleted kind cluster {name}: its owner (pid {owner.pid}) is gone" in notes
    assert name not in existing_clusters(kind.kind)
    assert records.read_record(name) is None and not Path(record.directory).exists()


def test_a_name_taken_by_another_cluster_is_refused(kind: KindHandle) -> None:
    with pytest.raises(
        KindError, match=rf"a kind cluster named '{kind.name}' already exists \(created by ktest"
    ):
        create_cluster(kind.kind, name=kind.name, image="unused", version=kind.version, config={})


def test_a_name_without_the_ktest_prefix_is_refused(kind: KindHandle) -> None:
    with pytest.raises(KindError, match=r"'my-cluster' is not a name ktest gives.*must start with 'ktest-'"):
        create_cluster(kind.kind, name="my-cluster", image="unused", version=kind.version, config={})


def test_no_engine_is_explained_before_anything_starts(
    kind: KindHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mine = {r.name for r in records.list_records() if r.owner_pid == os.getpid()}
    with monkeypatch.context() as patched, pytest.raises(KindError, match=r"absent\.sock") as failed:
        patched.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
        KindBackend.start(Settings(backend="kind", k8s_version=kind.version))
    assert "scripts/docker-engine" in str(failed.value)  # and how to get one
    assert {r.name for r in records.list_records() if r.owner_pid == os.getpid()} == mine
