"""Load a local Docker image into the nodes of a kind cluster, skipping nodes that have it.

Nothing can be pulled inside a test cluster offline, and pods must find the
image in the node's containerd. ``:latest`` (or no tag) is refused by
default: its default pull policy is Always, so the kubelet would try to pull
it anyway (pytest-kind's API loads it and warns instead).
A node already holding the same image ID (the Docker image ID is the config
digest containerd reports) is skipped, so re-loading is nearly free.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ktest.backends.kind.cluster import run_kind
from ktest.errors import KindError


def is_latest(image: str) -> bool:
    """True for an untagged or ``:latest`` image name (not for a digest)."""
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return False
    tag = last.split(":", 1)[1] if ":" in last else ""
    return tag in ("", "latest")


def check_loadable_name(image: str) -> None:
    """Raise KindError for names whose pull policy defeats loading (``:latest`` or untagged)."""
    last = image.rsplit("/", 1)[-1]
    if is_latest(image):
        raise KindError(
            f"refusing to load {image!r}: an image tagged ':latest' (or untagged) gets "
            "imagePullPolicy Always, so the kubelet would try to pull it instead of using the loaded copy. "
            f"Tag it with a version (docker tag {image} {last.split(':')[0]}:dev) and use that tag, "
            "or set imagePullPolicy: IfNotPresent/Never in your manifests and load a non-latest tag"
        )


def docker_image_id(image: str) -> str:
    from docker.errors import DockerException, ImageNotFound

    from ktest.backends.kind.engine import connect

    try:
        return str(connect().images.get(image).id)
    except ImageNotFound:
        raise KindError(
            f"image {image!r} is not in the local Docker engine; build or pull it first "
            f"(`docker build -t {image} .`)"
        ) from None
    except DockerException as error:
        raise KindError(f"cannot inspect image {image!r}: {error}") from error


def node_images(node: str) -> dict[str, list[str]]:
    """The images in a node's containerd: image ID (config digest) → its tags; empty if unreadable."""
    try:
        finished = subprocess.run(
            ["docker", "exec", node, "crictl", "images", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if finished.returncode != 0:
        return {}
    try:
        listing = json.loads(finished.stdout).get("images") or []
    except ValueError:
        return {}
    return {str(entry.get("id")): list(entry.get("repoTags") or ()) for entry in listing}


def node_has_image(node: str, image: str, image_id: str) -> bool:
    """True when the node's containerd holds ``image`` under the same ID."""
    tagged = image if "@" in image or ":" in image.rsplit("/", 1)[-1] else f"{image}:latest"
    wanted = {tagged, f"docker.io/{tagged}", f"docker.io/library/{tagged}"}
    return bool(wanted.intersection(node_images(node).get(image_id, ())))


def load_image(
    kind: Path, cluster_name: str, nodes: list[str], image: str, *, allow_latest: bool = False
) -> list[str]:
    """Load ``image`` into the nodes that lack it; return the nodes it was loaded into.

    An untagged/``:latest`` name is refused unless ``allow_latest`` (pytest-kind's
    ``load_docker_image``, which warns instead)."""
    if not allow_latest:
        check_loadable_name(image)
    image_id = docker_image_id(image)
    needed = [node for node in nodes if not node_has_image(node, image, image_id)]
    if needed:
        run_kind(
            kind,
            ["load", "docker-image", image, "--name", cluster_name, "--nodes", ",".join(needed)],
            what=f"loading image {image} into kind cluster {cluster_name}",
            timeout=600.0,
        )
    return needed
