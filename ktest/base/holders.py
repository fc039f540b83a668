"""Things a process owns (directories, clusters), swept once that process is dead.

An owner is a pid *and* the kernel's start time of that pid, so a reused pid
never passes for the owner. Whoever creates something that must not outlive
its creator records :func:`Holder.current` with it; the next start (or
``ktest down``) calls :func:`sweep` and removes what dead owners left.
``kill -9`` of the owner leaves no chance to clean up in-process, which is
why the sweeping happens later, from the outside.

Used for the ``ktest-share-*`` socket directories and the ``ktest-cluster-*``
scratch directories; usable for anything named by a prefix in a base
directory (e.g. kind clusters recorded in files).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ktest.base.procfs import own_directory, process_alive, process_start_time

HOLDER_FILE = "owner"
# A Cluster's scratch directory in $TMPDIR (the dynamic client's discovery cache).
CLUSTER_SCRATCH_PREFIX = "ktest-cluster-"
# Directories in $TMPDIR that a killed process leaves behind, owner recorded: a webhook set's
# (its serving key), an operator's log directory and its API proxy's (the proxy's key), swept
# by the next start and `ktest down`.
WEBHOOKS_PREFIX = "ktest-webhooks-"
OPERATOR_LOG_PREFIX = "ktest-operator-"
OPERATOR_PROXY_PREFIX = "ktest-proxy-"  # ktest.proxy.operator_proxy.DIRECTORY_PREFIX
TEMP_PREFIXES = (CLUSTER_SCRATCH_PREFIX, WEBHOOKS_PREFIX, OPERATOR_LOG_PREFIX, OPERATOR_PROXY_PREFIX)
# Something without an owner file yet may be being created right now: leave it this long.
UNHELD_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class Holder:
    """A process identified by pid and start time (no confusion with a reused pid)."""

    pid: int
    start_time: str

    @classmethod
    def current(cls) -> Holder:
        pid = os.getpid()
        return cls(pid, process_start_time(pid) or "")

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_time)

    def to_text(self) -> str:
        return f"{self.pid} {self.start_time}\n"

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        try:
            pid_text, start_time = text.split()
            return cls(int(pid_text), start_time)
        except ValueError:
            return None


def process_namespace() -> str:
    """Where a :class:`Holder` means something: this boot and this pid namespace
    (``<boot id>/pid:[<inode>]``), "" when unknown.

    A pid and its start time name one process only within one boot of one pid namespace:
    another machine, a container of its own, or this machine before a reboot may have run
    a different process under the same pid and start time. Records kept outside this
    machine (a namespace's annotation in a shared cluster) carry this next to the holder,
    and only records made here are judged.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pid_namespace}" if boot and pid_namespace else ""


def write_holder(directory: Path, owner: Holder | None = None) -> None:
    """Record ``owner`` (default: this process) as the owner of ``directory``."""
    from ktest.base.janitor import write_private_text

    write_private_text(directory / HOLDER_FILE, (owner or Holder.current()).to_text())


def read_holder(directory: Path) -> Holder | None:
    try:
        return Holder.from_text((directory / HOLDER_FILE).read_text())
    except OSError:
        return None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def holder_is_dead(directory: Path, unowned: Callable[[Path], bool] | None = None) -> bool:
    """True when ``directory``'s recorded owner is gone.

    Without an owner file, ``unowned(directory)`` decides (e.g. "its socket
    refuses connections"), but only once the directory is older than
    :data:`UNHELD_GRACE_SECONDS` (its creator may be about to write the file).
    """
    owner = read_holder(directory)
    if owner is not None:
        return not owner.alive()
    if unowned is None or _age(directory) < UNHELD_GRACE_SECONDS:
        return False
    return unowned(directory)


def sweep(
    base: Path,
    prefix: str,
    *,
    unowned: Callable[[Path], bool] | None = None,
    remove: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Remove the entries ``base/prefix*`` whose owner is dead; return what was removed.

    ``remove`` defaults to deleting the directory tree; pass another to also
    stop what the entry stands for (a cluster, a daemon).
    """
    removed: list[Path] = []
    try:
        entries = sorted(base.glob(f"{prefix}*"))
    except OSError:
        return removed
    for entry in entries:
        if not own_directory(entry) or not holder_is_dead(entry, unowned):
            continue
        with contextlib.suppress(OSError):
            (remove or _remove_tree)(entry)
        if not entry.exists():
            removed.append(entry)
    return removed


def _remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def sweep_temp(base: Path | None = None) -> list[Path]:
    """Sweep every :data:`TEMP_PREFIXES` directory of a dead owner (of this user) in ``base``
    (default: the temp directory); never raises."""
    import tempfile

    directory = base or Path(tempfile.gettempdir())
    removed: list[Path] = []
    for prefix in TEMP_PREFIXES:
        removed += sweep(directory, prefix)
    return removed
