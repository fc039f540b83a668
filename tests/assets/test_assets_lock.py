"""Two installers of one version at once: one installs, the other waits and reuses it."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION, REPO_ROOT  # type: ignore[import-not-found]

from ktest.assets import store

WAIT_LIMIT = 60.0


def _start_installer(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ktest", "binaries", "path", "--k8s-version", K8S_VERSION,
         "--source", "download"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )


def _stderr_lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], needle: str, seen: list[str]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        seen.append(line)
        if needle in line:
            return
    pytest.fail(f"never saw {needle!r} on stderr; got: {''.join(seen)}")


def test_second_installer_waits_for_the_first_and_reuses_its_install(
    isolated: Path, release_server
) -> None:
    gate = threading.Event()
    release_server.routes[release_server.archive_path].gate = gate
    env = {**os.environ, **release_server.env()}

    first = _start_installer(env)
    second: subprocess.Popen[str] | None = None
    try:
        # The first process holds the lock once it asks for the archive (held at the gate).
        assert release_server.event_for(release_server.archive_path).wait(WAIT_LIMIT)
        second = _start_installer(env)
        seen: list[str] = []
        second_err = _stderr_lines(second)
        _wait_for_line(second_err, "another process is installing", seen)
        gate.set()
        first_out, first_err = first.communicate(timeout=WAIT_LIMIT)
        _wait_for_line(second_err, f"Kubernetes {K8S_VERSION} was installed by another process", seen)
        assert second.stdout is not None
        second_out = second.stdout.read()
        second.wait(timeout=WAIT_LIMIT)
    finally:
        gate.set()
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

    expected = str(store.Locations.from_env().cache_entry(K8S_VERSION))
    assert first.returncode == 0, first_err
    assert second.returncode == 0
    assert first_out.strip() == expected
    assert second_out.strip() == expected
    # The install ran once: one archive and one kube-controller-manager download in total.
    assert release_server.requests[release_server.archive_path] == 1
    assert release_server.requests[release_server.kcm_path] == 1
    assert store.read_cache_entry(store.Locations.from_env(), K8S_VERSION) is not None
