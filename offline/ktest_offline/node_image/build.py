"""``build_node_image``: the ordered steps that turn Go modules and Debian packages into a node image.

Each step reports what it does and how long it took; every part is cached
(Go binaries, the root filesystem tar, the ``ktest/kind-parts`` images), so
an interrupted build resumes where it stopped. One build at a time per
machine (a file lock); build containers a dead build left are removed first.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ktest.assets.gotool import require_go
from ktest.assets.progress import Progress, format_duration, holding_lock
from ktest.backends.kind import recipe
from ktest.backends.kind.cache import KindCache
from ktest.errors import KindError
from ktest_offline.node_image import assemble, base, rootfs
from ktest_offline.node_image.binaries import NODE_METADATA_FILE, NodeBinaries, node_binaries
from ktest_offline.node_image.labels import expected_labels, find_node_image, node_image_tag

GIB = 1024**3
# Free space a step needs where it writes (measured on a cold build, rounded up).
_GO_BUILD_BYTES = 6 * GIB
_ROOTFS_BYTES = 1 * GIB
_DOCKER_BYTES = 3 * GIB
T = TypeVar("T")


@dataclass
class BuildReport:
    """What one build did: seconds per step, for the log and ``<cache>/kind/builds/``."""

    version: str
    reference: str
    steps: dict[str, float] = field(default_factory=dict)
    reused: bool = False


class StepRunner:
    """Runs numbered steps with a status line each: ``[3/8] building ... done in 2m10s``."""

    def __init__(self, total: int, progress: Progress, report: BuildReport) -> None:
        self.total = total
        self.progress = progress
        self.report = report
        self.number = 0

    def run(self, title: str, action: Callable[[], T]) -> T:
        self.number += 1
        started = time.monotonic()
        self.progress.note(f"[{self.number}/{self.total}] {title}")
        try:
            return action()
        finally:
            elapsed = time.monotonic() - started
            self.report.steps[title] = round(elapsed, 1)
            self.progress.note(f"[{self.number}/{self.total}] {title}: {format_duration(elapsed)}")


def _free_bytes(path: Path) -> tuple[Path, int]:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return probe, shutil.disk_usage(probe).free


def check_disk(cache: KindCache, docker_root: str, version: str) -> None:
    """KindError before starting when the parts still to build will not fit."""
    needs: dict[tuple[int, str], int] = {}

    def need(path: Path, amount: int) -> None:
        where, _ = _free_bytes(path)
        key = (os.stat(where).st_dev, str(where))
        needs[key] = needs.get(key, 0) + amount

    if not (cache.node_binaries(version) / NODE_METADATA_FILE).is_file():
        need(Path(os.environ.get("GOMODCACHE") or Path.home() / "go"), _GO_BUILD_BYTES)
    if not cache.rootfs(rootfs.rootfs_key()).is_file():
        need(cache.root, _ROOTFS_BYTES)
    need(Path(docker_root) if Path(docker_root).exists() else Path("/"), _DOCKER_BYTES)
    by_device: dict[int, tuple[str, int]] = {}
    for (device, where), amount in needs.items():
        previous = by_device.get(device, (where, 0))
        by_device[device] = (previous[0], previous[1] + amount)
    for where, amount in by_device.values():
        free = shutil.disk_usage(where).free
        if free < amount:
            raise KindError(
                f"not enough disk space to build the kind node image for Kubernetes {version}: "
                f"the parts still to build need about {amount / GIB:.1f} GiB on the file system of "
                f"{where}, which has {free / GIB:.1f} GiB free (Go module and build caches, the root "
                "filesystem, Docker's image store).\nFree some space (e.g. `docker image prune`, "
                "`go clean -cache`) or point XDG_CACHE_HOME/GOCACHE at a larger disk."
            )


def sweep_build_containers(client: Any, progress: Progress) -> int:
    """Remove build containers an interrupted build left (only called with the build lock held)."""
    running = f"{recipe.LABEL_BUILD_CONTAINER}={recipe.BUILD_RUNNING}"
    leftovers = [
        container
        for container in client.containers.list(all=True, filters={"label": running})
        if container.name.startswith(recipe.BUILD_CONTAINER_PREFIX)
    ]
    for container in leftovers:
        progress.note(f"removing build container {container.name} left by an interrupted build")
        container.remove(force=True)
    return len(leftovers)


@contextlib.contextmanager
def build_lock(cache: KindCache, progress: Progress) -> Iterator[None]:
    cache.root.mkdir(parents=True, exist_ok=True)
    with holding_lock(cache.build_lock, progress, "another ktest process is building a node image"):
        yield


def check_kubeadm_images(kubeadm: Path, version: str) -> None:
    """The images kubeadm will ask for must be exactly the ones the recipe preloads."""
    expected = recipe.expected_images(version)
    finished = subprocess.run(
        [str(kubeadm), "config", "images", "list", "--kubernetes-version", f"v{version}"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    listed = [line.strip() for line in finished.stdout.splitlines() if line.strip()]
    if finished.returncode != 0 or sorted(listed) != sorted(expected):
        raise KindError(
            f"kubeadm v{version} expects other component images than ktest's recipe preloads.\n"
            f"  kubeadm config images list: {', '.join(listed) or finished.stderr.strip()[-300:]}\n"
            f"  recipe (ktest/assets/minors.py MINORS[{recipe.minor_of(version)!r}]): {', '.join(expected)}\n"
            "Update the recipe's versions for this minor (and bump RECIPE_VERSION)."
        )


def _record(cache: KindCache, report: BuildReport) -> None:
    directory = cache.root / "builds"
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "version": report.version,
        "reference": report.reference,
        "steps": report.steps,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (directory / f"v{report.version}.json").write_text(json.dumps(record, indent=2) + "\n")


def build(client: Any, version: str, *, force: bool, progress: Progress, cache: KindCache) -> BuildReport:
    """Build (or find) the node image for the exact ``version``; see ``build_node_image``."""
    reference = node_image_tag(version)
    report = BuildReport(version, reference)
    if not force and find_node_image(version, client=client) is not None:
        progress.note(
            f"{reference} is up to date (labels match kind {recipe.KIND_VERSION}, "
            f"recipe {recipe.RECIPE_VERSION}); nothing to build"
        )
        report.reused = True
        return report
    check_disk(cache, str(client.info().get("DockerRootDir") or "/var/lib/docker"), version)
    steps = StepRunner(6, progress, report)
    started = time.monotonic()
    # Files on disk, each behind its own lock: builds of other versions may run meanwhile. The
    # root filesystem (debootstrap: downloads and disk) is made while the Go builds use the CPU.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ktest-rootfs") as pool:
        rootfs_made = pool.submit(rootfs.build_rootfs, cache.rootfs(rootfs.rootfs_key()), progress)
        binaries: NodeBinaries = steps.run(
            f"Kubernetes {version} binaries, etcd, CoreDNS, crictl, pause (cached after the first build)",
            lambda: node_binaries(version, cache, progress),
        )
        steps.run(
            "checking kubeadm's image list against the recipe",
            lambda: check_kubeadm_images(binaries["kubeadm"], version),
        )
        rootfs_tar = steps.run(
            f"Debian {recipe.DEBIAN_SUITE} root filesystem (made meanwhile; cached after the first build)",
            rootfs_made.result,
        )
    # Images in the engine: one build at a time, which is what makes the leftover sweep safe.
    with build_lock(cache, progress):
        if not force and find_node_image(version, client=client) is not None:
            progress.note(f"{reference} was built by another process meanwhile")
            report.reused = True
            return report
        sweep_build_containers(client, progress)
        prune_replaced_images(client)
        _image_steps(client, version, binaries, rootfs_tar, steps, cache, report)
    progress.note(f"built {report.reference} in {format_duration(time.monotonic() - started)}")
    _record(cache, report)
    return report


def _image_steps(
    client: Any,
    version: str,
    binaries: NodeBinaries,
    rootfs_tar: Path,
    steps: StepRunner,
    cache: KindCache,
    report: BuildReport,
) -> None:
    progress = steps.progress

    def base_image() -> str:
        go = require_go("reading kind's base image files")
        kind_files = base.kind_base_files(go)
        rootfs_image = base.import_rootfs(
            client, rootfs_tar, f"{recipe.PARTS_REPOSITORY}:rootfs-{rootfs.rootfs_key()}", progress
        )
        context = base.build_context(kind_files, rootfs_image)
        reference = f"{recipe.PARTS_REPOSITORY}:base-{base.context_digest(context)}"
        labels = {recipe.LABEL_KIND_VERSION: recipe.KIND_VERSION, recipe.LABEL_PREFIX + "part": "base"}
        return base.build_base(client, context, reference, labels, progress)

    base_reference = steps.run("node base image (cached after the first build)", base_image)
    cache.scratch.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"v{version}-", dir=cache.scratch))
    try:
        archives = steps.run(
            "component images (kube-apiserver, etcd, CoreDNS, pause, ...)",
            lambda: assemble.component_archives(version, binaries, rootfs_tar, scratch, progress),
        )
        labels = expected_labels(version)
        labels[recipe.LABEL_BUILD_DATE] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        labels[recipe.LABEL_PREFIX + "part"] = "node"

        def node_image() -> None:
            image = assemble.assemble(
                client, base_reference, version, binaries, archives, labels, scratch, progress
            )
            _tag(client, image, report.reference, version)

        steps.run(f"node image {report.reference}", node_image)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _tag(client: Any, image: Any, reference: str, version: str) -> None:
    """Check the committed image's labels, then move the tag to it and drop the image it replaces."""
    from docker.errors import APIError, ImageNotFound

    image.reload()
    labels = image.labels or {}
    wrong = {k: v for k, v in expected_labels(version).items() if labels.get(k) != v}
    if wrong:
        client.images.remove(image.id, force=True)
        raise KindError(f"the committed node image lacks the labels {wrong}; not tagging it {reference}")
    try:
        previous = client.images.get(reference)
    except ImageNotFound:
        previous = None
    repository, tag = reference.rsplit(":", 1)
    image.tag(repository, tag)
    if previous is not None and previous.id != image.id:
        with contextlib.suppress(APIError):
            client.images.remove(previous.id)  # refused while a cluster still runs it
    prune_replaced_images(client)


def prune_replaced_images(client: Any) -> None:
    """Drop node images that lost their tag to a newer build and that no container uses any more."""
    from docker.errors import APIError

    with contextlib.suppress(APIError):
        client.images.prune(filters={"dangling": True, "label": f"{recipe.LABEL_PREFIX}part=node"})
