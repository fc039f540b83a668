"""ktest's offline kind node images: build (``ktest kind build-image``), find and list them.

On a machine with internet, kind's official ``kindest/node`` images are the
simpler choice; these are for air-gapped machines (only package registries).
"""

from __future__ import annotations

from ktest.assets.progress import Progress, as_progress
from ktest.errors import KindError
from ktest.kind import recipe
from ktest.kind.image.labels import (
    NodeImageInfo,
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
    "resolve_version",
]


def resolve_version(selector: str | None) -> str:
    """``1.37.2`` for ``1.37.2``/``v1.37.2``/``1.37``/``latest``/None (newest known patch)."""
    from ktest.assets import store, versions
    from ktest.assets.gobuild import find_go
    from ktest.assets.selectors import parse_selector
    from ktest.errors import AssetsError

    text = (selector or "").strip() or recipe.DEFAULT_MINOR
    try:
        parsed = parse_selector(text)
    except AssetsError as error:
        raise KindError(f"--k8s-version {selector!r}: {error}") from None
    if not parsed.is_latest:
        recipe.minor_recipe(text)  # an unsupported minor: KindError naming the supported ones
    if parsed.is_exact:
        version = parsed.exact_version
    else:
        go = find_go()
        known = versions.known_versions(
            store.Locations.from_env(), go=go.path if go else None, downloader=None,
            progress=Progress(enabled=False),
        )
        chosen = parsed.newest_match(v for v in known.all() if recipe.minor_of(v) in recipe.MINORS)
        if chosen is None:
            raise KindError(
                f"no known Kubernetes release matches {selector!r} among the minors ktest's node images "
                f"support ({', '.join(recipe.MINORS)}); known releases: {known.describe()}.\n"
                "Give an exact version such as 1.37.2."
            )
        version = chosen
    recipe.minor_recipe(version)  # unsupported minor: KindError
    return version


def build_node_image(k8s_version: str, *, force: bool = False, progress: bool | Progress = True) -> str:
    """Build the node image for ``k8s_version`` unless a matching one exists; returns its tag.

    ``force`` rebuilds the image (cached parts are still reused). Raises
    KindError with what is wrong and how to fix it (engine, disk, Go, Debian mirror).
    """
    from ktest.kind.cache import KindCache
    from ktest.kind.engine import connect
    from ktest.kind.image.build import build

    shown = as_progress(progress)
    version = resolve_version(k8s_version)
    client = connect()
    return build(client, version, force=force, progress=shown, cache=KindCache.from_env()).reference
