"""Cleans up after a control plane whose Python process died without stopping it.

After ``kill -9`` nothing runs in the Python process, so a tiny separate
process does the cleanup: it is started with a pipe on its stdin whose write
end only the owner holds. The owner tells it the control plane's directory;
when the pipe reaches end-of-file without a ``release`` line (the owner died),
the janitor SIGKILLs every process whose command line mentions that directory
(etcd, kube-apiserver and kube-controller-manager all do) and removes it.

This file is run as a script (``python -I -S janitor.py``) and imports only
the standard library, so it starts in a few milliseconds. The holder record it
judges by and the private-file writer come from :mod:`ktest.base.procfs`.
:func:`sweep_leftovers` is the one sweep of what dead holders left (a session's
start, ``ktest down``), through :mod:`ktest.base.holders`.

Protocol, one line each: ``dir <path>``, ``keep`` (do not remove the directory),
``on-death <argv, tab-separated>`` (a command line to run first, to its end: a backend's
clean-up rule, e.g. deleting the holder's cluster; the janitor knows no backend),
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
from collections.abc import Callable, Iterable  # loaded by contextlib already: no cost
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
process_alive = _PROCFS.process_alive
# Imported from here by the control plane's modules (one definition each, in procfs).
HOLDER_FILE: str = _PROCFS.HOLDER_FILE
write_holder = _PROCFS.write_holder
write_private_text = _PROCFS.write_private_file

KEEP_FILE = "keep"
DIRECTORY_PREFIX = "ktest-cp-"


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


def kill_and_remove(directory: Path, *, remove: bool, timeout: float = 10.0) -> None:
    """SIGKILL the processes using ``directory``, wait for them, then remove it."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in processes_mentioning(str(directory)) if process_alive(pid)]
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


def sweep_stale(base: Path) -> list[Path]:
    """Sweep the ``ktest-cp-*`` directories of dead holders in ``base``, SIGKILLing what still
    runs from them (etcd, kube-apiserver, kube-controller-manager) first; kept ones stay."""
    from ktest.base import holders

    return holders.sweep(base, DIRECTORY_PREFIX, remove=_kill_and_remove_unless_kept)


def _kill_and_remove_unless_kept(directory: Path) -> None:
    if not (directory / KEEP_FILE).exists():
        kill_and_remove(directory, remove=True, timeout=2.0)


def sweep_leftovers(
    control_plane_bases: Iterable[Path] = (),
    temp: Path | None = None,
    more: Iterable[Callable[[], list[Path]]] = (),
) -> list[Path]:
    """The one sweep of what dead ktest processes of this user left on this machine (a session's
    start, ``ktest down``): each of ``more`` first (a layer's own rule, e.g. the socket directories
    of :mod:`ktest.sessions.shared`), then the scratch directories in ``temp`` (default: the temp
    directory, :func:`ktest.base.holders.sweep_temp`), then the control-plane directories in each
    of ``control_plane_bases``. Returns what was removed; never raises."""
    from ktest.base import holders

    removed: list[Path] = []
    for extra in more:
        removed += extra()
    removed += holders.sweep_temp(temp)
    for base in sorted(set(control_plane_bases)):
        removed += sweep_stale(base)
    return removed


def run_on_death(argv: list[str]) -> None:
    """Run a holder's on-death command line to its end (a backend's clean-up rule, e.g. deleting
    its cluster); one that cannot start is skipped: the janitor has no one to tell."""
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", check=False,
        )


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    directory: Path | None = None
    keep = False
    on_death: list[list[str]] = []
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        command, _, argument = line.partition(" ")
        if command == "dir":
            directory = Path(argument)
        elif command == "keep":
            keep = True
        elif command == "on-death":
            on_death.append(argument.split("\t"))
        elif command == "release":
            return
    for argv in on_death:
        run_on_death(argv)
    if directory is not None:
        kill_and_remove(directory, remove=not keep)


if __name__ == "__main__":
    main()
