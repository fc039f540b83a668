"""The kind node image from a cache archive, else the registry: ``node_image.py load|save``.

``load --image kindest/node:v1.37.2 --archive PATH``: ``docker load`` the archive
when there is one and check it really holds that image (an archive holding
anything else is not trusted: removed, and the image pulled instead); without
an archive, pull. ``save``: ``docker save`` the image to the archive so the
action's cache step keeps it (a pulled node image is ~1 GB; loading it back is
much faster than a pull).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gha import CIError, fail, notice, set_outputs


def docker(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, check=False, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CIError(f"`docker {' '.join(args)}` could not run: {error}. Is Docker installed?") from error


def has_image(image: str) -> bool:
    return docker("image", "inspect", "--format", "{{.Id}}", image, timeout=60).returncode == 0


def load(image: str, archive: Path) -> str:
    """Make ``image`` present; returns how: ``present``, ``archive`` or ``pulled``."""
    if has_image(image):
        return "present"
    if archive.is_file():
        loaded = docker("load", "--input", str(archive))
        if loaded.returncode == 0 and has_image(image):
            return "archive"
        notice(
            f"cached archive {archive} did not give {image} "
            f"({(loaded.stderr or loaded.stdout).strip() or 'it holds another image'}); pulling instead"
        )
        archive.unlink()
    pulled = docker("pull", image)
    if pulled.returncode != 0:
        raise CIError(
            f"could not pull the kind node image {image}: {pulled.stderr.strip()}\n"
            "Without registry access build one offline: `ktest kind build-image --k8s-version "
            f"{image.rpartition(':v')[2]}` (tens of minutes, cached after)."
        )
    return "pulled"


def save(image: str, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    saved = docker("save", "--output", str(partial), image)
    if saved.returncode != 0:
        partial.unlink(missing_ok=True)
        raise CIError(f"`docker save {image}` failed: {saved.stderr.strip()}")
    partial.replace(archive)  # the cache never sees half an archive


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("load", "save"))
    parser.add_argument("--image", required=True, help="e.g. kindest/node:v1.37.2")
    parser.add_argument("--archive", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        if args.action == "load":
            set_outputs({"source": load(args.image, args.archive)})
        else:
            save(args.image, args.archive)
    except CIError as error:
        return fail(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
