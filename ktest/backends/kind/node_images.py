"""Which kind node images the Docker engine holds, per Kubernetes version: backend kind's
``versions`` part (what ``ktest versions`` says of kind).

Both kinds count: ktest's own (``ktest/kind-node:v<version>``, from ``ktest kind build-image``)
and kind's official ``kindest/node:v<version>``. Without a reachable engine the answer is
"unknown", with the reason, never "absent".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ktest.backends.kind.node_choice import OFFICIAL_REPOSITORY
from ktest.backends.kind.recipe import KIND_VERSION, NODE_IMAGE_REPOSITORY
from ktest.errors import KtestError
from ktest.extension import BackendVersions


@dataclass(frozen=True)
class NodeImageInventory:
    """The node images found (``{"1.37.2": ["ktest/kind-node:v1.37.2"]}``), or why none could be
    looked for (``unknown`` set: no Docker engine, no docker package)."""

    by_version: dict[str, list[str]] = field(default_factory=dict)
    unknown: str = ""

    def for_minor(self, minor: str) -> list[str]:
        """The references of every node image of ``minor`` (``"1.37"``), newest first."""
        found = [
            (version, reference)
            for version, references in self.by_version.items()
            if version.startswith(minor + ".")
            for reference in references
        ]
        found.sort(key=lambda item: tuple(int(p) for p in item[0].split(".")), reverse=True)
        return [reference for _, reference in found]


def _version_of(tag: str) -> str | None:
    """``1.37.2`` for ``ktest/kind-node:v1.37.2``; None for other repositories or tags."""
    repository, _, version = tag.rpartition(":")
    if repository not in (NODE_IMAGE_REPOSITORY, OFFICIAL_REPOSITORY) or not version.startswith("v"):
        return None
    parts = version[1:].split(".")
    return version[1:] if len(parts) == 3 and all(p.isdigit() for p in parts) else None


def node_image_inventory() -> NodeImageInventory:
    """Ask the Docker engine (``DOCKER_HOST``) for its kind node images."""
    try:
        from docker.errors import DockerException

        from ktest.backends.kind.engine import connect
    except ImportError:
        return NodeImageInventory(unknown="unknown (no Docker engine: the docker package is missing; "
                                          "pip install 'ktest[kind]')")
    try:
        client = connect(check_runtime=False)
    except KtestError:
        return NodeImageInventory(unknown="unknown (no Docker engine)")
    by_version: dict[str, list[str]] = {}
    try:
        for repository in (NODE_IMAGE_REPOSITORY, OFFICIAL_REPOSITORY):
            for image in client.images.list(name=repository):
                for tag in image.tags:
                    version = _version_of(tag)
                    if version is not None:
                        by_version.setdefault(version, []).append(tag)
    except DockerException as error:
        return NodeImageInventory(unknown=f"unknown (the Docker engine did not list images: {error})")
    finally:
        client.close()
    return NodeImageInventory(by_version=by_version)


def versions() -> BackendVersions:
    """Backend kind's part of ``ktest versions``: kind's version and the node images held here."""
    return BackendVersions(
        tool="kind",
        version=KIND_VERSION,
        node_images=node_image_inventory(),
        build_hint="ktest kind build-image --k8s-version {minor}",
    )
