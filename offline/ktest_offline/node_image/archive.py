"""Image archives in ``docker save`` format, written directly (no engine round trip).

The component images a node preloads (kube-apiserver, etcd, coredns, pause, ...)
are tiny: a static binary plus ``/etc/passwd``, ``/etc/group`` and ``/tmp``.
Writing their archive here avoids tagging ``registry.k8s.io/...`` names in the
user's Docker engine. containerd's ``ctr images import`` reads the format.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ktest.assets.store import host_arch

IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
_GROUP = "root:x:0:\nnobody:x:65534:\n"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageSpec:
    """One image to archive: its name, layer tars (bottom first) and entry point."""

    reference: str
    layers: Sequence[Path]
    entrypoint: Sequence[str]
    env: Sequence[str] = field(default_factory=lambda: (f"PATH={IMAGE_PATH}",))
    created: str = "1970-01-01T00:00:00Z"


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    archive.addfile(info, io.BytesIO(data))


def _add_directory(archive: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    archive.addfile(info)


def write_binary_layer(output: Path, binaries: dict[str, Path], *, minimal_etc: bool = True) -> Path:
    """A layer holding ``{path in image: binary}`` (mode 0755), plus a minimal /etc and /tmp
    unless the layer goes on top of a full root filesystem (``minimal_etc=False``)."""
    with tarfile.open(output, "w", format=tarfile.PAX_FORMAT) as archive:
        directories = {"etc", "tmp"} if minimal_etc else set()
        for target in binaries:
            parts = target.strip("/").split("/")[:-1]
            directories.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for directory in sorted(directories):
            _add_directory(archive, directory, 0o1777 if directory == "tmp" else 0o755)
        if minimal_etc:
            _add_bytes(archive, "etc/passwd", _PASSWD.encode())
            _add_bytes(archive, "etc/group", _GROUP.encode())
        for target, source in sorted(binaries.items()):
            info = archive.gettarinfo(str(source), arcname=target.strip("/"))
            info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "root", "root"
            info.mtime = 0
            with source.open("rb") as data:
                archive.addfile(info, data)
    return output


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_image_archive(output: Path, spec: ImageSpec) -> Path:
    """Write ``spec`` as a ``docker save`` archive (manifest.json, config, one dir per layer)."""
    diff_ids = [_sha256(layer) for layer in spec.layers]
    config = {
        "architecture": host_arch(),
        "os": "linux",
        "created": spec.created,
        "config": {"Env": list(spec.env), "Entrypoint": list(spec.entrypoint), "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created": spec.created, "created_by": "ktest kind build-image"} for _ in diff_ids],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [
        {
            "Config": config_name,
            "RepoTags": [spec.reference],
            "Layers": [f"{d}/layer.tar" for d in diff_ids],
        }
    ]
    with tarfile.open(output, "w", format=tarfile.PAX_FORMAT) as archive:
        for digest, layer in zip(diff_ids, spec.layers, strict=True):
            _add_directory(archive, digest)
            _add_bytes(archive, f"{digest}/VERSION", b"1.0")
            info = archive.gettarinfo(str(layer), arcname=f"{digest}/layer.tar")
            info.mode, info.uid, info.gid, info.uname, info.gname, info.mtime = 0o644, 0, 0, "", "", 0
            with layer.open("rb") as data:
                archive.addfile(info, data)
        _add_bytes(archive, config_name, config_bytes)
        _add_bytes(archive, "manifest.json", json.dumps(manifest).encode())
    return output
