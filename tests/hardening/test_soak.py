"""The soak (scripts/soak.py) with a small subset: runs ended normally, by Ctrl-C,
SIGTERM and kill -9 at several points, bare, reuse and existing (kill -9 mid-test and in
teardown: the test namespace stays in the "user's cluster" until the next start's sweep);
zero leaks expected, and no Ctrl-C that ends with exit status 0.
A release check runs ``python scripts/soak.py --runs 8`` (200 runs)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from ktest.assets.bundle import Assets

SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_quick_soak_leaks_nothing(assets: Assets) -> None:
    done = subprocess.run(
        # no kube-controller-manager: half the time; the release check runs with it
        [sys.executable, str(SOAK), "--quick", "--json", "--controllers", "none",
         "--backends", "bare,reuse,existing"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**_env(), "KTEST_ASSETS": str(assets.directory)},
    )
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    bad = [o for o in report["outcomes"] if o["leaks"] or o["hung"] or o["bad_exit"]]
    assert not bad, json.dumps(bad, indent=1)
    assert report["summary"]["runs"] == 9 and done.returncode == 0
    existing = [o for o in report["outcomes"] if o["scenario"].startswith("existing:sigkill")]
    assert len(existing) == 2, json.dumps(report["outcomes"], indent=1)
    assert all(o["exit_status"] == -9 for o in existing), json.dumps(existing, indent=1)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


def _soak_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", SOAK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_leak_counter_sees_planted_leaks(tmp_path: Path) -> None:
    """The soak's zero means something: each kind of leak it counts is seen when planted."""
    soak = _soak_module()
    sandbox = soak.Sandbox(tmp_path / "box", "planted-1")
    assert sandbox.leaks(set()) == {}
    env = {**os.environ, soak.MARK: sandbox.run_id}
    sleeper = subprocess.Popen(["sleep", "60"], env=env)
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        (sandbox.tmp / "ktest-share-x").mkdir()
        (sandbox.run / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
        with socket.socket(socket.AF_UNIX) as unix:
            unix.bind(str(sandbox.tmp / "ktest-share-x" / "socket"))
        (sandbox.state / "ktest" / "up").mkdir(parents=True)
        (sandbox.state / "ktest" / "up" / "default.json").write_text("{}")
        deadline = time.monotonic() + 10
        while not soak.marked_processes(sandbox.run_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        leaks = sandbox.leaks({port})
        assert [entry.split()[0] for entry in leaks["processes"]] == [str(sleeper.pid)]
        assert leaks["ports"] == [str(port)]
        assert leaks["directories"] == [str(sandbox.tmp / "ktest-share-x")]
        assert leaks["files"] == [str(sandbox.run / "key.pem")]
        assert leaks["credentials"] == [str(sandbox.run / "key.pem")]
        assert leaks["sockets"] == [str(sandbox.tmp / "ktest-share-x" / "socket")]
        assert len(leaks["records"]) == 1
    finally:
        sleeper.kill()
        sleeper.wait()
        listener.close()


def test_the_leak_counter_names_webhook_operator_and_proxy_leftovers(tmp_path: Path) -> None:
    """Webhook, operator-log and proxy directories and port-forwards are counted apart."""
    soak = _soak_module()
    sandbox = soak.Sandbox(tmp_path / "box", "planted-2")
    for name in ("ktest-webhooks-a", "ktest-operator-b", "ktest-proxy-c"):
        (sandbox.tmp / name).mkdir()
    env = {**os.environ, soak.MARK: sandbox.run_id}
    # A process whose command line says port-forward, as kubectl's does.
    command = [sys.executable, "-c", "import time; time.sleep(60)", "port-forward"]
    forwarder = subprocess.Popen(command, env=env)
    try:
        deadline = time.monotonic() + 10
        while not soak.marked_processes(sandbox.run_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        leaks = sandbox.leaks(set())
        assert leaks["webhook-dirs"] == [str(sandbox.tmp / "ktest-webhooks-a")]
        assert leaks["operator-logs"] == [str(sandbox.tmp / "ktest-operator-b")]
        assert leaks["proxy-dirs"] == [str(sandbox.tmp / "ktest-proxy-c")]
        assert [entry.split()[0] for entry in leaks["port-forwards"]] == [str(forwarder.pid)]
        assert "processes" not in leaks and "directories" not in leaks
    finally:
        forwarder.kill()
        forwarder.wait()


def test_the_leak_counter_sees_kind_leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kind runs: records, the node containers of every cluster the run recorded, and Docker
    networks that were not there before (kind's shared `kind` network excepted)."""
    soak = _soak_module()
    sandbox = soak.Sandbox(tmp_path / "box", "planted-3")
    sandbox.kind_records.mkdir(parents=True)
    (sandbox.kind_records / "ktest-run-abc123.json").write_text("{}")
    assert sandbox.kind_names() == {"ktest-run-abc123"}
    asked: list[set[str]] = []

    def docker_state(clusters: set[str]) -> tuple[list[str], set[str]]:
        asked.append(set(clusters))
        return ["ktest-run-abc123-control-plane (exited)"], {"bridge", "kind", "ktest-left"}

    monkeypatch.setattr(soak, "docker_state", docker_state)
    leaks = sandbox.leaks(set(), {"ktest-run-abc123"}, {"bridge"})
    assert asked == [{"ktest-run-abc123"}]
    assert leaks["kind-records"] == [str(sandbox.kind_records / "ktest-run-abc123.json")]
    assert leaks["kind-containers"] == ["ktest-run-abc123-control-plane (exited)"]
    assert leaks["docker-networks"] == ["ktest-left"]
    assert "kind-containers" not in sandbox.leaks(set())  # bare runs never ask Docker


def test_docker_state_sees_a_new_network() -> None:
    soak = _soak_module()
    try:
        from ktest.backends.kind.engine import connect

        client = connect(check_runtime=False)
    except Exception as error:
        pytest.skip(f"no Docker engine: {error}")
    before = soak.docker_state(set())[1]
    network = client.networks.create(f"ktest-soak-planted-{os.getpid()}")
    try:
        containers, after = soak.docker_state({"ktest-no-such-cluster"})
        assert after - before == {network.name} and containers == []
    finally:
        network.remove()
        client.close()
