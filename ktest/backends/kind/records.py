"""Which kind clusters ktest created, who holds them, and which are orphans.

kind labels node containers only with ``io.x-k8s.kind.cluster=<name>``, so a name cannot prove
a cluster is ktest's: before creating one, ktest writes a record
``${XDG_STATE_HOME:-~/.local/state}/ktest/kind/<name>.json`` naming its holder (a
:class:`~ktest.base.procfs.Holder`: pid + kernel start time) and private directory. A cluster is
ktest's when its name starts with ``ktest-`` **and** it has a record; an orphan's holder is gone
and it was not kept on purpose. A spare of the warm pool (:mod:`ktest.backends.kind.pool`) is
held by its filler until usable, then kept until a run claims it (:func:`take_spare`) or it is
older than :data:`SPARE_MAX_AGE`.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import filelock

from ktest.backends.state import state_directory
from ktest.base.procfs import Holder, write_private_file
from ktest.errors import KindError

CLUSTER_PREFIX = "ktest-"
MAX_NAME_LENGTH = 40  # node containers are named <cluster>-control-plane, <cluster>-worker2, ...
SPARE_MAX_AGE = 24 * 3600.0
"""Seconds a spare waits to be claimed before the sweep deletes it (a day-old spare holds
memory for nothing, and its node image may have been rebuilt under the same tag)."""
POOL_LOCK = ".pool.lock"


def records_directory(env: Mapping[str, str] | None = None) -> Path:
    """``${XDG_STATE_HOME:-~/.local/state}/ktest/kind``."""
    return state_directory("kind", env)


def new_cluster_name(purpose: str = "run") -> str:
    """A fresh ``ktest-<purpose>-<random>`` name (unique across runs and machines sharing an engine)."""
    return f"{CLUSTER_PREFIX}{purpose}-{secrets.token_hex(3)}"


def check_cluster_name(name: str) -> None:
    """Raise KindError unless ``name`` is a name ktest may give to a cluster it creates."""
    valid = (
        name.startswith(CLUSTER_PREFIX)
        and len(name) <= MAX_NAME_LENGTH
        and all(c.islower() or c.isdigit() or c == "-" for c in name)
        and not name.endswith("-")
    )
    if not valid:
        raise KindError(
            f"{name!r} is not a name ktest gives to a kind cluster: it must start with "
            f"{CLUSTER_PREFIX!r} (so ktest never mistakes a cluster of yours for its own), use lower-case "
            f"letters, digits and '-', and be at most {MAX_NAME_LENGTH} characters"
        )


@dataclass(frozen=True)
class ClusterRecord:
    """One kind cluster ktest created.

    ``owner_pid``/``owner_start`` identify the process whose exit ends the
    cluster; ``kept`` clusters (``ktest up``, kept after a run) have no owner
    and live until ``ktest down``.
    """

    name: str
    directory: str
    image: str
    version: str
    owner_pid: int
    owner_start: str
    kept: bool = False
    purpose: str = "run"
    created_at: float = 0.0
    spare: str = ""
    """The pool fingerprint of a spare (:mod:`ktest.backends.kind.pool`); empty for every other cluster."""

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig with file references into the cluster's private (0700) directory."""
        return Path(self.directory) / "admin.kubeconfig"

    @property
    def holder(self) -> Holder:
        return Holder(self.owner_pid, self.owner_start)

    def holder_alive(self) -> bool:
        return self.holder.alive()

    def orphaned(self) -> bool:
        """Not kept and its owner is gone: nobody will ever delete it but the sweep."""
        return not self.kept and not self.holder_alive()

    @property
    def ready_spare(self) -> bool:
        """A finished spare waiting to be claimed (kept, with a fingerprint)."""
        return bool(self.spare) and self.kept

    def spare_expired(self, now: float | None = None) -> bool:
        """A ready spare older than :data:`SPARE_MAX_AGE`: the sweep deletes it."""
        age = (time.time() if now is None else now) - self.created_at
        return self.ready_spare and age > SPARE_MAX_AGE

    def path(self, directory: Path | None = None) -> Path:
        return (directory or records_directory()) / f"{self.name}.json"


def held_by_this_process(
    name: str, directory: Path, image: str, version: str, purpose: str = "run", spare: str = ""
) -> ClusterRecord:
    holder = Holder.current()
    return ClusterRecord(
        name=name,
        directory=str(directory),
        image=image,
        version=version,
        owner_pid=holder.pid,
        owner_start=holder.start_time,
        purpose=purpose,
        created_at=time.time(),
        spare=spare,
    )


def write_record(record: ClusterRecord, directory: Path | None = None) -> Path:
    """Write atomically (readers never see half a record), 0600 in a 0700 directory."""
    path = record.path(directory)
    write_private_file(path, (json.dumps(asdict(record), indent=2) + "\n").encode())
    return path


def read_record(name: str, directory: Path | None = None) -> ClusterRecord | None:
    path = (directory or records_directory()) / f"{name}.json"
    try:
        data = json.loads(path.read_text())
        return ClusterRecord(**{key: data[key] for key in data if key in ClusterRecord.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return None


def list_records(directory: Path | None = None) -> list[ClusterRecord]:
    directory = directory or records_directory()
    paths = sorted(directory.glob(f"{CLUSTER_PREFIX}*.json"))
    return [record for path in paths if (record := read_record(path.stem, directory)) is not None]


def forget(record: ClusterRecord, directory: Path | None = None) -> None:
    """Remove the cluster's private directory and its record."""
    shutil.rmtree(record.directory, ignore_errors=True)
    record.path(directory).unlink(missing_ok=True)


def pool_lock(directory: Path | None = None) -> filelock.FileLock:
    """The lock every change of a ready spare's record is made under (claims, sweeps, evictions).

    An flock: the kernel releases it when its holder dies, so a killed claimer never blocks the pool.
    """
    directory = directory or records_directory()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return filelock.FileLock(str(directory / POOL_LOCK), timeout=60)


def take_spare(name: str, purpose: str = "run", directory: Path | None = None) -> ClusterRecord | None:
    """Make this process the owner of the ready spare ``name``; None when it is no longer one.

    Atomic across processes: the record is re-read and rewritten under :func:`pool_lock`, so a
    spare is taken by exactly one claimer (or sweep), and one taken is an ordinary cluster of its
    new owner (deleted when it closes, an orphan if it dies).
    """
    with pool_lock(directory):
        record = read_record(name, directory)
        if record is None or not record.ready_spare:
            return None
        holder = Holder.current()
        taken = replace(
            record, kept=False, spare="", purpose=purpose, owner_pid=holder.pid, owner_start=holder.start_time
        )
        write_record(taken, directory)
        return taken
