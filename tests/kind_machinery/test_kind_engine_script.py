"""``scripts/docker-engine``: idempotent, leaves a running engine alone, wrapper iff a capability lacks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ktest.backends.kind import engine
from ktest.errors import KindError

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine"
DAEMON_JSON = Path("/etc/docker/daemon.json")


def _run_script() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False
    )


def _dockerd_pids() -> str:
    return subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True, check=False).stdout


def test_running_it_twice_leaves_the_running_engine_alone(docker_client: Any) -> None:
    pids = _dockerd_pids()
    config = DAEMON_JSON.read_text() if DAEMON_JSON.exists() else None
    for _ in range(2):
        finished = _run_script()
        assert finished.returncode == 0, finished.stderr
        assert "an engine already answers" in finished.stdout
        assert "leaving it alone" in finished.stdout
        assert "warning" not in finished.stdout
    assert _dockerd_pids() == pids
    assert (DAEMON_JSON.read_text() if DAEMON_JSON.exists() else None) == config
    docker_client.ping()


def test_wrapper_is_the_default_runtime_exactly_when_a_capability_is_missing(docker_client: Any) -> None:
    missing = engine.missing_capabilities()
    info = engine.engine_info(docker_client)
    if missing:
        assert json.loads(DAEMON_JSON.read_text())["default-runtime"] == "ktest-runc"
        assert info.default_runtime == "ktest-runc"
        wrapper = Path(info.runtimes["ktest-runc"]).read_text()
        assert all(name in wrapper for name in missing)
    else:
        assert info.default_runtime in ("runc", "io.containerd.runc.v2")


def test_privileged_containers_run_and_accept_exec(docker_client: Any, default_image: str) -> None:
    """What kind needs from the engine: a privileged container that starts, and `docker exec` into it."""
    container = docker_client.containers.run(
        default_image, entrypoint=["sleep", "infinity"], command=[], privileged=True, detach=True,
        labels={"io.ktest.kind.test": "privileged"},
    )
    try:
        exit_code, output = container.exec_run(["sh", "-c", "grep CapEff /proc/self/status"])
        assert exit_code == 0, output
        effective = int(output.decode().split()[1], 16)
        assert effective != 0
        for name in engine.missing_capabilities():
            assert not (effective >> engine.CAPABILITY_NAMES.index(name)) & 1
    finally:
        container.remove(force=True)


def test_the_library_explains_a_missing_wrapper(docker_client: Any) -> None:
    """The check connect() runs: plain runc with a capability missing is refused, a wrapper is not."""
    plain = engine.EngineInfo("20.10.24", "1.41", 1, "runc", {"runc": "runc"}, "/var/lib/docker", True)
    with pytest.raises(KindError) as caught:
        engine.check_runtime_for(plain, "unix:///var/run/docker.sock", ["CAP_SYS_RESOURCE"])
    message = str(caught.value)
    assert "lacks CAP_SYS_RESOURCE" in message and "default runtime 'runc'" in message
    assert "unable to apply caps" in message and "scripts/docker-engine" in message
    engine.check_runtime_for(plain, "unix:///var/run/docker.sock", [])
    wrapped = engine.engine_info(docker_client)
    engine.check_runtime_for(wrapped, "unix:///var/run/docker.sock", engine.missing_capabilities())


def test_an_engine_too_old_is_refused_naming_its_version(docker_client: Any) -> None:
    old = engine.EngineInfo("19.03.15", "1.40", 1, "runc", {}, "/var/lib/docker", True)
    with pytest.raises(KindError) as caught:
        engine.check_version(old, "unix:///var/run/docker.sock")
    message = str(caught.value)
    assert "too old: version 19.03.15, API 1.40" in message and "API 1.41 (Docker 20.10)" in message
    engine.check_version(engine.engine_info(docker_client), "unix:///var/run/docker.sock")
