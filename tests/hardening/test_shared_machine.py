"""On a machine with other users, their directories in a shared run
directory never break this user's sweeps, and are never entered or removed.

The tests run as root (the test machine's user). Root can read everything, so
the realistic case (an ordinary user meeting another user's 0700 directory) is
reproduced in a forked child that drops its privileges to an unprivileged uid
before sweeping; the ownership rule itself is checked as root too (root must
not remove another user's run either)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ktest.base import holders, janitor
from ktest.controlplane import ControlPlane

if TYPE_CHECKING:
    from hardening_starts import SharedStart

pytest_plugins = ("hardening_starts",)  # its plane, one for this module and test_child_environment.py

OTHER_UID = 65534  # nobody: the "other user"
TEST_UID = 64123  # an unprivileged uid for this user in the forked child

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to create another user's directory")


def _dead_owner_text() -> str:
    """An owner record naming a process that has exited (pid with a start time that never was)."""
    command = [sys.executable, "-c", "import os; print(os.getpid())"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return f"{int(done.stdout)} 1\n"


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A run directory reachable by TEST_UID (pytest's tmp_path is root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="ktest-shared-test-", dir="/tmp"))
    os.chown(base, TEST_UID, TEST_UID)
    try:
        yield base
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _other_users_directory(base: Path, name: str, *, dead_owner: bool) -> Path:
    directory = base / name
    directory.mkdir(mode=0o700)
    if dead_owner:
        (directory / janitor.HOLDER_FILE).write_text(_dead_owner_text())
    (directory / "etcd-data").mkdir()
    for path in (directory, directory / "etcd-data", *directory.iterdir()):
        os.chown(path, OTHER_UID, OTHER_UID)
    directory.chmod(0o700)
    return directory


def _own_stale_directory(base: Path, name: str, uid: int) -> Path:
    directory = base / name
    directory.mkdir(mode=0o700)
    (directory / janitor.HOLDER_FILE).write_text(_dead_owner_text())
    for path in (directory, directory / janitor.HOLDER_FILE):
        os.chown(path, uid, uid)
    return directory


def _as_user(uid: int, job: Callable[[], object]) -> object:
    """Run ``job`` in a forked child with uid/gid ``uid``; its result (JSON) or its error text."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no exec (root's home, holding Python, is 0700)
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            outcome = {"result": job()}
        except BaseException as error:  # reported to the parent, whatever it is
            outcome = {"error": f"{type(error).__name__}: {error}"}
        os.write(write_end, json.dumps(outcome, default=str).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    outcome = json.loads(data)
    if "error" in outcome:
        raise AssertionError(f"the sweep failed as uid {uid}: {outcome['error']}")
    return outcome["result"]


@needs_root
def test_another_users_private_directory_does_not_break_the_sweep(shared_base: Path) -> None:
    """Was: PermissionError from ``keep`` inside the other user's 0700 directory,
    which broke every ControlPlane.start() and `ktest down` on the machine."""
    others = _other_users_directory(shared_base, f"{janitor.DIRECTORY_PREFIX}x", dead_owner=False)
    mine = _own_stale_directory(shared_base, f"{janitor.DIRECTORY_PREFIX}1-mine", TEST_UID)

    removed = _as_user(TEST_UID, lambda: [str(path) for path in janitor.sweep_stale(shared_base)])

    assert removed == [str(mine)], "the sweep must still remove this user's stale directory"
    assert others.is_dir() and (others / "etcd-data").is_dir()


@needs_root
def test_another_users_dead_run_is_never_entered_even_by_root(shared_base: Path) -> None:
    """Root can read the other user's directory, and its owner is dead: still not ours."""
    others = _other_users_directory(shared_base, f"{janitor.DIRECTORY_PREFIX}2-theirs", dead_owner=True)
    os.chown(shared_base, 0, 0)
    mine = _own_stale_directory(shared_base, f"{janitor.DIRECTORY_PREFIX}3-mine", 0)

    assert janitor.sweep_stale(shared_base) == [mine]
    assert others.is_dir() and (others / "etcd-data").is_dir() and (others / janitor.HOLDER_FILE).is_file()


@needs_root
def test_a_symlink_is_not_followed(shared_base: Path, tmp_path: Path) -> None:
    os.chown(shared_base, 0, 0)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / janitor.HOLDER_FILE).write_text(_dead_owner_text())
    (target / "precious").write_text("x")
    (shared_base / f"{janitor.DIRECTORY_PREFIX}link").symlink_to(target)

    assert janitor.sweep_stale(shared_base) == []
    assert (target / "precious").is_file()


@needs_root
def test_owners_sweep_leaves_other_users_alone_too(shared_base: Path) -> None:
    """Same rule for the share and scratch directories (backends/holders.py): a positive control."""
    others = _other_users_directory(shared_base, f"{holders.CLUSTER_SCRATCH_PREFIX}x", dead_owner=False)
    mine = _own_stale_directory(shared_base, f"{holders.CLUSTER_SCRATCH_PREFIX}mine", TEST_UID)

    removed = _as_user(
        TEST_UID,
        lambda: [str(path) for path in holders.sweep(shared_base, holders.CLUSTER_SCRATCH_PREFIX)],
    )

    assert removed == [str(mine)]
    assert others.is_dir()


# ---------------------------------------------------------------------- 23.4: lock files


def _hold_lock(path: Path) -> subprocess.Popen[str]:
    """Another process (standing in for another user) creates ``path`` and holds a lock on it."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_lock_held_in_tmp_by_someone_else_does_not_block_conversion_webhooks(
    plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: ``/tmp/ktest-conversion-<server hash>-<crd>.lock``, a name anyone could create and hold."""
    import hashlib

    from ktest.cluster import Cluster
    from ktest.webhooks import install

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    cluster = Cluster(plane.kubeconfig)
    crd = "gadgets.locks.example.com"
    server = hashlib.sha256(cluster.server.encode()).hexdigest()[:12]
    squatted = Path(tempfile.gettempdir()) / f"ktest-conversion-{server}-{crd}.lock"
    holder = _hold_lock(squatted)
    try:
        lock = install._conversion_lock(cluster, crd, timeout=1.0)
        try:
            path = Path(lock.lock_file)
            assert path.parent == tmp_path / "cache" / "ktest" / "locks"
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
        finally:
            lock.release()
    finally:
        holder.communicate("")
        squatted.unlink(missing_ok=True)


def test_lock_directory_refuses_a_planted_symlink(tmp_path: Path) -> None:
    from ktest.errors import WebhookError
    from ktest.webhooks.install import lock_directory

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    (tmp_path / "cache" / "ktest").mkdir(parents=True)
    (tmp_path / "cache" / "ktest" / "locks").symlink_to(elsewhere)
    with pytest.raises(WebhookError, match="not a directory private to this user"):
        lock_directory({"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)})


@needs_root
def test_lock_directory_ignores_a_runtime_directory_of_another_user(tmp_path: Path) -> None:
    from ktest.webhooks.install import lock_directory

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, OTHER_UID, OTHER_UID)
    env = {"XDG_RUNTIME_DIR": str(runtime), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert lock_directory(env) == tmp_path / "cache" / "ktest" / "locks"
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert lock_directory({**env, "XDG_RUNTIME_DIR": str(mine)}) == mine / "ktest"


def _other_users_runs(base: Path, _monkeypatch: pytest.MonkeyPatch) -> dict[str, Path] | None:
    """The shared plane (hardening_starts.py) starts in ``base`` beside another user's runs, one
    live and one dead (as root only: None otherwise)."""
    if os.getuid() != 0:
        return None
    return {
        "live": _other_users_directory(base, f"{janitor.DIRECTORY_PREFIX}live", dead_owner=False),
        "dead": _other_users_directory(base, f"{janitor.DIRECTORY_PREFIX}dead", dead_owner=True),
    }


def _plane_directory(plane: ControlPlane, _start: SharedStart) -> tuple[Path, bool, int]:
    """The running plane's directory, whether it holds etcd's data, and its group/other mode bits."""
    directory = plane.directory
    return directory, (directory / "etcd").is_dir(), directory.stat().st_mode & 0o077


PREPARE_HARDENING_START = (_other_users_runs,)
SEEN_ON_HARDENING_START = (_plane_directory,)


@needs_root
@pytest.mark.xdist_group("hardening-shared-start")  # hardening_starts.GROUP: one worker starts it
def test_a_control_plane_starts_in_an_explicit_run_directory_beside_another_users_runs(
    hardening_start: SharedStart,
) -> None:
    """ControlPlane.start() sweeps its run directory: another user's runs there, live or dead,
    neither stop it nor are touched by it. The same start is test_run_directory.py's explicit run
    directory (``root_directory``): used, the plane's directory private, and gone after the stop.
    That start is shared with test_child_environment.py (hardening_starts.py says why it may be)."""
    runs = hardening_start.prepared(_other_users_runs)
    live, dead = runs["live"], runs["dead"]
    directory, holds_etcd, loose_bits = hardening_start.result(_plane_directory)
    assert directory.parent == hardening_start.base, f"{directory} is not in the explicit run directory"
    assert holds_etcd, f"no etcd data in the plane's directory {directory}"
    assert loose_bits == 0, f"the plane's directory gives group or others {oct(loose_bits)}"
    assert live.is_dir() and dead.is_dir() and (dead / "etcd-data").is_dir(), (
        "the other user's runs (live, dead) should be left as they were"
    )
    assert sorted(path.name for path in hardening_start.base.iterdir()) == [dead.name, live.name], (
        "the plane's own directory should be gone, the other user's runs untouched"
    )
