"""Which kind clusters ktest created, who owns them, and the sweep of orphans.

kind labels its node containers only with ``io.x-k8s.kind.cluster=<name>``,
so a name alone cannot prove a cluster is ktest's. Before creating a cluster
ktest writes a record ``${XDG_STATE_HOME:-~/.local/state}/ktest/kind/<name>.json``
naming the owning process (pid + kernel start time, so a reused pid does not
count) and the cluster's private directory. A cluster is ktest's when its
name starts with ``ktest-`` **and** such a record exists; an orphan is one
whose owner is gone and which was not kept on purpose (``ktest up``,
``--ktest-keep-cluster``). Clusters without a record are never touched.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ktest.base.procfs import process_alive, process_start_time
from ktest.errors import KindError

CLUSTER_PREFIX = "ktest-"
MAX_NAME_LENGTH = 40  # node containers are named <cluster>-control-plane, <cluster>-worker2, ...


def records_directory(env: Mapping[str, str] | None = None) -> Path:
    """``${XDG_STATE_HOME:-~/.local/state}/ktest/kind``."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base).expanduser() / "ktest" / "kind"


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

    @property
    def kubeconfig(self) -> Path:
        return Path(self.directory) / "admin.kubeconfig"

    def holder_alive(self) -> bool:
        return process_alive(self.owner_pid, self.owner_start)

    def orphaned(self) -> bool:
        """Not kept and its owner is gone: nobody will ever delete it but the sweep."""
        return not self.kept and not self.holder_alive()

    def path(self, directory: Path | None = None) -> Path:
        return (directory or records_directory()) / f"{self.name}.json"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def owned_by_this_process(
    name: str, directory: Path, image: str, version: str, purpose: str = "run"
) -> ClusterRecord:
    pid = os.getpid()
    return ClusterRecord(
        name=name,
        directory=str(directory),
        image=image,
        version=version,
        owner_pid=pid,
        owner_start=process_start_time(pid) or "",
        purpose=purpose,
        created_at=time.time(),
    )


def write_record(record: ClusterRecord, directory: Path | None = None) -> Path:
    """Write atomically (readers never see half a record)."""
    path = record.path(directory)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(record.to_json(), indent=2) + "\n")
    os.replace(partial, path)
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
    found = []
    for path in sorted(directory.glob(f"{CLUSTER_PREFIX}*.json")):
        record = read_record(path.stem, directory)
        if record is not None:
            found.append(record)
    return found


def remove_record(record: ClusterRecord, directory: Path | None = None) -> None:
    record.path(directory).unlink(missing_ok=True)
