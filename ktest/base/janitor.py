"""Cleans up after a control plane whose Python process died without stopping it.

After ``kill -9`` nothing runs in the Python process, so a tiny separate
process does the cleanup: it is started with a pipe on its stdin whose write
end only the owner holds. The owner tells it the control plane's directory;
when the pipe reaches end-of-file without a ``release`` line (the owner died),
the janitor SIGKILLs every process whose command line mentions that directory
(etcd, kube-apiserver and kube-controller-manager all do) and removes it.

This file is run as a script (``python -I -S janitor.py``) and imports only
the standard library, so it starts in a few milliseconds. :func:`sweep_stale`
is also used by the owner to remove directories left behind by dead owners.

Protocol, one line each: ``dir <path>``, ``keep`` (do not remove the directory),
``kind <kind binary>\t<cluster name>\t<record path>`` (delete that kind cluster, its
record and the directory named by ``dir``, unless the record says it is kept),
``release`` (the owner cleaned up itself; exit quietly).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import ModuleType


def _procfs() -> ModuleType:
    """``ktest.base.procfs``: imported normally, or, when the janitor runs as a script with
    ``-I -S`` (no ktest on the path, so it starts in milliseconds), loaded from its file."""
    if __package__:
        return importlib.import_module("ktest.base.procfs")
    spec = importlib.util.spec_from_file_location("_ktest_procfs", Path(__file__).with_name("procfs.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PROCFS = _procfs()
own_directory = _PROCFS.own_directory
process_start_time = _PROCFS.process_start_time

HOLDER_FILE = "owner"
KEEP_FILE = "keep"
DIRECTORY_PREFIX = "ktest-cp-"


def holder_alive(directory: Path) -> bool:
    """True unless the directory's owner file names a process that no longer exists."""
    try:
        pid_text, start_time = (directory / HOLDER_FILE).read_text().split()
    except (OSError, ValueError):
        return True  # no owner recorded (yet): not ours to judge
    return process_start_time(int(pid_text)) == start_time


def write_holder(directory: Path) -> None:
    pid = os.getpid()
    write_private_text(directory / HOLDER_FILE, f"{pid} {process_start_time(pid)}\n")


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, created 0600 (never through a symlink planted there)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)


def processes_mentioning(text: str) -> list[int]:
    """Pids (other than this one) whose command line contains ``text``."""
    needle = text.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                if needle in file.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"


def kill_and_remove(directory: Path, *, remove: bool, timeout: float = 10.0) -> None:
    """SIGKILL the processes using ``directory``, wait for them, then remove it."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in processes_mentioning(str(directory)) if not _is_zombie(pid)]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if remove:
        for _attempt in range(50):
            shutil.rmtree(directory, ignore_errors=True)
            if not directory.exists():
                break
            time.sleep(0.05)


def sweep_stale(base: Path, prefix: str = DIRECTORY_PREFIX) -> list[Path]:
    """Remove this user's ``prefix*`` directories under ``base`` whose owner process is gone.

    Entries of other users, symlinks and anything that fails to be read are
    skipped: a sweep is housekeeping and never fails the caller.
    """
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for directory in entries:
        if not directory.name.startswith(prefix) or not own_directory(directory):
            continue
        try:
            if (directory / KEEP_FILE).exists() or holder_alive(directory):
                continue
            kill_and_remove(directory, remove=True, timeout=2.0)
        except OSError:
            continue
        if not os.path.lexists(directory):
            removed.append(directory)
    return removed


KIND_CREATE_SETTLE = 3.0
"""Seconds without a node container before a cluster whose ``kind create`` was killed counts
as deleted: the engine may still be creating a node container, which ``kind delete`` then
fails to remove without a word."""
KIND_CREATE_TIMEOUT = 120.0


def _kind(kind: str, *args: str) -> str:
    """``kind args``'s standard output ("" when it cannot run)."""
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            [kind, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, timeout=300, check=False,
        ).stdout
    return ""


def delete_kind_cluster(kind: str, name: str, record: Path, directory: Path | None = None) -> None:
    """Delete a dead owner's kind cluster (stopping a ``kind create`` still running for it first).

    Half-made (a ``kind create`` was running, or ``directory`` has no admin kubeconfig yet), it is
    deleted again each time a node container shows up, until none has for KIND_CREATE_SETTLE s.
    """
    try:
        if '"kept": true' in record.read_text():
            return  # kept on purpose after all (ktest up, --ktest-keep-cluster)
    except OSError:
        return  # no record: the owner deleted it, or it was never ktest's
    creating = processes_mentioning(f"--name\0{name}\0")
    for pid in creating:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    half_made = bool(creating) or (directory is not None and not (directory / "admin.kubeconfig").exists())
    give_up = time.monotonic() + KIND_CREATE_TIMEOUT
    while True:
        _kind(kind, "delete", "cluster", "--name", name, "--kubeconfig", os.devnull)
        quiet_until = min(time.monotonic() + (KIND_CREATE_SETTLE if half_made else 0.0), give_up)
        left = ""
        while not left and time.monotonic() < quiet_until:
            time.sleep(0.5)
            left = _kind(kind, "get", "nodes", "--name", name).strip()
        if not left:
            break
    with contextlib.suppress(OSError):
        record.unlink()


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    directory: Path | None = None
    keep = False
    kind_cluster: tuple[str, str, Path] | None = None
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        command, _, argument = line.partition(" ")
        if command == "dir":
            directory = Path(argument)
        elif command == "keep":
            keep = True
        elif command == "kind":
            kind, name, record = argument.split("\t")
            kind_cluster = (kind, name, Path(record))
        elif command == "release":
            return
    if kind_cluster is not None:
        delete_kind_cluster(*kind_cluster, directory=directory)
    if directory is not None:
        kill_and_remove(directory, remove=not keep)


if __name__ == "__main__":
    main()
