"""One child process of the control plane, bound to the life of the Python process.

Every component runs in its own session (so its process group can be signalled
as a whole) and receives SIGKILL from the kernel when its parent dies
(``PR_SET_PDEATHSIG``). That signal fires when the *thread* that forked the
child exits, so every child is forked from one long-lived daemon thread
(:func:`spawn`) instead of the caller's thread, which may be a short-lived
worker (pytest-xdist, operators, asyncio executors).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ktest.base.procfs import private_directory
from ktest.errors import ControlPlaneError

_PR_SET_PDEATHSIG = 1
LOG_TAIL_LINES = 40

# Variables the control plane's programs read as configuration, which the test process's
# environment must not pass on to them: etcd maps every flag to ETCD_<FLAG> (an
# ETCD_LISTEN_METRICS_URLS opened a plain-HTTP listener), etcdctl reads ETCDCTL_*, client-go
# (in kube-apiserver and kube-controller-manager) reads KUBECONFIG, KUBERNETES_SERVICE_* (the
# in-cluster config) and KUBE_* (feature gates, debugging detectors).
SCRUBBED_PREFIXES = ("ETCD_", "ETCDCTL_", "KUBERNETES_", "KUBE_")
SCRUBBED_NAMES = frozenset({"KUBECONFIG"})
REAP_TIMEOUT = 30.0
"""Seconds a child may take to end after SIGKILL (more: it is stuck in the kernel, state D)."""
SPAWN_TIMEOUT = 120.0
"""Seconds the spawner thread may take to start one child (fork and exec)."""


def end_popen(process: subprocess.Popen[Any], grace: float) -> None:
    """End a child of ours: SIGTERM, up to ``grace`` seconds, then SIGKILL; reaped either way."""
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        args = process.args
        reap_killed(process, shlex.join(map(str, args)) if isinstance(args, (list, tuple)) else str(args))


def reap_killed(process: subprocess.Popen[Any], name: str) -> None:
    """Reap ``process`` (``name``: what it runs) after SIGKILL, within :data:`REAP_TIMEOUT`."""
    try:
        process.wait(REAP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ControlPlaneError(
            f"{name} (pid {process.pid}) did not end {REAP_TIMEOUT:g} s after SIGKILL: it is stuck in "
            "the kernel (state D in `ps`; a hung file system or device), and is left behind"
        ) from None


def component_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without the variables that would
    configure etcd, kube-apiserver or kube-controller-manager behind ktest's flags."""
    source = os.environ if base is None else base
    return {
        name: value
        for name, value in source.items()
        if name not in SCRUBBED_NAMES and not name.upper().startswith(SCRUBBED_PREFIXES)
    }


def open_private_log(path: Path) -> Any:
    """``path`` opened for appending, created 0600 in a 0700 directory (logs can hold secrets)."""
    private_directory(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "ab")


class _Spawner:
    """A daemon thread that runs every ``Popen`` so that parent-death signals
    are tied to the process, not to whichever thread asked for the child."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._jobs = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ktest-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as error:
                future.set_exception(error)

    def call(self, job: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((job, future))
        from ktest.base.bounded import future_result

        what = "the spawner thread to start a child process"
        return future_result(future, SPAWN_TIMEOUT, what, ControlPlaneError)


_spawner_lock = threading.Lock()
_spawner_by_pid: dict[int, _Spawner] = {}


def _spawner() -> _Spawner:
    # Keyed by pid: after os.fork() the child has no spawner thread and needs its own.
    with _spawner_lock:
        spawner = _spawner_by_pid.get(os.getpid())
        if spawner is None:
            spawner = _spawner_by_pid[os.getpid()] = _Spawner()
        return spawner


@functools.lru_cache(maxsize=1)
def _prctl() -> Any:
    # CDLL(None) is the running program, which links libc: no library search needed.
    return ctypes.CDLL(None, use_errno=True).prctl


def _parent_death_hook(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` that asks the kernel to SIGKILL the child when the parent dies."""
    prctl = _prctl()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return hook


def spawn(
    command: Sequence[str],
    *,
    stdout: Any,
    stderr: Any = subprocess.STDOUT,
    stdin: Any = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    bind_to_parent: bool = True,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a new session from the long-lived spawner thread.

    With ``bind_to_parent`` the child is killed by the kernel when this
    process dies, even by SIGKILL.
    """
    arguments: dict[str, Any] = {
        "stdin": stdin,
        "stdout": stdout,
        "stderr": stderr,
        "env": dict(env) if env is not None else None,
        "cwd": cwd,
        "start_new_session": True,
        "close_fds": True,
    }
    if bind_to_parent:
        return popen_bound(command, **arguments)
    return _spawner().call(lambda: subprocess.Popen(list(command), **arguments))


def run_captured(
    command: Sequence[str], *, timeout: float, check: bool = False, **run_arguments: Any
) -> subprocess.CompletedProcess[str]:
    """Run a short command for what it prints: no standard input, its output and errors captured
    as text, killed after ``timeout`` seconds (``subprocess.run``'s errors are the caller's)."""
    return subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, check=check,
        stdin=subprocess.DEVNULL, **run_arguments,
    )


def popen_bound(command: Sequence[str], **popen_arguments: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **popen_arguments)`` for a helper that must not outlive this
    process (e.g. ``kubectl port-forward``): forked from the long-lived spawner thread with a
    parent-death SIGKILL, so neither ``kill -9`` of this process nor the end of the calling
    thread leaves it running (unlike :func:`spawn`, the caller's session and stdio choices stay)."""
    hook = _parent_death_hook(os.getpid())
    return _spawner().call(lambda: subprocess.Popen(list(command), preexec_fn=hook, **popen_arguments))


def read_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' if it does not exist)."""
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - 64 * 1024))
            data = file.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


class ManagedProcess:
    """A control-plane component: command line, log file, start, readiness, stop."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        # Size of the log when the current run started: restarts append to the same file.
        self.log_offset = 0
        # Said after the log's path in errors, e.g. that the file will be removed.
        self.log_note = ""

    # -- state -------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return read_tail(self.log_path, lines)

    def log_since_start(self) -> bytes:
        """What the current run has written to the log so far."""
        try:
            with self.log_path.open("rb") as file:
                file.seek(self.log_offset)
                return file.read()
        except OSError:
            return b""

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        """Launch the process, appending its stdout and stderr to the log file."""
        if self.running:
            raise ControlPlaneError(f"{self.name} is already running (pid {self.pid}).")
        with open_private_log(self.log_path) as log:
            self.log_offset = log.tell()
            try:
                self._popen = spawn(self.command, stdout=log, env=self.env, cwd=self.cwd)
            except OSError as error:
                raise ControlPlaneError(
                    f"{self.name} could not be started: {error}.\n"
                    f"Command: {self.command_line}\n"
                    f"Check that {self.command[0]} exists and is an executable for this machine."
                ) from error

    def failure(self, what: str, how_to_fix: str = "") -> ControlPlaneError:
        """An error naming the component, its command line, exit status and log tail."""
        code = self.returncode
        if code is None:
            status = "still running" if self._popen else "never started"
        elif code < 0:
            status = f"killed by signal {signal.Signals(-code).name}"
        else:
            status = f"exit status {code}"
        tail = self.log_tail() or "(empty log)"
        fix = f"\n{how_to_fix}" if how_to_fix else ""
        return ControlPlaneError(
            f"{self.name} {what} ({status}).\n"
            f"Command: {self.command_line}\n"
            f"Log: {self.log_path}{' ' + self.log_note if self.log_note else ''}\n"
            f"--- last lines of the log ---\n{tail}\n--- end of log ---{fix}"
        )

    def wait_until(
        self,
        ready: Callable[[], bool],
        *,
        timeout: float,
        interval: float = 0.025,
        what: str = "ready",
    ) -> None:
        """Poll ``ready()`` until true; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise self.failure(f"exited before it was {what}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise self.failure(f"was not {what} after {timeout:.0f} s")
            time.sleep(interval)

    def terminate(self) -> None:
        """Send SIGTERM to the whole process group without waiting (see :meth:`stop`)."""
        self._signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; reaps the child."""
        popen = self._popen
        if popen is None or popen.returncode is not None:
            return
        self._signal_group(signal.SIGTERM)
        self._exited_unreaped(timeout)
        # SIGKILL whether it exited or not: until reaped the child is a zombie whose pid (the
        # group id) cannot be reused, so anything it forked into its group goes down safely with it.
        self._signal_group(signal.SIGKILL)
        reap_killed(popen, self.name)

    def kill(self) -> None:
        """SIGKILL the process group and reap the child."""
        popen = self._popen
        if popen is None or popen.returncode is not None:
            return
        self._signal_group(signal.SIGKILL)
        reap_killed(popen, self.name)

    def _exited_unreaped(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the child to exit, leaving it unreaped."""
        assert self._popen is not None
        deadline = time.monotonic() + timeout
        delay = 0.002
        while time.monotonic() <= deadline:
            try:
                if os.waitid(os.P_PID, self._popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return
            except ChildProcessError:  # already reaped elsewhere
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _signal_group(self, signum: int) -> None:
        popen = self._popen
        if popen is None or popen.returncode is not None:
            return  # reaped: its group id may already belong to someone else
        # start_new_session makes the child a group leader: its pgid is its pid.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signum)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid}, running={self.running})"
