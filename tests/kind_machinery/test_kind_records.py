"""kind cluster records (ktest/backends/kind/records.py): private and whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ktest.backends.kind import records


def test_a_record_is_private_whatever_the_umask_and_never_half_written(tmp_path: Path) -> None:
    directory = tmp_path / "state" / "ktest" / "kind"
    record = records.held_by_this_process("ktest-run-abc123", tmp_path / "cluster", "img", "1.37.2")
    old_umask = os.umask(0o022)
    try:
        path = records.write_record(record, directory)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    for parent in (directory, directory.parent, directory.parent.parent):
        assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700, parent
    assert records.read_record("ktest-run-abc123", directory) == record
    assert sorted(p.name for p in directory.iterdir()) == ["ktest-run-abc123.json"]  # no partial file


def test_deleting_a_held_cluster_forgets_its_record_where_it_was_written(
    tmp_path: Path, kind_binary: Path
) -> None:
    """A cluster recorded outside the default directory (the pool's, a test's) loses its record
    there when deleted, not in the default directory."""
    from ktest.backends.kind.cluster import KindCluster

    directory = tmp_path / "records"
    record = records.held_by_this_process("ktest-run-gone0001", tmp_path / "cluster", "img", "1.37.2")
    (tmp_path / "cluster").mkdir()
    path = records.write_record(record, directory)
    cluster = KindCluster.held(record, kind_binary, path)  # no such kind cluster: deleting it is a no-op
    cluster.delete()
    assert not path.exists()
    assert not (tmp_path / "cluster").exists()


FAILING_KIND = """#!/bin/sh
# kind, as far as create_cluster needs it: no clusters yet, `create` fails, `delete` has nothing to do.
case "$1" in
  get|delete) exit 0 ;;
  create) exit 1 ;;
esac
"""


def test_a_cluster_created_without_a_name_is_named_for_its_purpose(tmp_path: Path) -> None:
    """The kind backend and the pool's filler leave the name to ``create_cluster``:
    ``ktest-<purpose>-<6 hex digits>``, the form every sweep and ``ktest down`` recognise."""
    import re

    from kind_stand_in import failed_create

    error = failed_create(tmp_path, FAILING_KIND, purpose="spare")
    named = r"creating kind cluster ktest-spare-[0-9a-f]{6} \(image ktest/node:none\): "
    assert re.match(named, str(error)), str(error)
    assert records.list_records(tmp_path / "records") == []  # the failed cluster's record is gone
