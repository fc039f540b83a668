"""Things a process holds (directories, clusters), swept once that process is dead.

The record of a holder (:class:`Holder`: pid and kernel start time), its liveness and the
private-file writer live in :mod:`ktest.base.procfs` (standard library only, shared with the
janitor script). Whoever creates something that must not outlive its creator records
:func:`write_holder` with it; :func:`ktest.base.janitor.sweep_leftovers` (a session's start,
``ktest down``) removes what dead holders left. ``kill -9`` of the holder leaves no chance to
clean up in-process, which is why the sweeping happens later, from the outside.

Used for the ``ktest-cp-*`` control-plane directories, the ``ktest-share-*`` socket directories
and the ``ktest-cluster-*``, ``ktest-webhooks-*``, ``ktest-operator-*`` and ``ktest-proxy-*``
scratch directories in ``$TMPDIR``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ktest.base.procfs import (
    HOLDER_FILE,
    Holder,
    own_directory,
    process_namespace,
    read_holder,
    write_holder,
)

__all__ = [
    "HOLDER_FILE",
    "Holder",
    "held_directory",
    "holder_is_dead",
    "process_namespace",
    "read_holder",
    "sweep",
    "sweep_temp",
    "write_holder",
]

# A Cluster's scratch directory in $TMPDIR (the dynamic client's discovery cache).
CLUSTER_SCRATCH_PREFIX = "ktest-cluster-"
# Directories in $TMPDIR that a killed process leaves behind, holder recorded: a webhook set's
# (its serving key), an operator's log directory and its API proxy's (the proxy's key), swept
# by the next start and `ktest down`.
WEBHOOKS_PREFIX = "ktest-webhooks-"
OPERATOR_LOG_PREFIX = "ktest-operator-"
OPERATOR_PROXY_PREFIX = "ktest-proxy-"  # ktest.proxy.operator_proxy.DIRECTORY_PREFIX
TEMP_PREFIXES = (CLUSTER_SCRATCH_PREFIX, WEBHOOKS_PREFIX, OPERATOR_LOG_PREFIX, OPERATOR_PROXY_PREFIX)
# Something without an owner file yet may be being created right now: leave it this long.
UNHELD_GRACE_SECONDS = 60.0


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def holder_is_dead(directory: Path, unheld_is_dead: Callable[[Path], bool] | None = None) -> bool:
    """True when ``directory``'s recorded holder is gone.

    Without a holder file, ``unheld_is_dead(directory)`` decides (e.g. "its socket
    refuses connections"), but only once the directory is older than
    :data:`UNHELD_GRACE_SECONDS` (its creator may be about to write the file).
    """
    holder = read_holder(directory)
    if holder is not None:
        return not holder.alive()
    if unheld_is_dead is None or _age(directory) < UNHELD_GRACE_SECONDS:
        return False
    return unheld_is_dead(directory)


def sweep(
    base: Path,
    prefix: str,
    *,
    unheld_is_dead: Callable[[Path], bool] | None = None,
    remove: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Remove this user's entries ``base/prefix*`` whose holder is dead; return what was removed.

    ``remove`` defaults to deleting the directory tree; pass another to also stop what the
    entry stands for (a control plane's processes), or to leave it (kept on purpose). Entries
    of other users, symlinks and anything that fails to be read are skipped: a sweep is
    housekeeping and never fails the caller.
    """
    removed: list[Path] = []
    try:
        entries = sorted(base.glob(f"{prefix}*"))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not own_directory(entry) or not holder_is_dead(entry, unheld_is_dead):
                continue
            (remove or _remove_tree)(entry)
        except OSError:
            continue
        if not entry.exists():
            removed.append(entry)
    return removed


def _remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def sweep_temp(base: Path | None = None) -> list[Path]:
    """Sweep every :data:`TEMP_PREFIXES` directory of a dead holder (of this user) in ``base``
    (default: the temp directory); never raises."""
    directory = base or Path(tempfile.gettempdir())
    return [removed for prefix in TEMP_PREFIXES for removed in sweep(directory, prefix)]


def held_directory(prefix: str, unheld_is_dead: Callable[[Path], bool] | None = None) -> Path:
    """A new 0700 ``prefix*`` directory in the temp directory, held by this process; what dead
    holders left under the same prefix is swept first (``unheld_is_dead``: see :func:`holder_is_dead`).

    For things made on demand, outside a session's start (a Cluster's scratch directory, a
    webhook set's key, an operator proxy's): a library user without the pytest plugin gets
    them swept too.
    """
    base = Path(tempfile.gettempdir())
    sweep(base, prefix, unheld_is_dead=unheld_is_dead)
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    write_holder(directory)
    return directory
