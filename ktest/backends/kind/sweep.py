"""Remove the kind clusters ktest left behind: owner killed (kill -9, crash) and not kept.

Runs before the kind backend creates a cluster, and from ``ktest down``; only clusters with a
ktest record count (:mod:`ktest.backends.kind.records`). A ready spare of the warm pool is
taken first (:func:`~ktest.backends.kind.records.take_spare`), so that a run claiming it at the
same moment keeps it.
"""

from __future__ import annotations

from pathlib import Path

from ktest.backends.kind import records
from ktest.backends.kind.cluster import delete_cluster, existing_clusters
from ktest.backends.kind.records import ClusterRecord
from ktest.errors import KindError


def sweep_orphans(
    kind: Path, *, records_dir: Path | None = None, include_kept: bool = False, only: str | None = None
) -> list[str]:
    """Delete orphaned ktest clusters (and records of clusters that no longer exist).

    Returns one line per removal, for the user. ``include_kept`` also removes
    kept clusters (``ktest down --kind``); ``only`` limits the kept ones removed to that name.
    """
    notes: list[str] = []
    present = set(existing_clusters(kind))
    for record in records.list_records(records_dir):
        if only is not None and record.kept and record.name != only:
            continue
        if record.ready_spare:
            gone = record.name not in present
            if gone or record.spare_expired() or include_kept:
                notes += delete_spare(kind, record, records_dir, gone=gone)
            continue
        if record.name not in present:
            if record.orphaned() or include_kept:
                records.forget(record, records_dir)
                notes.append(f"forgot kind cluster {record.name}: it no longer exists")
            continue
        if record.orphaned() or (include_kept and not record.holder_alive()):
            why = "kept by `ktest up`" if record.kept else f"its owner (pid {record.owner_pid}) is gone"
            try:
                delete_cluster(kind, record, records_dir)
            except KindError as error:
                notes.append(f"could not delete orphaned kind cluster {record.name} ({why}): {error}")
                continue
            notes.append(f"deleted kind cluster {record.name}: {why}")
    return notes


def delete_spare(
    kind: Path, record: ClusterRecord, records_dir: Path | None = None, *, gone: bool = False
) -> list[str]:
    """Take the ready spare ``record`` and delete it; a line for the user (none if a run claimed it first)."""
    if gone:
        why = "a spare whose node containers are gone"
    elif record.spare_expired():
        why = f"a spare unclaimed for over {records.SPARE_MAX_AGE / 3600:.0f} h"
    else:
        why = "a spare of the warm pool"
    taken = records.take_spare(record.name, purpose="sweep", directory=records_dir)
    if taken is None:
        return []  # claimed by a run meanwhile: that run deletes it
    try:
        delete_cluster(kind, taken, records_dir)
    except KindError as error:
        return [f"could not delete kind cluster {record.name} ({why}): {error}"]
    return [f"deleted kind cluster {record.name}: {why}"]
