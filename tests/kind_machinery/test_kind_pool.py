"""The warm pool for kind (ktest.backends.kind.pool): fingerprints and records, then real spares.

For real, on the engine, in records of their own (``XDG_STATE_HOME`` in a temporary
directory, so no other run's sweep or claim meets these spares): two fillers started
together make exactly one spare, which the sweep leaves alone; two claimers started
together, one wins, and its backend's close deletes the spare; a filler killed with its
janitor mid-creation leaves a half-made cluster that the next sweep deletes; a filler
stopped (``ktest down --kind``) or killed without its janitor leaves nothing. One whole
kind cluster and three half-made ones in all (CPU is scarce; about 50 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_runs import pytest_command

from ktest.backends.kind import pool, records
from ktest.backends.kind.cluster import existing_clusters
from ktest.backends.kind.kubeadm_patches import NODE_PATCHES_DIRECTORY, with_kubeadm_patches
from ktest.backends.kind.pool import SpareSpec
from ktest.backends.kind.recipe import required_cluster_config
from ktest.backends.kind.sweep import sweep_orphans
from ktest.config import resolve_settings
from ktest.errors import ConfigError
from ktest.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "nodes": [{"role": "control-plane"}]}


def _spec(**changes: Any) -> SpareSpec:
    return replace(SpareSpec("ktest/kind-node:v1.37.2", "sha256:aa", "1.37.2", CONFIG), **changes)


def _spare_record(
    name: str, spec: SpareSpec, *, age: float = 0.0, kept: bool = True
) -> records.ClusterRecord:
    return records.ClusterRecord(
        name=name,
        directory=f"/nonexistent/{name}",
        image=spec.image,
        version=spec.version,
        owner_pid=0 if kept else os.getpid(),
        owner_start="",
        kept=kept,
        purpose="spare",
        created_at=time.time() - age,
        spare=spec.fingerprint,
    )


# -------------------------------------------------------------------- no engine needed


def test_equal_specs_have_one_fingerprint_whatever_the_key_order() -> None:
    reordered = dict(reversed(list(CONFIG.items())))
    assert _spec().fingerprint == _spec(config=reordered).fingerprint
    assert SpareSpec.from_json(json.loads(json.dumps(_spec().to_json()))).fingerprint == _spec().fingerprint


@pytest.mark.parametrize(
    "change",
    [
        {"image": "kindest/node:v1.37.2"},
        {"image_id": "sha256:bb"},  # the same tag, rebuilt
        {"version": "1.37.3"},
        {"config": {**CONFIG, "featureGates": {"AllAlpha": True}}},
    ],
    ids=["image", "image-id", "version", "config"],
)
def test_each_part_of_the_spec_changes_the_fingerprint(change: dict[str, Any]) -> None:
    assert _spec(**change).fingerprint != _spec().fingerprint


def test_a_run_matches_only_ready_unexpired_spares_of_its_fingerprint(tmp_path: Path) -> None:
    other = _spec(version="1.35.4")
    for record in (
        _spare_record("ktest-spare-fresh", _spec()),
        _spare_record("ktest-spare-old", _spec(), age=records.SPARE_MAX_AGE + 60),
        _spare_record("ktest-spare-making", _spec(), kept=False),
        _spare_record("ktest-spare-other", other),
    ):
        records.write_record(record, tmp_path)
    assert [r.name for r in pool.matching(pool.ready_spares(tmp_path), _spec())] == ["ktest-spare-fresh"]
    assert [r.name for r in pool.matching(pool.ready_spares(tmp_path), other)] == ["ktest-spare-other"]
    assert records.read_record("ktest-spare-old", tmp_path).spare_expired()  # type: ignore[union-attr]


def test_a_spare_is_taken_once_and_then_belongs_to_its_taker(tmp_path: Path) -> None:
    records.write_record(_spare_record("ktest-spare-x", _spec()), tmp_path)
    taken = records.take_spare("ktest-spare-x", "run", tmp_path)
    assert taken is not None and taken.owner_pid == os.getpid() and taken.holder_alive()
    assert not taken.kept and not taken.spare and taken.purpose == "run"
    assert records.read_record("ktest-spare-x", tmp_path) == taken
    assert records.take_spare("ktest-spare-x", "run", tmp_path) is None
    assert records.take_spare("ktest-spare-absent", "run", tmp_path) is None


def test_a_spare_of_another_fingerprint_makes_room_oldest_first(tmp_path: Path) -> None:
    older, newer = _spec(version="1.35.4"), _spec(version="1.36.0")
    records.write_record(_spare_record("ktest-spare-older", older, age=600), tmp_path)
    records.write_record(_spare_record("ktest-spare-newer", newer, age=60), tmp_path)
    assert pool.MAX_SPARES == 1, "this test assumes room for one spare"
    evicted = pool._make_room(_spec(), tmp_path)
    assert [record.name for record in evicted] == ["ktest-spare-older", "ktest-spare-newer"]
    assert all(record.owner_pid == os.getpid() and not record.ready_spare for record in evicted)
    assert pool.ready_spares(tmp_path) == []


def test_status_tells_a_ready_spare_from_one_being_made() -> None:
    ready = pool.describe(_spare_record("ktest-spare-ready", _spec(), age=3600))
    assert ready is not None and "the next run with ktest_kind_pool claims it; expires in 23.0h" in ready
    making = pool.describe(_spare_record("ktest-spare-making", _spec(), kept=False))
    assert making == f"spare being created by the pool's filler (pid {os.getpid()})"
    assert pool.describe(replace(_spare_record("ktest-run-x", _spec()), spare="")) is None


def test_kubeadm_patches_reach_every_control_plane_node_and_user_patches_come_after(tmp_path: Path) -> None:
    config = {
        **CONFIG,
        "kubeadmConfigPatches": ["kind: ClusterConfiguration\n"],
        "nodes": [{"role": "control-plane"}, {"role": "worker"}],
    }
    patched = with_kubeadm_patches(config, tmp_path)
    assert patched["kubeadmConfigPatches"][0].startswith("kind: InitConfiguration\npatches:")
    assert patched["kubeadmConfigPatches"][1:] == ["kind: ClusterConfiguration\n"]
    mount = {"hostPath": str(tmp_path), "containerPath": NODE_PATCHES_DIRECTORY, "readOnly": True}
    assert patched["nodes"] == [{"role": "control-plane", "extraMounts": [mount]}, {"role": "worker"}]
    assert "extraMounts" not in config["nodes"][0], "the caller's config is left as it was"


def test_the_pool_is_off_by_default_and_a_bad_value_names_the_setting() -> None:
    assert resolve_settings(env={}).kind_pool is False
    assert resolve_settings(env={"KTEST_KIND_POOL": "1"}).kind_pool is True
    assert resolve_settings(options={"kind_pool": True}, env={}).kind_pool is True
    with pytest.raises(ConfigError, match=r"ini key ktest_kind_pool: 'sometimes' is not a valid kind_pool"):
        resolve_settings(ini={"kind_pool": "sometimes"}, env={})


# -------------------------------------------------------------------- real spares


@pytest.fixture(scope="module")
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Records of this module's own (also for the claimers and fillers it starts)."""
    home = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def spec(default_image: str, default_version: str, docker_client: Any) -> SpareSpec:
    from ktest.backends.kind.engine import cgroup_version

    config = required_cluster_config(default_version, cgroup_version=cgroup_version(docker_client))
    return SpareSpec.for_image(default_image, default_version, config)


@pytest.fixture(scope="module")
def cleanup(state_home: Path, kind_binary: Path) -> Iterator[None]:
    """Whatever a test leaves (a failure half-way): fillers stopped, clusters and records deleted."""
    yield
    pool.stop_filler()
    sweep_orphans(kind_binary, include_kept=True)


def _spares_of(spec: SpareSpec) -> list[records.ClusterRecord]:
    return [r for r in records.list_records() if r.spare == spec.fingerprint]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_fillers_make_one_spare_which_the_sweep_keeps(
    cleanup: None, spec: SpareSpec, kind_binary: Path
) -> None:
    first = pool.refill(kind_binary, spec)
    second = pool.refill(kind_binary, spec)  # before the first names itself: it must give way
    assert first is not None
    for process in (first, second):
        if process is not None:
            eventually(
                lambda p=process: p.poll() is not None,
                timeout=600,
                interval=1,
                description=f"filler {process.pid} finished (log: {pool.log_path()})",
            )
    log = pool.log_path().read_text()
    assert first.returncode == 0, log[-3000:]
    [spare] = _spares_of(spec)
    assert spare.ready_spare, log[-3000:]
    assert [name for name in existing_clusters(kind_binary) if name.startswith("ktest-spare-")] == [
        spare.name
    ]
    assert pool.refill(kind_binary, spec) is None, "a spare is ready: nothing to fill"
    assert not any(spare.name in note for note in sweep_orphans(kind_binary))
    assert records.read_record(spare.name) == spare


CLAIMER = """
import sys, time
from pathlib import Path
from ktest.backends.kind.backend import KindBackend
from ktest.backends.kind.pool import SpareSpec, claim
spec = SpareSpec.from_json({spec!r})
while time.time() < {start}:  # both claimers try at the same moment
    time.sleep(0.01)
started = time.monotonic()
cluster = claim(Path({kind!r}), spec)
if cluster is None:
    print("NONE", flush=True)
    sys.exit(0)
print("CLAIMED", cluster.record.name, f"{{time.monotonic() - started:.2f}}", flush=True)
KindBackend(cluster, owned=True).close()
print("CLOSED", flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_of_two_claimers_one_wins_and_its_close_deletes_the_spare(
    cleanup: None, spec: SpareSpec, kind_binary: Path
) -> None:
    [spare] = _spares_of(spec)
    script = textwrap.dedent(
        CLAIMER.format(spec=spec.to_json(), start=time.time() + 4, kind=str(kind_binary))
    )
    claimers = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [claimer.communicate(timeout=300)[0] for claimer in claimers]
    assert all(claimer.returncode == 0 for claimer in claimers), outputs
    won = [output for output in outputs if output.startswith("CLAIMED")]
    assert len(won) == 1 and any(output.strip() == "NONE" for output in outputs), outputs
    assert won[0].split()[1] == spare.name and "CLOSED" in won[0], outputs
    assert spare.name not in existing_clusters(kind_binary)
    assert records.read_record(spare.name) is None and not Path(spare.directory).exists()


def _filler_half_way(
    kind_binary: Path, spec: SpareSpec
) -> tuple[subprocess.Popen[bytes], records.ClusterRecord]:
    """A filler started and the record of its cluster, once the cluster exists (half made)."""
    filler = pool.refill(kind_binary, spec)
    assert filler is not None
    try:
        half = eventually(
            lambda: next((r for r in _spares_of(spec) if r.name in existing_clusters(kind_binary)), None),
            timeout=120,
            interval=0.5,
            description="the filler's kind cluster exists",
        )
    except BaseException:
        os.killpg(filler.pid, signal.SIGKILL)  # its janitor deletes what it made
        raise
    return filler, half


def _janitor_of(pid: int) -> int:
    """The janitor a filler started (its child running janitor.py)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid and b"janitor.py" in command:
            return int(entry.name)
    raise AssertionError(f"filler {pid} has no janitor")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_fillers_half_made_cluster_is_swept(
    cleanup: None, spec: SpareSpec, kind_binary: Path
) -> None:
    filler, half = _filler_half_way(kind_binary, spec)
    assert not half.kept and half.owner_pid == filler.pid
    # The whole process group killed (e.g. a CI timeout), the janitor with it.
    os.kill(_janitor_of(filler.pid), signal.SIGKILL)
    os.killpg(filler.pid, signal.SIGKILL)
    filler.wait()
    assert half.orphaned() and pool.running_filler() is None
    notes = sweep_orphans(kind_binary)
    assert f"deleted kind cluster {half.name}: its owner (pid {filler.pid}) is gone" in notes
    assert half.name not in existing_clusters(kind_binary) and records.read_record(half.name) is None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stopped_filler_deletes_its_half_made_cluster(
    cleanup: None, spec: SpareSpec, kind_binary: Path
) -> None:
    """What `ktest down --kind` does to a running filler: SIGTERM, and it cleans up after itself."""
    filler, half = _filler_half_way(kind_binary, spec)
    assert (
        pool.stop_filler()
        == f"stopped the kind pool's filler (pid {filler.pid}) and the spare it was creating"
    )
    assert filler.wait(timeout=60) == 128 + signal.SIGTERM  # it deletes its half, then waits 10 s for quiet
    assert half.name not in existing_clusters(kind_binary) and records.read_record(half.name) is None
    assert not Path(half.directory).exists() and pool.running_filler() is None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_fillers_janitor_deletes_its_half_made_cluster(
    cleanup: None, spec: SpareSpec, kind_binary: Path
) -> None:
    filler, half = _filler_half_way(kind_binary, spec)
    os.killpg(filler.pid, signal.SIGKILL)  # the filler and its kind create; its janitor lives on
    filler.wait()
    eventually(
        lambda: half.name not in existing_clusters(kind_binary) and records.read_record(half.name) is None,
        timeout=180,
        interval=1,
        description=f"the janitor deleted {half.name}, node container included, and its record",
    )


# -------------------------------------------------------------------- as users run it

_SESSION_TEST = """
from ktest.cluster import ObjectRef

def test_uses_the_cluster(cluster):
    assert cluster.get(ObjectRef("v1", "Namespace", "default"))["metadata"]["name"] == "default"
"""


def _pooled_session(directory: Path) -> subprocess.CompletedProcess[str]:
    """One pytest session on the kind backend with the pool on (this module's records)."""
    return subprocess.run(
        pytest_command("--ktest-backend=kind", "--ktest-kind-pool", str(directory / "test_session.py")),
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_second_session_claims_the_spare_the_first_sessions_filler_made(
    cleanup: None, spec: SpareSpec, kind_binary: Path, tmp_path: Path
) -> None:
    (tmp_path / "test_session.py").write_text(_SESSION_TEST)
    first = _pooled_session(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # Nothing to claim yet: it created a cluster, and says so.
    assert "kind pool: no spare for this node image, version and kind config" in first.stdout
    eventually(
        lambda: pool.matching(pool.ready_spares(), spec),
        timeout=300,
        interval=1,
        description="the first session's filler made a spare",
    )
    (spare,) = pool.matching(pool.ready_spares(), spec)
    second = _pooled_session(tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"kind pool: claimed spare cluster {spare.name}" in second.stdout
    assert spare.name not in existing_clusters(kind_binary)  # the claimer's close deleted it
