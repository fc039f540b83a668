"""The node base image: the Debian root filesystem plus kind's base files, configured for systemd.

It holds nothing Kubernetes-version specific, so every node image shares it.
Two cached images under ``ktest/kind-parts``:

* ``rootfs-<key>``: ``docker import`` of the debootstrap tar;
* ``base-<key>``: a one-stage legacy ``docker build`` on top of it that copies
  kind's base files (entrypoint, systemd units, containerd config; from the
  kind module in the Go module cache) and ktest's own (CNI, storage class),
  runs ``ktest-configure.sh``, and sets ``STOPSIGNAL`` (which ``docker
  import``/``commit`` cannot).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ktest.assets.gotool import GoTool
from ktest.assets.progress import Progress
from ktest.backends.kind import recipe
from ktest.errors import KindError

OUR_FILES = Path(__file__).with_name("files")
_EXECUTABLE_DIRECTORIES = ("usr/local/bin", "kind/bin")
_DOCKERFILE = """\
FROM {rootfs}
COPY root/ /
RUN ["/bin/sh", "/kind/ktest-configure.sh"]
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
"""


def kind_base_files(go: GoTool) -> Path:
    """``images/base/files`` of the pinned kind module (downloaded into the Go module cache)."""
    target = f"{recipe.KIND_MODULE}@{recipe.KIND_VERSION}"
    finished = subprocess.run(
        [go.path, "mod", "download", "-json", target],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"},
    )
    try:
        directory = Path(json.loads(finished.stdout)["Dir"]) / "images" / "base" / "files"
    except (ValueError, KeyError):
        raise KindError(
            f"`go mod download {target}` failed: {(finished.stderr or finished.stdout).strip()[-1000:]}\n"
            "Check that the Go module proxy (GOPROXY) is reachable."
        ) from None
    if not (directory / "usr" / "local" / "bin" / "entrypoint").is_file():
        raise KindError(
            f"{directory} lacks usr/local/bin/entrypoint: is {target} intact in the Go module cache?"
        )
    return directory


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path.relative_to(root).as_posix(), path


def _mode(relative: str) -> int:
    executable = relative.endswith(".sh") or any(
        relative.startswith(directory + "/") for directory in _EXECUTABLE_DIRECTORIES
    )
    return 0o755 if executable else 0o644


def build_context(kind_files: Path, rootfs_image: str) -> bytes:
    """The build context: Dockerfile + kind's base files + ktest's files, with kind's file modes."""
    buffer = io.BytesIO()
    files = {**dict(_walk(kind_files)), **dict(_walk(OUR_FILES))}
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        dockerfile = _DOCKERFILE.format(rootfs=rootfs_image).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        archive.addfile(info, io.BytesIO(dockerfile))
        directories: set[str] = set()
        for relative in files:
            parts = ["root", *relative.split("/")[:-1]]
            directories.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(info)
        for relative, path in sorted(files.items()):
            data = path.read_bytes()
            info = tarfile.TarInfo(f"root/{relative}")
            info.size, info.mode = len(data), _mode(relative)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def context_digest(context: bytes) -> str:
    return hashlib.sha256(context).hexdigest()[:12]


def image_exists(client: Any, reference: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(reference)
        return True
    except ImageNotFound:
        return False


def import_rootfs(client: Any, rootfs_tar: Path, reference: str, progress: Progress) -> str:
    """``docker import`` the root filesystem tar as ``reference`` unless it exists."""
    if image_exists(client, reference):
        return reference
    repository, tag = reference.rsplit(":", 1)
    with progress.step(f"importing the root filesystem into Docker as {reference}"):
        output = client.api.import_image(src=str(rootfs_tar), repository=repository, tag=tag)
    if not image_exists(client, reference):
        raise KindError(f"`docker import` of {rootfs_tar} did not create {reference}: {str(output)[-500:]}")
    return reference


def build_base(
    client: Any, context: bytes, reference: str, labels: dict[str, str], progress: Progress
) -> str:
    """Build ``reference`` from ``context`` with the legacy builder; steps shown as progress."""
    if image_exists(client, reference):
        return reference
    lines: list[str] = []
    with progress.step(f"building the node base image {reference}"):
        for chunk in client.api.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=reference, rm=True, forcerm=True,
            labels=labels, decode=True, nocache=False,
        ):
            if "error" in chunk:
                tail = "\n".join(f"  {line}" for line in lines[-15:])
                raise KindError(f"building the node base image failed: {chunk['error'].strip()}\n{tail}")
            text = str(chunk.get("stream", "")).rstrip()
            if text:
                lines.extend(text.splitlines())
                if text.startswith("Step "):
                    progress.note(f"  {text}")
    if not image_exists(client, reference):
        raise KindError(f"the base image build finished without tagging {reference}")
    return reference
