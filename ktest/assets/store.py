"""Where binaries live on disk, and how an entry is installed atomically.

Layout (``<arch>`` is Go's name: amd64, arm64):

* ktest cache: ``${KTEST_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/ktest}/k8s/<version>-linux-<arch>/``
  holding the four binaries and ``ktest-binaries.json`` (origin, build times, versions).
* setup-envtest store (read only for ktest):
  ``${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest/k8s/<version>-linux-<arch>/``.

An entry is built in a temporary directory next to the cache, checked, then
renamed into place while holding a per-version file lock, so a cache entry
either is complete or does not exist.

``ktest-binaries.json`` records each binary's size, modification time and
SHA-256. :func:`verify_entry` checks them before use: size and mtime only
when both match (a few ``stat`` calls), the full hash when either changed or
when asked (``ktest binaries verify``). Entries installed before checksums
were recorded get them on first use (their sizes must still match).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from ktest.assets.bundle import ALL_BINARIES, REQUIRED_BINARIES
from ktest.assets.probe import verify_binaries
from ktest.assets.progress import Progress
from ktest.assets.selectors import parse_stable_version
from ktest.errors import AssetsError

METADATA_FILE = "ktest-binaries.json"
_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_LOCK_WAIT_SECONDS = 3600.0


def host_arch() -> str:
    """This machine's architecture in Go's spelling (release archives use it)."""
    machine = platform.machine().lower()
    return _GO_ARCH.get(machine, machine)


@dataclass(frozen=True)
class Locations:
    """The directories ktest reads and writes, derived from the environment."""

    cache_root: Path
    envtest_root: Path
    arch: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Locations:
        env = os.environ if env is None else env
        home = Path(env.get("HOME") or Path.home())
        cache_home = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
        data_home = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
        explicit = env.get("KTEST_CACHE_DIR")
        cache_root = Path(explicit).expanduser() if explicit else cache_home / "ktest"
        return cls(cache_root, data_home / "kubebuilder-envtest", host_arch())

    @property
    def k8s_dir(self) -> Path:
        return self.cache_root / "k8s"

    @property
    def gobuild_dir(self) -> Path:
        return self.cache_root / "gobuild"

    @property
    def versions_file(self) -> Path:
        return self.cache_root / "versions.json"

    def entry_name(self, version: str) -> str:
        return f"{version}-linux-{self.arch}"

    def cache_entry(self, version: str) -> Path:
        return self.k8s_dir / self.entry_name(version)

    def envtest_entry(self, version: str) -> Path:
        return self.envtest_root / "k8s" / self.entry_name(version)


@dataclass(frozen=True)
class Entry:
    """An installed set of binaries (ktest cache or setup-envtest store)."""

    directory: Path
    version: str
    origin: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def present(self) -> tuple[str, ...]:
        return tuple(name for name in ALL_BINARIES if _is_executable(self.directory / name))

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(name for name in ALL_BINARIES if name not in self.present)

    def sizes(self) -> dict[str, int]:
        return {name: (self.directory / name).stat().st_size for name in self.present}


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def read_cache_entry(locations: Locations, version: str) -> Entry | None:
    """The cache entry for ``version`` if it is complete; None otherwise."""
    directory = locations.cache_entry(version)
    try:
        metadata = json.loads((directory / METADATA_FILE).read_text())
    except (OSError, ValueError):
        return None
    entry = Entry(directory, version, str(metadata.get("origin", "cache")), metadata)
    return entry if not entry.missing else None


def read_envtest_entry(locations: Locations, version: str) -> Entry | None:
    """setup-envtest's entry for ``version`` if it holds at least kube-apiserver and etcd."""
    directory = locations.envtest_entry(version)
    entry = Entry(directory, version, "setup-envtest")
    if all(name in entry.present for name in REQUIRED_BINARIES):
        return entry
    return None


def _entries_in(
    locations: Locations, directory: Path, read: Callable[[Locations, str], Entry | None]
) -> list[Entry]:
    """The entries ``read`` accepts among the ``<version>-linux-<arch>`` directories of ``directory``."""
    suffix = f"-linux-{locations.arch}"
    try:
        names = [child.name for child in directory.iterdir() if child.is_dir()]
    except OSError:
        return []
    versions = [name.removesuffix(suffix) for name in names if name.endswith(suffix)]
    found = (read(locations, v) for v in versions if parse_stable_version(v) is not None)
    return [entry for entry in found if entry is not None]


def list_cache_entries(locations: Locations) -> list[Entry]:
    return _entries_in(locations, locations.k8s_dir, read_cache_entry)


def list_envtest_entries(locations: Locations) -> list[Entry]:
    return _entries_in(locations, locations.envtest_root / "k8s", read_envtest_entry)


def ensure_writable_cache(locations: Locations) -> None:
    """Create the cache directory, or explain why it cannot be written."""
    try:
        locations.k8s_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=locations.k8s_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise AssetsError(
            f"ktest's binary cache {locations.k8s_dir} is not writable: "
            f"{error.strerror or error}.\n"
            "Set XDG_CACHE_HOME (or KTEST_CACHE_DIR) to a writable directory, or point "
            "KTEST_ASSETS at a directory that already holds the binaries."
        ) from error


Producer = Callable[[Path], Mapping[str, Any]]


class Installer:
    """Installs one version into the cache while its lock is held (see ``install_lock``)."""

    def __init__(self, locations: Locations, version: str, progress: Progress) -> None:
        self.locations = locations
        self.version = version
        self.progress = progress

    def existing(self) -> Entry | None:
        return read_cache_entry(self.locations, self.version)

    def install(self, origin: str, producer: Producer, etcd_version: str | None = None) -> Entry:
        """Run ``producer`` to fill a temporary directory, verify it, rename it into place.

        ``producer`` writes the four binaries into the directory it is given and
        returns metadata to record (durations, versions). On any failure, and on
        interruption, the temporary directory is removed: the cache never holds
        a half-filled entry.
        """
        target = self.locations.cache_entry(self.version)
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=self.locations.k8s_dir))
        try:
            details = dict(producer(scratch))
            expected_etcd = etcd_version or details.get("etcd_version")
            reported = verify_binaries(scratch, self.version, ALL_BINARIES, expected_etcd)
            sizes = {name: (scratch / name).stat().st_size for name in ALL_BINARIES}
            files = {name: file_record(scratch / name) for name in ALL_BINARIES}
            metadata = {
                "version": self.version,
                "arch": self.locations.arch,
                "origin": origin,
                "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "reported_versions": reported,
                "sizes": sizes,
                "files": files,
                **details,
            }
            (scratch / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
            scratch.chmod(0o755)
            _discard(target)
            os.rename(scratch, target)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        entry = read_cache_entry(self.locations, self.version)
        if entry is None:  # pragma: no cover - rename is atomic; this guards against tampering
            raise AssetsError(f"{target} vanished right after it was installed.")
        return entry

    def remove_leftovers(self) -> None:
        """Delete temporary directories that an interrupted install of this version left."""
        pattern = f".tmp-{self.locations.entry_name(self.version)}-*"
        for leftover in self.locations.k8s_dir.glob(pattern):
            shutil.rmtree(leftover, ignore_errors=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_record(path: Path) -> dict[str, Any]:
    """What ``ktest-binaries.json`` records of one binary: size, mtime, SHA-256."""
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_of(path)}


@dataclass(frozen=True)
class Damage:
    """One binary of a cache entry that is not what was installed."""

    name: str
    path: Path
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def verify_entry(entry: Entry, *, full: bool = False) -> list[Damage]:
    """The binaries of a ktest cache entry that changed since install (empty: intact).

    ``full=False`` hashes only files whose size or mtime changed; ``full=True``
    hashes every file. An entry recorded without checksums (older ktest) gets
    them now, if every size still matches the recorded one.
    """
    files = entry.metadata.get("files")
    if not isinstance(files, Mapping):
        return _adopt_legacy_entry(entry)
    damage = []
    for name, recorded in sorted(files.items()):
        path = entry.directory / name
        stat = _stat_as_installed(name, path, recorded.get("size"))
        if isinstance(stat, Damage):
            damage.append(stat)
            continue
        if not full and stat.st_mtime_ns == recorded.get("mtime_ns"):
            continue
        try:
            actual = sha256_of(path)
        except OSError as error:
            damage.append(Damage(name, path, f"unreadable ({error.strerror or error})"))
            continue
        if actual != recorded.get("sha256"):
            expected = str(recorded.get("sha256"))[:16]
            damage.append(Damage(name, path, f"SHA-256 {actual[:16]}..., {expected}... when installed"))
    return damage


def _stat_as_installed(name: str, path: Path, size: object) -> os.stat_result | Damage:
    """``path``'s stat, or the damage when it is missing or its size is not the ``size`` installed."""
    try:
        stat = path.stat()
    except OSError as error:
        return Damage(name, path, f"missing ({error.strerror or error})")
    if stat.st_size != size:
        return Damage(name, path, f"size {stat.st_size} bytes, {size} when installed")
    return stat


def _adopt_legacy_entry(entry: Entry) -> list[Damage]:
    """Record checksums for an entry installed without them; its sizes must match."""
    sizes = entry.metadata.get("sizes")
    checked = [
        _stat_as_installed(name, entry.directory / name, size)
        for name, size in sorted(sizes.items() if isinstance(sizes, Mapping) else ())
    ]
    damage = [found for found in checked if isinstance(found, Damage)]
    if damage:
        return damage
    metadata = dict(entry.metadata)
    with contextlib.suppress(OSError):
        metadata["files"] = {name: file_record(entry.directory / name) for name in entry.present}
        _write_metadata(entry.directory, metadata)
    return []


def _write_metadata(directory: Path, metadata: Mapping[str, Any]) -> None:
    partial = directory / f".{METADATA_FILE}.{os.getpid()}.partial"
    try:
        partial.write_text(json.dumps(metadata, indent=2) + "\n")
        os.replace(partial, directory / METADATA_FILE)
    finally:
        partial.unlink(missing_ok=True)


def damage_report(entry: Entry, damage: list[Damage]) -> str:
    """What is wrong with a cache entry and how to repair it."""
    lines = "\n".join(f"  - {item}" for item in damage)
    return (
        f"the cached Kubernetes {entry.version} binaries in {entry.directory} are corrupt "
        f"(changed since ktest installed them):\n{lines}\n"
        f"Repair them with `ktest binaries install --k8s-version {entry.version}` (re-installs the "
        f"entry), or delete {entry.directory}."
    )


def _discard(directory: Path) -> None:
    """Remove an untrusted (incomplete) entry that is in the way of the rename."""
    if directory.exists():
        trash = directory.with_name(f".tmp-{directory.name}-discarded-{os.getpid()}")
        os.rename(directory, trash)
        shutil.rmtree(trash, ignore_errors=True)


@contextlib.contextmanager
def install_lock(locations: Locations, version: str, progress: Progress) -> Iterator[Installer]:
    """Hold the per-version install lock; another process installing it makes us wait."""
    ensure_writable_cache(locations)
    lock_dir = locations.k8s_dir / ".locks"
    lock_dir.mkdir(exist_ok=True)
    lock = filelock.FileLock(str(lock_dir / f"{locations.entry_name(version)}.lock"))
    try:
        lock.acquire(timeout=0.2)
    except filelock.Timeout:
        progress.note(
            f"another process is installing Kubernetes {version}; waiting for it (lock {lock.lock_file})"
        )
        try:
            lock.acquire(timeout=_LOCK_WAIT_SECONDS)
        except filelock.Timeout as error:
            raise AssetsError(
                f"waited {_LOCK_WAIT_SECONDS / 60:.0f} minutes for the install lock "
                f"{lock.lock_file} of Kubernetes {version}.\n"
                "Another ktest process seems stuck; stop it and run the command again."
            ) from error
    try:
        installer = Installer(locations, version, progress)
        installer.remove_leftovers()
        yield installer
    finally:
        lock.release()
