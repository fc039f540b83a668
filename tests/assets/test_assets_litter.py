"""A successful Go step leaves no log behind, a failed one keeps its log and
names it; workspace locks live in one ``.locks`` directory. Uses the real ``go``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktest.assets import gotool
from ktest.assets.progress import Progress
from ktest.errors import AssetsError
from ktest_offline import kubernetes


@pytest.fixture
def builder(tmp_path: Path) -> kubernetes.KubernetesBuilder:
    go = gotool.find_go()
    if go is None or shutil.which("go") is None:
        pytest.skip("needs `go` on PATH (the project's build machines have it)")
    return kubernetes.KubernetesBuilder(go, tmp_path / "gobuild", Progress(enabled=False))


def test_successful_go_step_leaves_no_log(builder: kubernetes.KubernetesBuilder, tmp_path: Path) -> None:
    log = tmp_path / "version.log"
    builder._logged_go(["version"], tmp_path, log, "asking go its version", 60)
    assert not log.exists()


def test_failed_go_step_keeps_and_names_its_log(
    builder: kubernetes.KubernetesBuilder, tmp_path: Path
) -> None:
    log = tmp_path / "bad.log"
    with pytest.raises(AssetsError) as caught:
        builder._logged_go(["no-such-go-command"], tmp_path, log, "running a bad go command", 60)
    assert log.is_file() and f"(full log: {log})" in str(caught.value)
    assert "no-such-go-command" in str(caught.value)


def test_workspace_locks_share_one_directory(tmp_path: Path) -> None:
    lock = kubernetes._workspace_lock(tmp_path / "gobuild" / "kubernetes-v1.37.2")
    with lock:
        pass
    assert Path(lock.lock_file).parent == tmp_path / "gobuild" / ".locks"
    assert [p.name for p in (tmp_path / "gobuild").iterdir()] == [".locks"]
