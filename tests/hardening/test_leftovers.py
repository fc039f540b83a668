"""Leftovers, with real processes and real signals: no credentials in
$TMPDIR after a run, however it ended; socket directories of dead owners are
swept at the next start and by `ktest down`, which tells the truth."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_runs import pytest_command
from hardening_helpers import files_with_key_material, loose_modes, run_ktest, sandbox_env

from ktest.assets.bundle import Assets
from ktest.base import holders
from ktest.base.procfs import process_alive
from ktest.controlplane import ControlPlane
from ktest.sessions.shared import SHARE_PREFIX, sweep_stale_shares
from ktest.wait import eventually

HERE = Path(__file__).parent
CHILD = HERE / "child_session.py"
REPO = HERE.parents[1]


@pytest.fixture
def sandbox(tmp_path: Path, assets: Assets) -> dict[str, str]:
    """A private TMPDIR, run directory and state directory; the session's binaries."""
    return sandbox_env(tmp_path, assets.directory)


def start_child(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("ready"):
        child.kill()
        raise AssertionError(f"child failed: {line}{child.communicate()[1][-3000:]}")
    return child, line.strip()


def end_child(child: subprocess.Popen[str], ending: str) -> None:
    """``exit``: tell a ``session exit`` child to close its session and leave; else the signal."""
    if ending == "exit":
        assert child.stdin is not None
        child.stdin.write("exit\n")
        child.stdin.flush()
    else:
        child.send_signal(signal.SIGTERM if ending == "sigterm" else signal.SIGKILL)


# ---------------------------------------------------------------------- 14.2


# The other endings ride on runs other tests make anyway, whose sessions use a user's credentials too:
# a clean exit on test_environment_proxy.py's child session, kill -9 on the killed xdist controller below.
@pytest.mark.parametrize("ending", ["sigterm"])
def test_no_credentials_in_tmpdir_after_a_run(sandbox: dict[str, str], ending: str) -> None:
    tmpdir, run_dir = Path(sandbox["TMPDIR"]), Path(sandbox["KTEST_RUN_DIR"])
    child, _ = start_child(sandbox, "session", "exit" if ending == "exit" else "hold")
    assert any(run_dir.iterdir()), "the control plane's directory should exist while the session runs"
    end_child(child, ending)
    child.wait(60)
    # After kill -9 the janitor removes the control plane's directory (processes first).
    eventually(lambda: not any(run_dir.iterdir()), timeout=30, description=f"the janitor to empty {run_dir}")
    assert files_with_key_material(tmpdir) == [], sorted(os.listdir(tmpdir))


def _kubeconfig_with_embedded_data(plane: ControlPlane, path: Path) -> Path:
    """What kubectl and kind write: the admin's certificate, key and CA inline (*-data)."""
    certs = plane.directory / "certs"
    data = {
        name: base64.b64encode((certs / name).read_bytes()).decode()
        for name in ("ca.crt", "admin.crt", "admin.key")
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": plane.server, "certificate-authority-data": data["ca.crt"]}}
        ],
        "users": [
            {
                "name": "u",
                "user": {"client-certificate-data": data["admin.crt"], "client-key-data": data["admin.key"]},
            }
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_existing_backend_copies_no_credentials_to_tmpdir(
    sandbox: dict[str, str], plane: ControlPlane, tmp_path: Path, ending: str
) -> None:
    kubeconfig = _kubeconfig_with_embedded_data(plane, tmp_path / "user.kubeconfig")
    env = {
        **sandbox,
        "KTEST_BACKEND": "existing",
        "KTEST_KUBECONFIG": str(kubeconfig),
        "KTEST_CONTEXT": "ctx",
    }
    run_dir = Path(sandbox["KTEST_RUN_DIR"])
    child, _ = start_child(env, "session", "exit" if ending == "exit" else "hold")
    private = list(run_dir.glob("ktest-kubeconfig-*"))
    assert len(private) == 1 and private[0].stat().st_mode & 0o077 == 0
    end_child(child, ending)
    child.wait(60)
    eventually(
        lambda: not private[0].exists(),
        timeout=30,
        description="the janitor to remove the private kubeconfig copy",
    )
    assert files_with_key_material(Path(sandbox["TMPDIR"])) == [], sorted(os.listdir(sandbox["TMPDIR"]))


# ---------------------------------------------------------------------- 14.3


def test_sweep_removes_only_directories_of_dead_owners(sandbox: dict[str, str]) -> None:
    tmpdir = Path(sandbox["TMPDIR"])
    victim, victim_line = start_child(sandbox, "share-owner")
    survivor, survivor_line = start_child(sandbox, "share-owner")
    try:
        dead_dir = Path(victim_line.split()[1]).parent
        live_dir = Path(survivor_line.split()[1]).parent
        victim.kill()
        victim.wait()
        assert dead_dir.is_dir(), "kill -9 leaves the directory (nothing runs in the dead process)"

        # A directory from an older ktest (no owner file) whose socket nobody serves, old enough.
        legacy = tmpdir / f"{SHARE_PREFIX}legacy"
        legacy.mkdir()
        with socket.socket(socket.AF_UNIX) as orphan:
            orphan.bind(str(legacy / "socket"))
        old = time.time() - 2 * holders.UNHELD_GRACE_SECONDS
        os.utime(legacy, (old, old))
        young = tmpdir / f"{SHARE_PREFIX}young"  # may be being created right now
        young.mkdir()

        removed = sweep_stale_shares(tmpdir)
        assert sorted(removed) == sorted([dead_dir, legacy])
        assert live_dir.is_dir() and young.is_dir() and not dead_dir.exists()
    finally:
        survivor.kill()
        survivor.wait()


def test_a_new_cluster_server_sweeps_what_a_killed_one_left(sandbox: dict[str, str]) -> None:
    victim, line = start_child(sandbox, "share-owner")
    victim.kill()
    victim.wait()
    dead_dir = Path(line.split()[1]).parent
    successor, _ = start_child(sandbox, "share-owner")
    try:
        assert not dead_dir.exists()
    finally:
        successor.kill()
        successor.wait()


@dataclasses.dataclass
class KilledRun:
    """What one real `ktest up` daemon and a session attached to it saw, both killed with -9 (the
    session first), then `ktest down`; both tests below read it (one daemon, one plane, for both)."""

    sandbox: dict[str, str]
    pid: int  # the daemon's
    share_dir: Path  # the daemon's socket directory
    planes_while_attached: list[Path]  # the run directory while the session was on the daemon's plane
    webhook_dir: Path
    webhook_keys_while_running: list[Path]
    up_files_readable_by_others: list[str]  # the state and the daemon's directories, right after `ktest up`
    keys_after_the_session_kill: list[Path]  # in TMPDIR, once the session's janitors were done
    operator_dir: Path
    operator_dir_after_the_kills: bool
    share_dir_after_the_kills: bool
    down: subprocess.CompletedProcess[str]


KILLED_RUN = pytest.mark.xdist_group("leftovers-killed-run")  # one worker makes the module's run


@pytest.fixture(scope="module")
def killed_run(assets: Assets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KilledRun]:
    """A `ktest up` daemon in a sandbox; a session (child_session.py ``webhooks``: a webhook set, an
    in-process operator) attached to it with KTEST_REUSE; kill -9 of the session, then of the
    daemon, each waited for its janitor; then `ktest down`. The two endings do not interfere: the
    session's janitor removes its webhook set, the daemon's its plane, and what neither can remove
    (the operator's log, the socket directory) is left to `ktest down`, which sweeps both."""
    sandbox = sandbox_env(tmp_path_factory.mktemp("killed-run"), assets.directory)
    run_dir = Path(sandbox["KTEST_RUN_DIR"])
    up = run_ktest(sandbox, "up", "--controllers", "none")
    assert up.returncode == 0, up.stderr
    record = json.loads((Path(sandbox["XDG_STATE_HOME"]) / "ktest" / "up" / "default.json").read_text())
    pid = int(record["pid"])
    up_files = loose_modes(Path(sandbox["XDG_STATE_HOME"]) / "ktest")
    for made_by_the_test in (run_dir, Path(sandbox["TMPDIR"])):  # the daemon's run and share directories
        up_files += loose_modes(made_by_the_test, include_root=False)
    child: subprocess.Popen[str] | None = None
    try:
        child, line = start_child({**sandbox, "KTEST_REUSE": "1"}, "webhooks")
        webhook_dir, operator_dir = (Path(part) for part in line.split()[1:3])
        planes_while_attached = sorted(run_dir.iterdir())
        webhook_keys = files_with_key_material(webhook_dir)
        assert operator_dir.is_dir(), f"the session's operator has no log directory: {line}"
        child.kill()
        child.wait(60)
        eventually(
            lambda: not webhook_dir.exists(), timeout=30, description=f"the janitor to remove {webhook_dir}"
        )
        tmpdir = Path(sandbox["TMPDIR"])
        eventually(lambda: not list(tmpdir.glob("ktest-proxy-*")), timeout=30,
                   description="the janitor to remove the operator proxy's directory")
        keys_after_the_session_kill = files_with_key_material(tmpdir)
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not process_alive(pid), timeout=30, description="the daemon to die")
        eventually(
            lambda: not any(run_dir.iterdir()),
            timeout=30,
            description="the janitor to remove the control plane",
        )
        share_dir = Path(str(record["share"]["control_address"])).parent
        kept = (operator_dir.is_dir(), share_dir.is_dir())
        yield KilledRun(
            sandbox, pid, share_dir, planes_while_attached, webhook_dir, webhook_keys, up_files,
            keys_after_the_session_kill, operator_dir, *kept,
            down=run_ktest(sandbox, "down"),
        )
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


@KILLED_RUN
def test_ktest_up_state_and_daemon_files_are_private(killed_run: KilledRun) -> None:
    """The `ktest up` record and log, and the daemon's run and share directories: 0700 and 0600.
    Was: the state 0755/0644."""
    assert killed_run.up_files_readable_by_others == []


@KILLED_RUN
def test_ktest_down_after_the_daemon_was_killed(killed_run: KilledRun) -> None:
    """Its positive control (``ktest down`` stops a live daemon and says "stopped 'default' (pid N)")
    is tests/sessions/test_reuse.py's ``test_up_attach_twice_then_down``."""
    sandbox, pid, share_dir = killed_run.sandbox, killed_run.pid, killed_run.share_dir
    assert share_dir.parent == Path(sandbox["TMPDIR"]), share_dir
    assert killed_run.share_dir_after_the_kills, (
        "a SIGKILLed daemon cannot remove its socket directory itself"
    )

    down = killed_run.down
    assert down.returncode == 0, down.stderr
    assert "stopped" not in down.stderr
    assert f"'default' was not running (its daemon, pid {pid}, had already exited)" in down.stderr
    assert not share_dir.exists()
    assert not (Path(sandbox["XDG_STATE_HOME"]) / "ktest" / "up" / "default.json").exists()
    assert files_with_key_material(Path(sandbox["TMPDIR"])) == []


XDIST_TEST = """
import os, pathlib, time

def test_held(cluster):
    from kubernetes.client.exceptions import ApiException

    user = cluster.user("someone", groups=["team"])  # a user's credentials in use, as child_session's
    try:
        user.get(("v1", "ConfigMap", "c", "default"))
    except ApiException as error:  # forbidden: what matters is that its credentials were used
        assert error.status == 403, error
    pathlib.Path(os.environ["HELD_MARK"]).touch()
    while True:  # until the test kills the controller
        time.sleep(0.05)
"""


def test_killed_xdist_controller_share_is_swept_by_the_next_run(
    sandbox: dict[str, str], tmp_path: Path
) -> None:
    """Its kill -9 of the session's plane owner is also test_no_credentials_in_tmpdir_after_a_run's
    kill -9 case: once the plane is gone, no key is left in $TMPDIR."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_held.py").write_text(XDIST_TEST)
    (project / "pytest.ini").write_text("[pytest]\n")
    mark = tmp_path / "held"
    env = {**sandbox, "HELD_MARK": str(mark)}
    command = pytest_command("-n", "1")
    controller = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        eventually(mark.exists, timeout=120, description="the held test to run on the worker")
        shares = list(Path(sandbox["TMPDIR"]).glob(f"{SHARE_PREFIX}*"))
        assert len(shares) == 1
        controller.kill()
        controller.wait()
        # The worker loses its controller and exits; the control plane dies with the controller.
        eventually(
            lambda: not any(Path(sandbox["KTEST_RUN_DIR"]).iterdir()),
            timeout=30,
            description="the control plane to go",
        )
        tmpdir = Path(sandbox["TMPDIR"])
        assert files_with_key_material(tmpdir) == [], sorted(os.listdir(tmpdir))
        assert shares[0].is_dir()
    finally:
        if _group_alive(controller.pid):  # the worker, which lost its controller
            os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()

    (project / "test_held.py").write_text("def test_quick():\n    pass\n")
    again = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stdout[-2000:]
    assert not shares[0].exists()
    assert not list(Path(sandbox["TMPDIR"]).glob(f"{SHARE_PREFIX}*")), "the second run left its own"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------- 23.5


@KILLED_RUN
def test_kill_9_leaves_no_webhook_key_and_the_operator_log_is_swept(killed_run: KilledRun) -> None:
    """Was: /tmp/ktest-webhooks-* (a TLS serving key) and ktest-operator-* stayed forever after kill -9.

    Now the webhook set's janitor removes its directory as soon as its holder dies, and the
    operator's log directory (owner recorded) goes at the next start or `ktest down`. The session
    holding them is on a `ktest up` daemon's plane (killed after it, see ``killed_run``)."""
    tmpdir = Path(killed_run.sandbox["TMPDIR"])
    webhook_dir, operator_dir = killed_run.webhook_dir, killed_run.operator_dir
    planes = killed_run.planes_while_attached
    assert len(planes) == 1, f"the session should be on the daemon's plane, not on one of its own: {planes}"
    assert webhook_dir.parent == operator_dir.parent == tmpdir
    assert killed_run.webhook_keys_while_running, "positive control: the set's key is there while it runs"
    assert not webhook_dir.exists(), "the janitor should have removed the webhook set's directory"
    assert killed_run.keys_after_the_session_kill == [], (
        "no key may outlive a SIGKILLed session (its janitors remove the webhook set's and the operator "
        "proxy's directories), not even until `ktest down`"
    )
    assert killed_run.operator_dir_after_the_kills, (
        "a SIGKILLed process cannot remove its operator log itself"
    )

    down = killed_run.down
    assert down.returncode == 0, down.stderr
    assert not operator_dir.exists()
    assert str(operator_dir) in down.stderr, down.stderr
    assert files_with_key_material(tmpdir) == []
    leftovers = sorted(os.listdir(tmpdir))
    assert not [name for name in leftovers if name.startswith(("ktest-webhooks-", "ktest-operator-"))]


def test_the_next_webhook_set_sweeps_a_dead_owners_directory(sandbox: dict[str, str]) -> None:
    """The janitor itself killed too (a machine reboot, an OOM kill of both): the next set sweeps."""
    tmpdir = Path(sandbox["TMPDIR"])
    dead = tmpdir / f"{holders.WEBHOOKS_PREFIX}dead"
    (dead / "certs").mkdir(parents=True)
    (dead / "certs" / "tls.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    holders.write_holder(dead, holders.Holder(pid=_dead_pid(), start_time="1"))
    alive = tmpdir / f"{holders.WEBHOOKS_PREFIX}alive"
    alive.mkdir()
    holders.write_holder(alive)
    assert holders.sweep_temp(tmpdir) == [dead]
    assert alive.is_dir()


def _dead_pid() -> int:
    command = [sys.executable, "-c", "import os; print(os.getpid())"]
    return int(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


BOUND_CHILD = """
import sys, threading
from ktest.base.process import popen_bound

started = []
worker = threading.Thread(target=lambda: started.append(popen_bound(["sleep", "600"])))
worker.start()
worker.join()  # the thread that asked is gone: the helper must still be bound to the process
print(started[0].pid, flush=True)
sys.stdin.read()
"""


def test_a_bound_helper_dies_with_its_process_after_kill_9() -> None:
    """What `kubectl port-forward` is started with (kind's KindHandle.port_forward)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", BOUND_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    helper = int(owner.stdout.readline())
    try:
        assert process_alive(helper), "positive control: the helper outlives the thread that started it"
        owner.kill()
        owner.wait()
        eventually(
            lambda: not process_alive(helper), timeout=10, description="the helper to die with its owner"
        )
    finally:
        if process_alive(helper):
            os.kill(helper, signal.SIGKILL)
