"""One holder record for everything ktest holds (ktest.base.procfs.Holder): directories' owner
files, kind cluster records and ``ktest up`` records are judged by the same liveness rule, written
by the same private-file writer, and records written by earlier ktest versions still read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.backends.bare import reuse
from ktest.backends.kind import records
from ktest.base import holders, janitor
from ktest.base.procfs import Holder, process_start_time


@pytest.fixture
def zombie() -> Iterator[Holder]:
    """A child that has exited but is not reaped yet: its pid and start time are still in /proc."""
    child = subprocess.Popen(["true"])
    start_time = process_start_time(child.pid)
    assert start_time is not None
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        os.sched_yield()  # until the kernel marks it exited (it runs nothing)
    yield Holder(child.pid, start_time)
    child.wait()


def zombie_fields(holder: Holder) -> tuple[int, str]:
    return holder.pid, holder.start_time


def test_a_zombie_holder_is_dead_for_every_record(tmp_path: Path, zombie: Holder) -> None:
    """Before, the control-plane sweep compared start times only and kept a zombie's directory."""
    control_plane = tmp_path / f"{janitor.DIRECTORY_PREFIX}1-x"
    control_plane.mkdir(mode=0o700)
    holders.write_holder(control_plane, zombie)
    scratch = tmp_path / f"{holders.CLUSTER_SCRATCH_PREFIX}x"
    scratch.mkdir(mode=0o700)
    holders.write_holder(scratch, zombie)
    cluster = records.ClusterRecord("ktest-run-x", str(tmp_path), "img", "1.35", *zombie_fields(zombie))

    assert not zombie.alive() and cluster.orphaned()
    assert janitor.sweep_stale(tmp_path) == [control_plane]
    assert holders.sweep_temp(tmp_path) == [scratch]


def test_records_written_by_earlier_ktest_versions_name_the_same_holder(tmp_path: Path) -> None:
    """The field names stay as earlier versions wrote them; all read into one Holder."""
    me = Holder.current()
    kind_directory = tmp_path / "kind"
    kind_directory.mkdir()
    (kind_directory / "ktest-up-abc123.json").write_text(
        json.dumps(
            {"name": "ktest-up-abc123", "directory": str(tmp_path), "image": "kindest/node:v1.35.0",
             "version": "1.35.0", "owner_pid": me.pid, "owner_start": me.start_time, "kept": False,
             "purpose": "up", "created_at": 1.0, "spare": "", "a_field_of_a_later_version": 1}
        )
    )
    up_path = tmp_path / "default.json"
    share = {"kubeconfig": str(tmp_path / "kubeconfig"), "version": "1.35.0", "directory": str(tmp_path)}
    up_path.write_text(
        json.dumps(
            {"name": "default", "pid": me.pid, "pid_start": me.start_time, "requested_version": None,
             "controllers": ["namespace"], "started_at": 1.0, **share, "share": share}
        )
    )
    (tmp_path / holders.HOLDER_FILE).write_text(f"{me.pid} {me.start_time}\n")

    cluster = records.read_record("ktest-up-abc123", kind_directory)
    up = reuse.read_record(up_path)
    assert cluster is not None and up is not None
    assert cluster.holder == up.holder == holders.read_holder(tmp_path) == me
    assert cluster.holder_alive() and up.daemon_alive() and not holders.holder_is_dead(tmp_path)


def test_the_private_writer_makes_a_rewritten_file_private_and_replaces_a_symlink(tmp_path: Path) -> None:
    """Before, janitor.write_private_text truncated in place: a file an earlier run left 0644
    stayed 0644 (the pool's state, a kept control plane's mark)."""
    loose = tmp_path / "state.json"
    loose.write_text("{}")
    loose.chmod(0o644)
    janitor.write_private_text(loose, '{"pid": 1}')
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600 and loose.read_text() == '{"pid": 1}'

    target = tmp_path / "someone-elses-file"
    target.write_text("theirs")
    planted = tmp_path / "keep"
    planted.symlink_to(target)
    janitor.write_private_text(planted, "")
    assert target.read_text() == "theirs" and not planted.is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["keep", "someone-elses-file", "state.json"]


def test_one_sweep_removes_what_dead_holders_left_and_keeps_the_rest(
    tmp_path: Path, zombie: Holder, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    runs = tmp_path / "runs"
    temp.mkdir()
    runs.mkdir()
    dead = []
    leftovers = [
        (temp, holders.WEBHOOKS_PREFIX),
        (temp, holders.OPERATOR_PROXY_PREFIX),
        (runs, janitor.DIRECTORY_PREFIX),
    ]
    for base, prefix in leftovers:
        directory = base / f"{prefix}dead"
        directory.mkdir(mode=0o700)
        holders.write_holder(directory, zombie)
        dead.append(directory)
    kept = runs / f"{janitor.DIRECTORY_PREFIX}kept"
    kept.mkdir(mode=0o700)
    holders.write_holder(kept, zombie)
    janitor.write_private_text(kept / janitor.KEEP_FILE, "")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    live = holders.held_directory(holders.CLUSTER_SCRATCH_PREFIX)
    extra: list[str] = []

    def layer_rule() -> list[Path]:
        extra.append("ran")
        return []

    removed = janitor.sweep_leftovers([runs, runs], temp, more=[layer_rule])

    assert sorted(removed) == sorted(dead) and extra == ["ran"]
    assert kept.is_dir() and live.is_dir() and live.parent == temp
    assert holders.read_holder(live) == Holder.current()
    assert stat.S_IMODE(live.stat().st_mode) == 0o700
