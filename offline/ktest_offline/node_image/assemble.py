"""Assemble a node image: the base image + Kubernetes binaries + preloaded component images.

A build container (labelled, so leftovers are swept) runs ``sleep infinity``;
the binaries, ``/kind/version`` and the component image archives are copied
in, ``preload.sh`` imports the archives into the node's containerd, and the
container is committed. The commit is untagged until it is checked; the
caller tags it (one atomic step), so the final tag never names half an image.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any

from ktest.assets.progress import Progress
from ktest.backends.kind import recipe
from ktest.base.interrupts import interrupts_held
from ktest.errors import KindError
from ktest_offline.node_image.archive import ImageSpec, write_binary_layer, write_image_archive
from ktest_offline.node_image.binaries import NodeBinaries

PRELOAD_SCRIPT = Path(__file__).with_name("preload.sh")
ENTRYPOINT = '["/usr/local/bin/entrypoint", "/sbin/init"]'
_SINGLE_BINARY_IMAGES = {
    # kubeadm's static pods run these by name through PATH; CoreDNS and pause use the entry point.
    "kube-apiserver": "/usr/local/bin/kube-apiserver",
    "kube-controller-manager": "/usr/local/bin/kube-controller-manager",
    "kube-scheduler": "/usr/local/bin/kube-scheduler",
    "etcd": "/usr/local/bin/etcd",
    "coredns": "/coredns",
    "pause": "/pause",
}
# Where the node itself keeps its binaries (as in kind's own images).
_NODE_PATHS = {
    "kubeadm": "usr/bin/kubeadm",
    "kubelet": "usr/bin/kubelet",
    "kubectl": "usr/bin/kubectl",
    "crictl": "usr/local/bin/crictl",
}


def component_archives(
    version: str, binaries: NodeBinaries, rootfs_tar: Path, scratch: Path, progress: Progress
) -> dict[str, Path]:
    """``{image reference: docker-save archive}`` for every image kubeadm will ask for."""
    wanted = recipe.expected_images(version)
    by_name = {reference.split("/")[-1].split(":")[0]: reference for reference in wanted}
    archives: dict[str, Path] = {}
    with progress.step(f"writing {len(wanted)} component image archives"):
        for name, reference in by_name.items():
            layer = scratch / f"{name}.layer.tar"
            if name == "kube-proxy":
                write_binary_layer(layer, {"usr/local/bin/kube-proxy": binaries[name]}, minimal_etc=False)
                spec = ImageSpec(reference, [rootfs_tar, layer], ["/usr/local/bin/kube-proxy"])
            else:
                target = _SINGLE_BINARY_IMAGES[name]
                write_binary_layer(layer, {target: binaries[name]})
                spec = ImageSpec(reference, [layer], [target])
            archives[reference] = write_image_archive(scratch / f"{name}.tar", spec)
            layer.unlink()
    return archives


def _payload(version: str, binaries: NodeBinaries, archives: dict[str, Path], output: Path) -> Path:
    """One tar to extract at / in the build container."""
    with tarfile.open(output, "w", format=tarfile.PAX_FORMAT) as payload:
        for name, target in _NODE_PATHS.items():
            info = payload.gettarinfo(str(binaries[name]), arcname=target)
            info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "root", "root"
            with binaries[name].open("rb") as data:
                payload.addfile(info, data)
        _add_text(payload, "kind/version", f"v{version}\n", 0o644)
        _add_text(payload, "kind/ktest-preload.sh", PRELOAD_SCRIPT.read_text(), 0o755)
        images_dir = tarfile.TarInfo("kind/images")
        images_dir.type, images_dir.mode = tarfile.DIRTYPE, 0o755
        payload.addfile(images_dir)
        for archive in archives.values():
            info = payload.gettarinfo(str(archive), arcname=f"kind/images/{archive.name}")
            info.mode, info.uid, info.gid = 0o644, 0, 0
            with archive.open("rb") as data:
                payload.addfile(info, data)
    return output


def _add_text(archive: tarfile.TarFile, name: str, text: str, mode: int) -> None:
    import io

    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    archive.addfile(info, io.BytesIO(data))


def assemble(
    client: Any,
    base_image: str,
    version: str,
    binaries: NodeBinaries,
    archives: dict[str, Path],
    labels: dict[str, str],
    scratch: Path,
    progress: Progress,
) -> Any:
    """Build and commit the node image (untagged); returns the docker SDK Image."""
    payload = _payload(version, binaries, archives, scratch / "payload.tar")
    pause_image = next(ref for ref in archives if "/pause:" in ref)
    container: Any = None
    try:
        with interrupts_held():  # Ctrl-C mid-request would leave it made, unknown to the clean-up
            container = client.containers.create(
                base_image,
                entrypoint=["sleep", "infinity"],
                command=[],
                detach=True,
                labels={recipe.LABEL_BUILD_CONTAINER: recipe.BUILD_RUNNING},
                security_opt=["seccomp=unconfined"],
                name=f"{recipe.BUILD_CONTAINER_PREFIX}v{version}-{os.getpid()}",
            )
        container.start()
        copying = progress.step(f"copying binaries and {len(archives)} images into the node")
        with copying, payload.open("rb") as data:
            if not container.put_archive("/", data):
                raise KindError("copying the binaries into the build container failed")
        with progress.step("importing the component images into the node's containerd"):
            exit_code, output = container.exec_run(
                ["/bin/sh", "/kind/ktest-preload.sh", pause_image], demux=False
            )
        text = (output or b"").decode(errors="replace")
        if exit_code != 0:
            raise KindError(
                f"preloading the component images into the node image failed (exit {exit_code}):\n"
                + "\n".join(f"  {line}" for line in text.strip().splitlines()[-20:])
            )
        listed = set(text.split())
        absent = [reference for reference in archives if reference not in listed]
        if absent:
            raise KindError(f"the node's containerd does not list {', '.join(absent)} after importing them")
        container.kill()
        container.wait()
        changes = [f"ENTRYPOINT {ENTRYPOINT}", 'CMD []']
        labels = {**labels, recipe.LABEL_BUILD_CONTAINER: recipe.BUILD_COMMITTED}
        changes += [f'LABEL {key}="{value}"' for key, value in sorted(labels.items())]
        with progress.step("committing the node image"):
            image = container.commit(changes=changes)
    finally:
        try:
            if container is not None:
                container.remove(force=True)
        except Exception:  # the next build's sweep removes it; the build's own error matters more
            progress.note(f"could not remove build container {container.name}; the next build removes it")
        payload.unlink(missing_ok=True)
    return image
