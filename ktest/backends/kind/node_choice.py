"""Which node image a kind cluster for a Kubernetes version selector runs, and its cluster config.

Order: a local ktest image (``ktest kind build-image``) whose labels match;
else kind's official ``kindest/node:v<version>`` if the engine has it or can
pull it; else a KindError naming ``ktest kind build-image``. The cluster
config is ktest's own needs (what the image requires, e.g. its CNI) merged
with the user's extra kind config file, validated first.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ktest.errors import KindError

OFFICIAL_REPOSITORY = "kindest/node"
KIND_API_VERSION = "kind.x-k8s.io/v1alpha4"
# Keys of kind's v1alpha4 Cluster that a user's extra config may set.
_ALLOWED_KEYS = {
    "kind",
    "apiVersion",
    "nodes",
    "networking",
    "featureGates",
    "runtimeConfig",
    "kubeadmConfigPatches",
    "kubeadmConfigPatchesJSON6902",
    "containerdConfigPatches",
    "containerdConfigPatchesJSON6902",
}
_NODE_ROLES = ("control-plane", "worker")


@dataclass(frozen=True)
class NodeImage:
    """The image a cluster will run: its reference, exact Kubernetes version and whether ktest built it."""

    reference: str
    version: str
    ktest_built: bool


def choose_node_image(selector: str | None) -> NodeImage:
    """The node image for ``selector`` (``1.37``, ``1.37.2``, None = newest available)."""
    from ktest.assets.selectors import parse_selector
    from ktest.assets.sources import INSTALL_OFFLINE
    from ktest.backends.kind import image_sources

    parsed = parse_selector(selector or "latest")
    # Newest Kubernetes first, as listed; the core finds these with no builder installed.
    local = [
        found
        for found in image_sources.list_node_images(include_unusable=True)
        if parsed.matches(found.k8s_version)
    ]
    usable = [found for found in local if found.usable]
    if usable:
        return NodeImage(usable[0].reference, usable[0].k8s_version, True)
    version = image_sources.resolve_version(selector)
    official = f"{OFFICIAL_REPOSITORY}:v{version}"
    if _have_or_pull(official):
        return NodeImage(official, version, False)
    unusable = "".join(
        f"\n- {found.reference} is in the Docker engine but cannot be used: {found.unusable_because}."
        for found in local
    )
    raise KindError(
        f"no kind node image for Kubernetes {selector or 'latest'}: no usable local ktest image "
        f"(`ktest kind images --all` lists them) and {official} is neither in the Docker engine nor pullable "
        f"(no registry access?).{unusable}\nBuild one offline, once (tens of minutes cold, cached after): "
        f"`ktest kind build-image --k8s-version {version}` (it needs ktest's builders: {INSTALL_OFFLINE})"
    )


def configured_node_image(
    reference: str, selector: str | None, *, source: str = "ktest_kind_image"
) -> NodeImage:
    """The node image the user named (``ktest_kind_image``, ``name:tag`` or ``name:tag@sha256:...``),
    with the Kubernetes version it runs: from ktest's labels, else kind's ``/kind/version`` file.

    Raises KindError naming ``source`` when the engine has not got the image and cannot pull it,
    or when it runs another version than ``selector`` (the version setting) asks for."""
    from docker.errors import DockerException, ImageNotFound

    from ktest.assets.selectors import parse_selector
    from ktest.backends.kind import recipe
    from ktest.backends.kind.engine import connect

    client = connect()
    try:
        image = client.images.get(reference)
    except ImageNotFound:
        image = None
    except DockerException as error:
        raise KindError(
            f"{source}: cannot look up node image {reference} in the Docker engine: {error}"
        ) from None
    if image is None and _have_or_pull(reference):
        image = client.images.get(reference)
    if image is None:
        pinned = (
            " A digest-pinned reference matches an image pulled from a registry (`docker image inspect` "
            "lists the digest under RepoDigests); a locally built or loaded image has none: give its tag."
            if "@" in reference
            else ""
        )
        raise KindError(
            f"{source}: node image {reference} is not in the Docker engine and cannot be pulled (no registry "
            f"access?).{pinned} `docker images` lists the local ones; offline, `ktest kind build-image` "
            "builds one (ktest/kind-node:v<version>)"
        )
    labels = image.labels or {}
    ktest_built = recipe.LABEL_RECIPE_VERSION in labels
    version_text = labels.get(recipe.LABEL_KUBERNETES_VERSION) or _kind_version_file(client, image.id)
    if not version_text:
        raise KindError(
            f"{source}: {reference} is not a kind node image: it has neither ktest's label "
            f"{recipe.LABEL_KUBERNETES_VERSION} nor kind's /kind/version file"
        )
    version = version_text.strip().removeprefix("v")
    wanted = parse_selector(selector or "latest")
    if selector is not None and not wanted.matches(version):
        raise KindError(
            f"{source}: node image {reference} runs Kubernetes {version}, but the version setting asks for "
            f"{selector}; give an image of {selector}, or drop the version setting (the image decides)"
        )
    return NodeImage(reference, version, ktest_built)


def _kind_version_file(client: Any, image_id: str) -> str:
    """The text of ``/kind/version`` in the image (kind reads it to pick its kubeadm config), or ""."""
    from docker.errors import DockerException, NotFound

    from ktest.backends.kind.cluster import read_container_file

    container = client.containers.create(image_id, command=["true"])
    try:
        return (read_container_file(container, "/kind/version") or b"").decode().strip()
    except NotFound:
        return ""
    finally:
        with contextlib.suppress(DockerException):
            container.remove(force=True)


def _have_or_pull(reference: str) -> bool:
    from docker.errors import DockerException, ImageNotFound

    from ktest.backends.kind.engine import connect

    client = connect()
    try:
        client.images.get(reference)
        return True
    except ImageNotFound:
        pass
    except DockerException:
        return False
    try:
        client.images.pull(reference)
        return True
    except DockerException:
        return False


# -------------------------------------------------------------------- cluster config


def load_extra_config(path: Path) -> dict[str, Any]:
    """The user's extra kind config, validated: names the file and the key that is wrong."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise KindError(f"kind config {path}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise KindError(
            f"kind config {path}{where}: not valid YAML ({getattr(error, 'problem', error)})"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KindError(f"kind config {path}: expected a kind Cluster mapping, found {type(data).__name__}")
    problems = []
    if data.get("kind", "Cluster") != "Cluster":
        problems.append(f"kind: {data['kind']!r} (must be Cluster)")
    if data.get("apiVersion", KIND_API_VERSION) != KIND_API_VERSION:
        problems.append(f"apiVersion: {data['apiVersion']!r} (must be {KIND_API_VERSION})")
    if "name" in data:
        problems.append(
            "name: ktest names its clusters itself (ktest-…, so it never touches yours); remove it"
        )
    for key in sorted(set(data) - _ALLOWED_KEYS - {"name"}):
        problems.append(f"{key}: not a kind Cluster key (allowed: {', '.join(sorted(_ALLOWED_KEYS))})")
    nodes = data.get("nodes")
    if nodes is not None:
        if not isinstance(nodes, list) or not nodes:
            problems.append("nodes: must be a non-empty list of {role: control-plane|worker}")
        else:
            roles = [node.get("role") if isinstance(node, dict) else None for node in nodes]
            for index, role in enumerate(roles):
                if role not in _NODE_ROLES:
                    problems.append(f"nodes[{index}].role: {role!r} (must be control-plane or worker)")
            if "control-plane" not in roles:
                problems.append("nodes: needs at least one control-plane node")
    for key in ("networking", "featureGates", "runtimeConfig"):
        if key in data and not isinstance(data[key], dict):
            problems.append(f"{key}: must be a mapping")
    for key in ("kubeadmConfigPatches", "containerdConfigPatches"):
        if key in data and not (isinstance(data[key], list) and all(isinstance(p, str) for p in data[key])):
            problems.append(f"{key}: must be a list of YAML strings")
    if problems:
        raise KindError(f"kind config {path} is not usable:\n" + "\n".join(f"  - {p}" for p in problems))
    return data


def merge_config(
    required: Mapping[str, Any], extra: Mapping[str, Any], *, source: str = ""
) -> dict[str, Any]:
    """ktest's required config with the user's extra config merged in.

    Lists of patches are concatenated (ktest's first); ``networking`` keys the
    image requires win, and a user value contradicting one is an error.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(required))
    merged.setdefault("kind", "Cluster")
    merged.setdefault("apiVersion", KIND_API_VERSION)
    for key, value in extra.items():
        if key in ("kind", "apiVersion"):
            continue
        if isinstance(value, list) and key != "nodes":
            merged[key] = [*merged.get(key, []), *value]
        elif key == "networking":
            networking = dict(merged.get("networking") or {})
            for inner, inner_value in value.items():
                if inner in networking and networking[inner] != inner_value:
                    raise KindError(
                        f"kind config {source or '(extra)'}: networking.{inner}: {inner_value!r} conflicts "
                        f"with what the node image needs ({networking[inner]!r}); remove it from your config"
                    )
                networking[inner] = inner_value
            merged["networking"] = networking
        elif isinstance(value, dict):
            merged[key] = {**(merged.get(key) or {}), **value}
        else:
            merged[key] = copy.deepcopy(value)
    return merged
