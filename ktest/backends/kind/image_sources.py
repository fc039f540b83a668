"""Node-image sources from other distributions: where ``ktest kind build-image`` and the kind
backend find and build node images besides kind's official ``kindest/node``.

On a machine with registry access the kind backend runs ``kindest/node:v<version>``.
A machine without one runs ktest's own ``ktest/kind-node:v<version>`` images: the core finds
and uses the ones the Docker engine already holds (by repository and labels), with no builder
installed. *Building* one needs a *node-image source*, registered by another distribution as an
entry point in the group ``ktest.node_image_sources`` (``ktest-offline``, in this repository's
``offline/``, assembles images from Go-built binaries and a Debian root file system). The entry
points are read only when an image is built or a source's own images are listed; the core never
imports a source's package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, runtime_checkable

from ktest.assets.progress import Progress, as_progress
from ktest.assets.sources import INSTALL_OFFLINE, load_plugins
from ktest.backends.kind import recipe
from ktest.errors import KindError

NODE_IMAGE_SOURCES_GROUP = "ktest.node_image_sources"


@dataclass(frozen=True)
class NodeImageInfo:
    """A local node image a source built, and what its labels say."""

    reference: str
    image_id: str
    k8s_version: str
    kind_version: str
    recipe_version: str
    build_date: str
    size: int

    @property
    def usable(self) -> bool:
        """Made by this ktest's recipe for its kind version (else it would be rebuilt)."""
        return self.kind_version == recipe.KIND_VERSION and self.recipe_version == recipe.RECIPE_VERSION

    @property
    def unusable_because(self) -> str:
        """Why this ktest cannot run the image ("" when it can): which labels differ, and from what."""
        if self.usable:
            return ""
        tag_version = self.reference.rsplit(":", 1)[-1].removeprefix("v")
        if self.k8s_version and tag_version != self.k8s_version:
            return (
                f"its label {recipe.LABEL_KUBERNETES_VERSION} says Kubernetes {self.k8s_version}, "
                f"its tag {tag_version}"
            )
        if not self.kind_version and not self.recipe_version:
            return (
                f"it has none of ktest's labels ({recipe.LABEL_KIND_VERSION}, "
                f"{recipe.LABEL_RECIPE_VERSION}): it was not made by `ktest kind build-image`"
            )
        wrong = [
            f"{what} {have or '(none)'} where this ktest needs {need}"
            for what, have, need in (
                ("made for kind", self.kind_version, recipe.KIND_VERSION),
                ("made by recipe", self.recipe_version, recipe.RECIPE_VERSION),
            )
            if have != need
        ]
        return "; ".join(wrong)


@runtime_checkable
class NodeImageSource(Protocol):
    """A way to have kind node images without a registry, offered by another distribution."""

    name: str

    def list_images(self, *, include_unusable: bool = False) -> Sequence[NodeImageInfo]:
        """Its images in the Docker engine, newest Kubernetes first; usable ones only by default."""

    def build(self, k8s_version: str, *, force: bool, progress: Progress) -> str:
        """Build the node image for the exact ``k8s_version`` unless a matching one exists; its tag."""


@cache
def node_image_sources() -> tuple[NodeImageSource, ...]:
    """The registered node-image sources (read once per process)."""
    return load_plugins(NODE_IMAGE_SOURCES_GROUP, NodeImageSource)


def local_node_images(*, include_unusable: bool = False, client: Any = None) -> list[NodeImageInfo]:
    """The engine's ``ktest/kind-node`` images and what their labels say, newest Kubernetes first;
    usable ones only by default. Needs no builder: any ktest can run an image built earlier."""
    from ktest.backends.kind.engine import connect

    own_client = client is None
    client = client or connect(check_runtime=False)
    found = []
    try:
        for image in client.images.list(name=recipe.NODE_IMAGE_REPOSITORY):
            for reference in image.tags:
                if reference.startswith(recipe.NODE_IMAGE_REPOSITORY + ":"):
                    info = _read_labels(reference, image)
                    if info.usable or include_unusable:
                        found.append(info)
    finally:
        if own_client:
            client.close()
    return sorted(found, key=lambda info: _version_key(info.k8s_version), reverse=True)


def _read_labels(reference: str, image: Any) -> NodeImageInfo:
    labels = image.labels or {}
    tag_version = reference.rsplit(":", 1)[1].removeprefix("v")
    labelled = labels.get(recipe.LABEL_KUBERNETES_VERSION, "").removeprefix("v")
    same_version = labelled == tag_version
    return NodeImageInfo(
        reference=reference,
        image_id=image.short_id,
        k8s_version=labelled or tag_version,
        # An image whose label names another version than its tag is no image of that version.
        kind_version=labels.get(recipe.LABEL_KIND_VERSION, "") if same_version else "",
        recipe_version=labels.get(recipe.LABEL_RECIPE_VERSION, "") if same_version else "",
        build_date=labels.get(recipe.LABEL_BUILD_DATE, ""),
        size=int(image.attrs.get("Size") or 0),
    )


def list_node_images(*, include_unusable: bool = False) -> list[NodeImageInfo]:
    """The engine's ``ktest/kind-node`` images (:func:`local_node_images`) and those of any other
    registered source, newest Kubernetes first."""
    found = {info.reference: info for info in local_node_images(include_unusable=include_unusable)}
    for source in node_image_sources():
        for info in source.list_images(include_unusable=include_unusable):
            found.setdefault(info.reference, info)
    return sorted(found.values(), key=lambda info: _version_key(info.k8s_version), reverse=True)


def build_node_image(
    k8s_version: str | None, *, force: bool = False, progress: bool | Progress = True
) -> str:
    """Build the node image for ``k8s_version`` with the first registered source; returns its tag.

    ``force`` rebuilds the image (cached parts are still reused). Raises KindError
    with what is wrong and how to fix it (no source installed, engine, disk, Go, mirror).
    """
    version = resolve_version(k8s_version)
    sources = node_image_sources()
    if not sources:
        present = [info for info in local_node_images(include_unusable=True) if info.k8s_version == version]
        usable = [info.reference for info in present if info.usable]
        if usable and not force:
            as_progress(progress).note(f"{usable[0]} is in the Docker engine and usable; nothing to build")
            return usable[0]
        unusable = "".join(
            f"\n{info.reference} is in the Docker engine but cannot be used: {info.unusable_because}."
            for info in present
            if not info.usable
        )
        raise KindError(
            f"building a kind node image for Kubernetes {version} needs a node-image source, and none "
            f"is installed.{unusable}\nWith registry access, skip the build: the kind backend runs "
            f"kindest/node:v{version}. Offline, install ktest's builders: {INSTALL_OFFLINE}, "
            "then run the command again."
        )
    return sources[0].build(version, force=force, progress=as_progress(progress))


def resolve_version(selector: str | None) -> str:
    """``1.37.2`` for ``1.37.2``/``v1.37.2``/``1.37``/``latest``/None (newest known patch)."""
    from ktest.assets import store, versions
    from ktest.assets.gotool import find_go
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
        return parsed.exact_version
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
    return chosen


def _version_key(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return ()
