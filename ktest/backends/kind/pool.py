"""The warm pool for kind: one spare cluster made in the background, claimed by the next run.

With ``ktest_kind_pool`` on, the kind backend first :func:`claim`\\ s a ready spare of the same
:class:`SpareSpec` (taken atomically: one claimer wins, across processes and xdist sessions;
checked in one round), which from then on is the run's own cluster. Once the run's cluster is
up, :func:`refill` starts a filler (``python -m ktest.backends.kind.pool fill``, a session of its
own) unless a spare is ready or a filler runs.

A filler holds ``<records>/.filler.lock`` while it lives (an flock: the kernel releases it
when the filler dies, so a second filler exits at once and a dead one blocks nothing) and
names itself in ``<records>/.filler`` (``ktest status`` shows it, ``ktest down --kind`` stops
it). The spare it creates is its own until usable (a filler killed half-way leaves an orphan
for its janitor or the next sweep), then kept. It runs at nice 10, after the run's cluster is
up: the node it boots still competes with the run's tests for the 20-40 s a cluster takes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import filelock

from ktest.backends.kind import records
from ktest.backends.kind.cluster import KindCluster, create_cluster, delete_cluster, keep, usable_now
from ktest.base.janitor import write_private_text
from ktest.base.procfs import process_alive, process_start_time
from ktest.errors import KindError

MAX_SPARES = 1
"""Spares kept at once, over all fingerprints (each holds a node's memory, about 1.2 GiB)."""
SPARE_PURPOSE = "spare"
FILLER_LOCK = ".filler.lock"
FILLER_STATE = ".filler"
_LOG_ROTATE_BYTES = 1 << 20
_STOP_TIMEOUT = 240.0  # a filler stopped mid-creation deletes its half-made cluster first


@dataclass(frozen=True)
class SpareSpec:
    """What makes two kind clusters interchangeable for a run: the pool's unit."""

    image: str
    image_id: str
    version: str
    config: Mapping[str, Any]

    @classmethod
    def for_image(cls, image: str, version: str, config: Mapping[str, Any]) -> SpareSpec:
        """The spec of clusters from ``image`` (its id asked of the engine: a rebuilt tag differs)."""
        return cls(image, _image_id(image), version, dict(config))

    @property
    def fingerprint(self) -> str:
        """A short hash of everything in the spec; equal specs, in any key order, hash the same."""
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpareSpec:
        return cls(str(data["image"]), str(data["image_id"]), str(data["version"]), dict(data["config"]))


def _image_id(reference: str) -> str:
    from docker.errors import DockerException

    from ktest.backends.kind.engine import connect

    try:
        return str(connect(check_runtime=False).images.get(reference).id)
    except (DockerException, KindError):
        return ""  # not there (yet): creating from it will say why


def ready_spares(directory: Path | None = None) -> list[records.ClusterRecord]:
    """Spares waiting to be claimed (any fingerprint), newest first."""
    found = [record for record in records.list_records(directory) if record.ready_spare]
    return sorted(found, key=lambda record: record.created_at, reverse=True)


def matching(spares: list[records.ClusterRecord], spec: SpareSpec) -> list[records.ClusterRecord]:
    """The spares a run with ``spec`` may claim: same fingerprint, not expired."""
    fingerprint = spec.fingerprint
    return [record for record in spares if record.spare == fingerprint and not record.spare_expired()]


# -------------------------------------------------------------------- claiming


def claim(
    kind: Path,
    spec: SpareSpec,
    *,
    purpose: str = "run",
    records_dir: Path | None = None,
    notes: list[str] | None = None,
) -> KindCluster | None:
    """Take a ready spare matching ``spec`` and make it this process's cluster; None if there is none.

    A spare that fails the quick check is deleted (it is this process's by then) and the next is tried.
    """
    for record in matching(ready_spares(records_dir), spec):
        taken = records.take_spare(record.name, purpose, records_dir)
        if taken is None:
            continue  # another run claimed it first
        cluster = KindCluster.held(taken, kind, taken.path(records_dir))
        problem = usable_now(cluster)
        if problem is None:
            return cluster
        if notes is not None:
            notes.append(f"kind pool: spare {taken.name} was not usable ({problem}); deleted it")
        with contextlib.suppress(KindError):
            delete_cluster(kind, taken, records_dir)
        cluster.release_janitor()
    return None


# -------------------------------------------------------------------- the filler


@dataclass(frozen=True)
class Filler:
    """The running filler as it names itself in ``<records>/.filler``."""

    pid: int
    start_time: str
    fingerprint: str
    log: str

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_time)


def running_filler(directory: Path | None = None) -> Filler | None:
    """The filler creating a spare right now, or None."""
    path = (directory or records.records_directory()) / FILLER_STATE
    try:
        filler = Filler(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return filler if filler.alive() else None


def log_path() -> Path:
    from ktest.backends.kind.cache import KindCache

    return KindCache.from_env().root / "pool" / "filler.log"


_started: list[subprocess.Popen[bytes]] = []  # polled so finished fillers do not linger as zombies


def refill(kind: Path, spec: SpareSpec, *, records_dir: Path | None = None) -> subprocess.Popen[bytes] | None:
    """Start a filler for ``spec`` unless a spare for it is ready or a filler runs; None if not started.

    Call it once the run's own cluster is up: the filler competes for CPU. The filler outlives
    this process (its own session, not bound to it); its output goes to :func:`log_path`.
    """
    _started[:] = [process for process in _started if process.poll() is None]
    if running_filler(records_dir) is not None or matching(ready_spares(records_dir), spec):
        return None
    from ktest.base.process import spawn

    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if log.stat().st_size > _LOG_ROTATE_BYTES:
            log.replace(log.with_suffix(".log.old"))
    command = [sys.executable, "-m", "ktest.backends.kind.pool", "fill", "--spec", json.dumps(spec.to_json())]
    command += ["--kind", str(kind)]
    if records_dir is not None:
        command += ["--records-dir", str(records_dir)]
    package_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    with open(log, "ab") as output:
        process = spawn(command, stdout=output, env=env, cwd=Path("/"), bind_to_parent=False)
    _started.append(process)
    return process


def fill(kind: Path, spec: SpareSpec, *, records_dir: Path | None = None) -> str:
    """Create one spare for ``spec`` unless one is ready or another filler runs; what happened, in words."""
    directory = records_dir or records.records_directory()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = filelock.FileLock(str(directory / FILLER_LOCK))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        return "another filler is running"
    state = directory / FILLER_STATE
    try:
        pid = os.getpid()
        filler = Filler(pid, process_start_time(pid) or "", spec.fingerprint, str(log_path()))
        write_private_text(state, json.dumps(asdict(filler)))
        if matching(ready_spares(directory), spec):
            return "a spare is ready already"
        for record in _make_room(spec, directory):
            with contextlib.suppress(KindError):
                delete_cluster(kind, record, directory)
            print(f"deleted spare {record.name} (another fingerprint) to make room", flush=True)
        with contextlib.suppress(OSError):
            os.nice(10)
        cluster = create_cluster(
            kind,
            image=spec.image,
            version=spec.version,
            config=spec.config,
            purpose=SPARE_PURPOSE,
            spare=spec.fingerprint,
            records_dir=directory,
            progress=lambda message: print(message, flush=True),
        )
        keep(cluster, directory)
        return f"spare {cluster.record.name} is ready"
    finally:
        state.unlink(missing_ok=True)
        lock.release()


def _make_room(spec: SpareSpec, directory: Path) -> list[records.ClusterRecord]:
    """Take the spares that must go for one of ``spec`` to fit (oldest of other fingerprints first)."""
    spares = ready_spares(directory)
    taken: list[records.ClusterRecord] = []
    others = sorted((r for r in spares if r.spare != spec.fingerprint), key=lambda r: r.created_at)
    while len(others) - len(taken) >= MAX_SPARES and len(taken) < len(others):
        record = records.take_spare(others[len(taken)].name, "evict", directory)
        if record is not None:
            taken.append(record)
        else:
            others.pop(len(taken))  # claimed meanwhile: it no longer counts
    return taken


def stop_filler(records_dir: Path | None = None, timeout: float = _STOP_TIMEOUT) -> str | None:
    """Stop the running filler (it deletes the spare it was making); a line for the user, or None."""
    filler = running_filler(records_dir)
    if filler is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(filler.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while filler.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    if filler.alive():
        return f"the kind pool's filler (pid {filler.pid}) did not stop in {timeout:.0f}s; log: {filler.log}"
    return f"stopped the kind pool's filler (pid {filler.pid}) and the spare it was creating"


def drain(kind: Path, *, records_dir: Path | None = None) -> list[str]:
    """Stop the filler and delete every ready spare, kept clusters left alone; one line per thing done."""
    from ktest.backends.kind.sweep import delete_spare

    done = [line for line in [stop_filler(records_dir)] if line]
    for record in ready_spares(records_dir):
        done += delete_spare(kind, record, records_dir)
    return done


def describe(record: records.ClusterRecord) -> str | None:
    """How ``ktest status`` names a spare's state, or None for other clusters."""
    if not record.spare:
        return None
    if record.kept:
        left = (record.created_at + records.SPARE_MAX_AGE - time.time()) / 3600
        return f"spare of the warm pool (the next run with ktest_kind_pool claims it; expires in {left:.1f}h)"
    return f"spare being created by the pool's filler (pid {record.owner_pid})"


def status_lines(records_dir: Path | None = None) -> list[str]:
    """A line about the running filler, if any, for ``ktest status``."""
    filler = running_filler(records_dir)
    if filler is None:
        return []
    return [f"kind pool: filler pid {filler.pid} is creating a spare (log: {filler.log})"]


def main(argv: list[str] | None = None) -> int:
    """The filler: ``python -m ktest.backends.kind.pool fill --spec JSON --kind PATH [--records-dir DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m ktest.backends.kind.pool")
    parser.add_argument("command", choices=["fill"])
    parser.add_argument("--spec", required=True, help="the SpareSpec as JSON")
    parser.add_argument("--kind", required=True, help="the kind binary")
    parser.add_argument("--records-dir", default=None)
    args = parser.parse_args(argv)
    # `ktest down --kind` stops a filler with SIGTERM: unwind, so create_cluster deletes its half.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    spec = SpareSpec.from_json(json.loads(args.spec))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{started} filler pid {os.getpid()}: spare for {spec.image} ({spec.fingerprint})", flush=True)
    try:
        records_dir = Path(args.records_dir) if args.records_dir else None
        outcome = fill(Path(args.kind), spec, records_dir=records_dir)
    except KindError as error:
        print(f"filler pid {os.getpid()}: failed: {error}", flush=True)
        return 1
    print(f"filler pid {os.getpid()}: {outcome}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
