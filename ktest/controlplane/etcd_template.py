"""A pre-initialised etcd data directory per version, so a new control plane skips bootstrap.

A fresh kube-apiserver spends ~0.3-0.5 s creating what every cluster holds (system namespaces,
bootstrap RBAC, flow schemas, priority classes, the ``kubernetes`` Service), the same for every
plane of one version. So a throwaway plane bootstraps an etcd once, and its data directory is kept
as a template each later plane starts on a copy of (``tests/controlplane/test_etcd_template.py``
checks that the result is the same cluster). Templates live beside the binaries, in
``${KTEST_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/ktest}/etcd-templates/<key>/``, keyed by the
binaries and the flags that shape stored data; built under a file lock and renamed into place, so
pytest-xdist workers build one once and never see half of one. The manifest names the bootstrap
objects the template holds, which lets readiness skip the bootstrap hooks' fixed second
(``ApiServerClient.ready``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from ktest.base.bounded import file_lock
from ktest.base.procfs import private_cache_directory, private_directory, write_private_file
from ktest.controlplane.flags import cache_directory as flags_cache_directory
from ktest.errors import ControlPlaneError

if TYPE_CHECKING:
    from ktest.base.process import ManagedProcess
    from ktest.controlplane.apiserver import ApiServerClient

FORMAT = 3  # 2: the manifest names the bootstrap objects; 3: the data keeps the `kubernetes` Service
MANIFEST = "ktest-template.json"
_PAGE = 4096
TEMPLATE_LOCK_TIMEOUT = 600.0
"""Seconds a start waits for another process building the same template (one control plane start)."""


class BootstrapPlane(Protocol):
    """The part of :class:`~ktest.controlplane.ControlPlane` a template is bootstrapped on."""

    @property
    def directory(self) -> Path: ...
    @property
    def server(self) -> str: ...
    @property
    def kubeconfig(self) -> Path: ...
    def start(self) -> object: ...
    def stop(self) -> None: ...
    def processes(self) -> dict[str, ManagedProcess]: ...


def templates_directory() -> Path:
    return flags_cache_directory().parent / "etcd-templates"


def template_key(binaries: list[Path], shaping: dict[str, str]) -> str:
    """A key for the binaries (path, size, mtime) and the flags that shape stored data."""
    identities = []
    for binary in binaries:
        stat = binary.stat()
        identities.append(f"{binary.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    text = json.dumps({"format": FORMAT, "binaries": identities, "flags": shaping}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _used_length(path: Path) -> int:
    """The file's length without its trailing zeros, rounded up to a page plus one zero page.

    etcd preallocates each WAL segment (64 MiB of zeros) and reads a zero record length
    as the end of the log, so the trimmed file is what etcd itself would see."""
    size = path.stat().st_size
    with path.open("rb") as file:
        end = size
        while end > 0:
            start = max(0, end - (1 << 20))
            file.seek(start)
            chunk = file.read(end - start).rstrip(b"\0")
            if chunk:
                used = start + len(chunk)
                return min(size, (used + _PAGE - 1) // _PAGE * _PAGE + _PAGE)
            end = start
    return 0


def _copy_trimmed(source: Path, target: Path) -> None:
    remaining = _used_length(source)
    with source.open("rb") as src, target.open("wb") as dst:
        while remaining and (chunk := src.read(min(remaining, 1 << 20))):
            dst.write(chunk)
            remaining -= len(chunk)


def store(data_dir: Path, destination: Path, bootstrap: Mapping[str, Sequence[str]] | None = None) -> None:
    """Copy a stopped etcd's ``data_dir`` to ``destination`` atomically (WAL zeros trimmed,
    preallocated ``*.tmp`` segments left out), with a manifest of file sizes and the names of
    the ``bootstrap`` objects the data holds (kind -> ``namespace/name``)."""
    private_cache_directory(destination.parent)
    partial = Path(tempfile.mkdtemp(prefix=f".{destination.name}.partial-", dir=destination.parent))
    try:
        files: dict[str, int] = {}
        for path in sorted(data_dir.rglob("*")):
            relative = path.relative_to(data_dir)
            target = partial / relative
            if path.is_dir():
                private_directory(target)
            elif path.is_file() and not path.name.endswith(".tmp"):
                private_directory(target.parent)
                if path.suffix == ".wal":
                    _copy_trimmed(path, target)
                else:
                    shutil.copyfile(path, target)
                target.chmod(0o600)  # etcd's data: every object of the cluster, secrets too
                files[str(relative)] = target.stat().st_size
        manifest: dict[str, object] = {"format": FORMAT, "files": files}
        if bootstrap is not None:
            manifest["bootstrap"] = {kind: sorted(names) for kind, names in bootstrap.items()}
        write_private_file(partial / MANIFEST, json.dumps(manifest))
        try:
            os.rename(partial, destination)
        except OSError:
            if not is_complete(destination):
                raise
            shutil.rmtree(partial, ignore_errors=True)  # another process stored it first
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def is_complete(template: Path) -> bool:
    """True when every file the manifest lists is there with its size."""
    try:
        manifest = json.loads((template / MANIFEST).read_text())
        files = manifest["files"]
        return manifest.get("format") == FORMAT and bool(files) and all(
            (template / name).stat().st_size == size for name, size in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def bootstrap_objects(template: Path) -> dict[str, list[str]] | None:
    """The bootstrap objects the template holds (kind -> ``namespace/name``), or None when its
    manifest does not name all of them (then readiness waits for the bootstrap hooks)."""
    from ktest.controlplane.apiserver import BOOTSTRAP_LISTS

    try:
        found = json.loads((template / MANIFEST).read_text())["bootstrap"]
        objects = {kind: [str(name) for name in found[kind]] for kind in BOOTSTRAP_LISTS}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    essential = ("namespaces", "clusterroles", "clusterrolebindings", "priorityclasses")
    if "/default" not in objects["namespaces"] or not all(objects[kind] for kind in essential):
        return None
    return objects


def restore(template: Path, data_dir: Path) -> None:
    """Copy the template into ``data_dir`` (which must not exist), private to this user."""
    files = json.loads((template / MANIFEST).read_text())["files"]
    data_dir.mkdir(mode=0o700)
    for name in sorted(files):
        target = data_dir / name
        private_directory(target.parent)  # 0700: etcd warns about data directories others can read
        shutil.copyfile(template / name, target)
        target.chmod(0o600)


def ensure(
    key: str,
    build: Callable[[], Path],
    stored_by: Callable[[Path], None],
    bootstrap: Callable[[], Mapping[str, Sequence[str]] | None] | None = None,
) -> Path:
    """The template for ``key``, built first when missing: ``build()`` bootstraps a throwaway
    control plane and returns its stopped etcd's data directory, ``bootstrap()`` (called after
    ``build``) names the bootstrap objects it saw, ``stored_by(path)`` removes whatever
    ``build`` left. Concurrent callers wait on a file lock and build it once."""
    directory = templates_directory()
    template = directory / key
    if is_complete(template):
        private_cache_directory(directory)  # one an older ktest made 0755
        return template
    private_cache_directory(directory)
    with file_lock(directory / f".{key}.lock", timeout=TEMPLATE_LOCK_TIMEOUT, mode=0o600,
                   what=f"the etcd template {template}", error=ControlPlaneError):
        if is_complete(template):
            return template
        if template.exists():  # damaged (a manifest that does not match): build it again
            shutil.rmtree(template, ignore_errors=True)
        for partial in directory.glob(f".{key}.partial-*"):  # a store killed midway (we hold the lock)
            shutil.rmtree(partial, ignore_errors=True)
        data_dir = build()
        try:
            store(data_dir, template, bootstrap() if bootstrap is not None else None)
        finally:
            stored_by(data_dir)
    return template


def find_or_bootstrap(
    binaries: list[Path], shaping: dict[str, str], new_plane: Callable[[], BootstrapPlane], timeout: float
) -> Path | None:
    """The template for ``binaries`` and the ``shaping`` flags (see :func:`template_key`),
    bootstrapped first when there is none on ``new_plane()``: a control plane without
    controllers and without a template of its own, started here and stopped with its etcd data
    taken. None when that fails (an unwritable cache, a bootstrap that did not start): the
    template only saves time, and the caller then bootstraps itself and reports any error.
    ``timeout``: for the API server to create the ``kubernetes`` Service."""
    planes: list[BootstrapPlane] = []
    objects: list[dict[str, list[str]] | None] = []

    def build() -> Path:
        plane = new_plane()
        planes.append(plane)
        plane.start()
        data_dir, found = _bootstrapped_data(plane, timeout)
        objects.append(found)
        return data_dir

    def remove(_data_dir: Path) -> None:
        for plane in planes:
            plane.stop()

    try:
        return ensure(template_key(binaries, shaping), build, remove, lambda: objects[-1])
    except (OSError, ControlPlaneError):
        return None
    finally:
        remove(Path())


def _bootstrapped_data(plane: BootstrapPlane, timeout: float) -> tuple[Path, dict[str, list[str]] | None]:
    """Stop ``plane``'s API server, then its etcd, cleanly (its data is complete then); return
    that data directory and the bootstrap objects the API server served."""
    from ktest.base.kubeconfig import credentials_directory
    from ktest.controlplane.apiserver import ApiServerClient

    processes = plane.processes()
    apiserver, etcd = processes["kube-apiserver"], processes["etcd"]
    credentials = credentials_directory(plane.kubeconfig)
    port = urlsplit(plane.server).port
    assert port is not None
    ca, cert, key = (credentials / name for name in ("ca.crt", "client.crt", "client.key"))
    client = ApiServerClient(port, ca, cert, key)
    _await_kubernetes_service(client, apiserver, timeout)
    found = client.bootstrap_objects()
    apiserver.stop()
    etcd.stop()  # last: the API server writes until it stops
    return plane.directory / "etcd", found


def _await_kubernetes_service(client: ApiServerClient, apiserver: ManagedProcess, timeout: float) -> None:
    """Wait for the API server to create the ``kubernetes`` Service, which the template keeps:
    a plane started on a copy has it at once, and points it at its own port
    (``ApiServerClient.point_kubernetes_service_here``)."""
    apiserver.wait_until(
        lambda: client.get("/api/v1/namespaces/default/services/kubernetes")[0] == 200,
        timeout=timeout,
        what="serving the kubernetes Service",
    )
