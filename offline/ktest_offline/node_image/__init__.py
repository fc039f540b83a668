"""ktest's offline kind node images: build (``ktest kind build-image``), find and list them.

On a machine with internet, kind's official ``kindest/node`` images are the
simpler choice; these are for air-gapped machines (only package registries).
The kind backend reaches them through its node-image source plug-in point
(:mod:`ktest.backends.kind.image_sources`), never by importing this package.
"""

from __future__ import annotations

from ktest.assets.progress import Progress, as_progress
from ktest.backends.kind.image_sources import NodeImageInfo, resolve_version
from ktest_offline.node_image.labels import (
    expected_labels,
    find_node_image,
    list_node_images,
    node_image_tag,
)

__all__ = [
    "NodeImageInfo",
    "build_node_image",
    "expected_labels",
    "find_node_image",
    "list_node_images",
    "node_image_tag",
]


def build_node_image(k8s_version: str, *, force: bool = False, progress: bool | Progress = True) -> str:
    """Build the node image for ``k8s_version`` (a selector: ``1.37``, ``1.37.2``) unless a
    matching one exists; returns its tag.

    ``force`` rebuilds the image (cached parts are still reused). Raises
    KindError with what is wrong and how to fix it (engine, disk, Go, Debian mirror).
    """
    from ktest.backends.kind.cache import KindCache
    from ktest.backends.kind.engine import connect
    from ktest_offline.node_image.build import build

    shown = as_progress(progress)
    version = resolve_version(k8s_version)
    client = connect()
    return build(client, version, force=force, progress=shown, cache=KindCache.from_env()).reference
