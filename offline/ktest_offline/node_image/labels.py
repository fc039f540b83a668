"""Node image names and labels: which local image, if any, is a usable ktest node image."""

from __future__ import annotations

from typing import Any

from ktest.assets.selectors import KubeVersion
from ktest.backends.kind import recipe
from ktest.backends.kind.image_sources import NodeImageInfo, local_node_images
from ktest_offline.node_image import coredns

# Which CoreDNS the image holds: its version, lean build, which plugins it lacks.
LABEL_COREDNS = recipe.LABEL_PREFIX + "coredns"


def _bare(version: str) -> str:
    return KubeVersion.parse(version).text


def node_image_tag(k8s_version: str) -> str:
    """``ktest/kind-node:v1.37.2`` for ``1.37.2`` (or ``v1.37.2``)."""
    return f"{recipe.NODE_IMAGE_REPOSITORY}:v{_bare(k8s_version)}"


def expected_labels(k8s_version: str) -> dict[str, str]:
    """The labels an image must carry to count as built by this ktest for ``k8s_version``."""
    labels = {
        recipe.LABEL_KUBERNETES_VERSION: f"v{_bare(k8s_version)}",
        recipe.LABEL_KIND_VERSION: recipe.KIND_VERSION,
        recipe.LABEL_RECIPE_VERSION: recipe.RECIPE_VERSION,
    }
    minor = recipe.MINORS.get(recipe.minor_of(k8s_version))
    if minor is not None:  # an unsupported minor has no image to find; asking is no error
        labels[LABEL_COREDNS] = coredns.description(minor.coredns)
    return labels


def find_node_image(k8s_version: str, *, client: Any = None) -> str | None:
    """The tag of a local ktest node image for ``k8s_version`` whose labels match; else None.

    An image under the right tag with missing or different labels does not count: it was
    made by another recipe (or by hand) and gets rebuilt.
    """
    from docker.errors import ImageNotFound

    from ktest.backends.kind.engine import connect

    client = client or connect(check_runtime=False)
    reference = node_image_tag(k8s_version)
    try:
        image = client.images.get(reference)
    except ImageNotFound:
        return None
    labels = image.labels or {}
    if all(labels.get(key) == value for key, value in expected_labels(k8s_version).items()):
        return reference
    return None


def list_node_images(*, include_unusable: bool = False, client: Any = None) -> list[NodeImageInfo]:
    """Local images of ``ktest/kind-node``, newest Kubernetes first; usable ones only by default
    (the core's listing: finding images needs no builder)."""
    return local_node_images(include_unusable=include_unusable, client=client)
