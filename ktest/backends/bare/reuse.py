"""Warm control planes kept between test runs: ``ktest up`` records, health, attach, stop.

``ktest up`` starts :mod:`ktest.backends.bare.daemon` in its own session; the daemon
runs a :class:`ControlPlane` (whose processes are bound to the daemon, not to
``ktest up``) and writes a record to
``${XDG_STATE_HOME:-~/.local/state}/ktest/up/<name>.json`` once it is ready.
A test session with reuse enabled attaches to a compatible record (same
Kubernetes version and controllers) and never stops it. A record whose daemon
is gone or whose API server does not answer ``/readyz`` is stale: it is
removed (and its daemon, if still there, stopped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import filelock

from ktest.backends.state import state_directory as backend_state_directory
from ktest.base.process import end_popen
from ktest.base.procfs import Holder, private_directory, write_private_file
from ktest.config import Settings
from ktest.controller_names import short_name
from ktest.errors import ConfigError, ControlPlaneError
from ktest.sessions.backend import ClusterShare

if TYPE_CHECKING:
    from ktest.sessions.attached import AttachedBackend

DEFAULT_NAME = "default"
DAEMON_MODULE = "ktest.backends.bare.daemon"
_READY_ATTEMPTS = 3


def state_directory(env: Mapping[str, str] | None = None) -> Path:
    """``${XDG_STATE_HOME:-~/.local/state}/ktest/up``."""
    return backend_state_directory("up", env)


def fingerprint(requested_version: str | None, controllers: Sequence[str], nodes: int = 0) -> str:
    """A short hash of the settings a warm control plane must share with a test run."""
    asked: dict[str, Any] = {
        "version": requested_version or "latest",
        "controllers": _same_names(controllers),
    }
    if nodes:
        asked["nodes"] = nodes
    text = json.dumps(asked)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _same_names(controllers: Sequence[str]) -> list[str]:
    """``garbage-collector-controller`` and ``garbagecollector`` alike, sorted."""
    return sorted(short_name(name) for name in controllers)


@dataclass(frozen=True)
class UpRecord:
    """One warm control plane: the daemon's pid, what was asked for, and how to attach."""

    name: str
    pid: int
    pid_start: str
    requested_version: str | None
    controllers: tuple[str, ...]
    started_at: float
    share: ClusterShare
    path: Path
    nodes: int = 0

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.requested_version, self.controllers, self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "requested_version": self.requested_version,
            "controllers": list(self.controllers),
            "nodes": self.nodes,
            "fingerprint": self.fingerprint,
            "started_at": self.started_at,
            "kubeconfig": self.share.kubeconfig,
            "version": self.share.version,
            "directory": self.share.directory,
            "share": self.share.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path) -> UpRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            pid_start=str(data["pid_start"]),
            requested_version=data.get("requested_version"),
            controllers=tuple(data.get("controllers") or ()),
            started_at=float(data.get("started_at") or 0.0),
            share=ClusterShare.from_json(dict(data["share"])),
            path=path,
            nodes=int(data.get("nodes") or 0),
        )

    @property
    def holder(self) -> Holder:
        """The daemon (``pid``/``pid_start`` in the record, as older ktest versions wrote them)."""
        return Holder(self.pid, self.pid_start)

    def daemon_alive(self) -> bool:
        return self.holder.alive()

    def problem(self) -> str | None:
        """Why this record is stale, or None when its control plane is up and ready."""
        if not self.daemon_alive():
            return f"its daemon (pid {self.pid}) is gone"
        for attempt in range(_READY_ATTEMPTS):
            if _apiserver_ready(self.share):
                return None
            if attempt + 1 < _READY_ATTEMPTS:
                time.sleep(0.5)
        return f"its API server {_server(self.share)} does not answer /readyz"

    def compatible_with(self, settings: Settings) -> bool:
        """Same controllers (by their short or long names) and simulated nodes, and the version the
        settings ask for."""
        if _same_names(self.controllers) != _same_names(settings.controllers):
            return False
        if self.nodes != (getattr(settings, "nodes", None) or 0):
            return False
        if settings.k8s_version is None:
            return self.requested_version is None
        from ktest.assets.selectors import parse_selector

        return settings.k8s_version == self.requested_version or parse_selector(settings.k8s_version).matches(
            self.share.version
        )

    def summary(self) -> str:
        controllers = ",".join(self.controllers) or "none"
        uptime = _duration(time.time() - self.started_at)
        nodes = f", {self.nodes} simulated nodes" if self.nodes else ""
        return (
            f"{self.name}: Kubernetes {self.share.version} at {_server(self.share)}, "
            f"controllers {controllers}{nodes}, pid {self.pid}, up {uptime}\n"
            f"  kubeconfig: {self.share.kubeconfig}"
        )


def record_path(name: str, directory: Path | None = None) -> Path:
    _check_name(name)
    return (directory or state_directory()) / f"{name}.json"


def read_record(path: Path) -> UpRecord | None:
    """The record at ``path``; None if absent or unreadable (a half-written or foreign file)."""
    try:
        return UpRecord.from_json(json.loads(path.read_text()), path)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(record: UpRecord) -> None:
    """Write atomically (readers never see half a record), 0600 in a 0700 directory."""
    private_state_directory(record.path.parent)
    write_private_file(record.path, (json.dumps(record.to_json(), indent=2) + "\n").encode())


def private_state_directory(directory: Path) -> Path:
    """``directory`` (``.../ktest/up``) created 0700, its parent ``ktest`` too; one an older
    ktest made 0755 is made 0700 (only if this user owns it)."""
    private_directory(directory)
    for path in (directory.parent, directory):
        with contextlib.suppress(OSError):
            stat = os.lstat(path)
            if stat.st_uid == os.getuid() and stat.st_mode & 0o077 and path.is_dir():
                os.chmod(path, 0o700)
    return directory


def list_records(directory: Path | None = None) -> list[UpRecord]:
    """Every readable record, ``default`` first."""
    directory = directory or state_directory()
    records = [record for path in sorted(directory.glob("*.json")) if (record := read_record(path))]
    return sorted(records, key=lambda record: (record.name != DEFAULT_NAME, record.name))


def find_compatible(settings: Settings, directory: Path | None = None) -> tuple[UpRecord | None, list[str]]:
    """A ready record compatible with ``settings``, and notes on stale records removed on the way."""
    notes: list[str] = []
    for record in list_records(directory):
        if not record.daemon_alive():
            remove_stale(record, notes)
            continue
        if not record.compatible_with(settings):
            continue
        if record.problem() is None:
            return record, notes
        remove_stale(record, notes)
    return None, notes


def remove_stale(record: UpRecord, notes: list[str]) -> None:
    """Stop a stale record's daemon (if still there) and delete the record."""
    with _lock(record.path):
        current = read_record(record.path)
        if current is None or current.holder != record.holder:
            return  # someone else cleaned or replaced it meanwhile
        reason = current.problem()
        if reason is None:
            return
        _discard(current)
        notes.append(f"removed stale warm control plane {current.name!r}: {reason}")


def attach(record: UpRecord) -> AttachedBackend:
    """A backend on a warm control plane; closing it leaves the control plane running."""
    from ktest.sessions.attached import AttachedBackend  # the cluster client: not for `ktest status`

    share = record.share
    description = f"warm control plane {record.name!r} (ktest up, pid {record.pid}): {share.description}"
    return AttachedBackend(dataclasses.replace(share, description=description), name="reuse")


def up(
    *,
    name: str = DEFAULT_NAME,
    k8s_version: str | None = None,
    controllers: Sequence[str] = ("garbagecollector", "namespace"),
    directory: Path | None = None,
    timeout: float = 600.0,
    run_dir: Path | None = None,
    nodes: int = 0,
) -> tuple[UpRecord, bool]:
    """Start a warm control plane in a background daemon; return (record, started_now).

    A running compatible one with the same name is returned as is.
    """
    path = record_path(name, directory)
    with _lock(path):
        existing = read_record(path)
        if existing is not None:
            if existing.problem() is not None:
                _discard(existing)
            elif existing.fingerprint == fingerprint(k8s_version, controllers, nodes):
                return existing, False
            else:
                raise ConfigError(
                    f"a warm control plane named {name!r} already runs with other settings "
                    f"(Kubernetes {existing.requested_version or 'latest'}, controllers "
                    f"{','.join(existing.controllers) or 'none'}, {existing.nodes} simulated nodes); "
                    f"stop it with `ktest down --name {name}` "
                    "or start this one under another --name"
                )
        return _start_daemon(path, name, k8s_version, tuple(controllers), timeout, run_dir, nodes), True


def down(record: UpRecord, timeout: float = 30.0) -> bool:
    """Stop a warm control plane (SIGTERM to its daemon, wait), remove its record and
    what a dead daemon left (its socket directory); True if the daemon was running."""
    with _lock(record.path):
        was_running = record.daemon_alive()
        _stop_daemon(record, timeout=timeout)
        current = read_record(record.path)
        if current is None or current.pid == record.pid:
            record.path.unlink(missing_ok=True)
        _remove_leftovers(record)
    return was_running


def _discard(record: UpRecord) -> None:
    """Stop a stale record's daemon (if still there), remove the record and what the daemon left."""
    _stop_daemon(record, timeout=15.0)
    record.path.unlink(missing_ok=True)
    _remove_leftovers(record)


def _remove_leftovers(record: UpRecord) -> None:
    """What a daemon killed with SIGKILL could not remove itself."""
    from ktest.sessions.shared import remove_share_of_dead_holder

    remove_share_of_dead_holder(record.share.control_address)
    if record.share.directory and not record.daemon_alive():
        from ktest.base import holders, janitor

        directory = Path(record.share.directory)
        if directory.is_dir() and holders.holder_is_dead(directory):
            janitor.kill_and_remove(directory, remove=True, timeout=5.0)


# -------------------------------------------------------------------- internals


def _start_daemon(
    path: Path,
    name: str,
    k8s_version: str | None,
    controllers: tuple[str, ...],
    timeout: float,
    run_dir: Path | None,
    nodes: int = 0,
) -> UpRecord:
    from ktest.base.process import read_tail

    log = path.with_suffix(".log")
    command = [sys.executable, "-m", DAEMON_MODULE, "--record", str(path), "--name", name]
    command += ["--controllers", ",".join(controllers) or "none"]
    if k8s_version:
        command += ["--k8s-version", k8s_version]
    if run_dir is not None:
        command += ["--run-dir", str(run_dir)]
    if nodes:
        command += ["--nodes", str(nodes)]
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(log_fd, 0o600)  # one an older ktest created 0644
    with os.fdopen(log_fd, "wb") as log_file:
        # Own session: a Ctrl-C in the terminal does not reach it, and it outlives `ktest up`.
        daemon = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )

    def failed(what: str) -> ControlPlaneError:
        return ControlPlaneError(
            f"the warm control plane {name!r} {what}.\n"
            f"--- {log} ---\n{read_tail(log) or '(empty log)'}\n--- end of log ---"
        )

    deadline = time.monotonic() + timeout
    while True:
        record = read_record(path)
        if record is not None and record.pid == daemon.pid:
            return record
        if daemon.poll() is not None:
            raise failed(f"failed to start (exit status {daemon.returncode})")
        if time.monotonic() > deadline:
            end_popen(daemon, 30)
            raise failed(f"was not ready after {timeout:.0f}s; stopped it")
        time.sleep(0.05)


def _stop_daemon(record: UpRecord, timeout: float) -> None:
    """SIGTERM the daemon (only if it really is the recorded ktest daemon), wait, then SIGKILL."""
    if not _is_daemon(record):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while record.daemon_alive():
        _reap(record.pid)
        if time.monotonic() > deadline:
            # SIGKILL of the daemon takes its control plane down too (parent-death signal, janitor).
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
        time.sleep(0.05)
    _reap(record.pid)


def _reap(pid: int) -> None:
    """Collect the daemon's exit status when it is our own child (``ktest up`` run in-process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _is_daemon(record: UpRecord) -> bool:
    if not record.daemon_alive():
        return False
    try:
        command_line = Path(f"/proc/{record.pid}/cmdline").read_bytes()
    except OSError:
        return False
    return DAEMON_MODULE.encode() in command_line


def _apiserver_ready(share: ClusterShare) -> bool:
    """``/readyz`` without the bootstrap hooks: the daemon recorded the plane only once it was
    ready, and on etcd-template data that readiness comes before the hooks' fixed-second timer
    (a full ``/readyz`` right after ``ktest up`` could call a live plane stale)."""
    from ktest.controlplane.apiserver import READYZ_WITHOUT_BOOTSTRAP_HOOKS, ApiServerClient

    if not share.directory:
        return False
    certs = Path(share.directory) / "certs"
    port = urlparse(_server(share)).port
    if port is None:
        return False
    try:
        client = ApiServerClient(port, certs / "ca.crt", certs / "admin.crt", certs / "admin.key")
    except (OSError, ValueError):
        return False  # the certificates are gone with the control plane's directory
    status, _ = client.get(READYZ_WITHOUT_BOOTSTRAP_HOOKS)
    return status == 200


def _server(share: ClusterShare) -> str:
    import yaml

    try:
        config = yaml.safe_load(Path(share.kubeconfig).read_text())
        return str(config["clusters"][0]["cluster"]["server"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return "(kubeconfig gone)"


def _lock(path: Path) -> filelock.FileLock:
    private_state_directory(path.parent)
    return filelock.FileLock(str(path.with_suffix(".lock")), timeout=120, mode=0o600)


def _check_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ConfigError(
            f"{name!r} is not a valid name for a warm control plane; use letters, digits, '-', '_' or '.'"
        )


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
