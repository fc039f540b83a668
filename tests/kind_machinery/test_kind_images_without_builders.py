"""kind from the wheel: with ktest's builders (``ktest-offline``) absent, the core still finds the
``ktest/kind-node`` images the Docker engine holds, uses a usable one, and says of an unusable one
which it is and why.

The images are tiny (``FROM scratch`` with one file), tagged under the node-image repository with
unreleased 1.32 patches no real image has, and carry the labels a real build writes (or an older
recipe's). The checks run in a child Python in which ktest-offline's entry points and package are
hidden, as on a machine where only ``ktest[kind]`` is installed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from ktest.backends.kind import recipe

USABLE = "1.32.998"
OLD_RECIPE = "1.32.997"
UNLABELLED = "1.32.996"

WITHOUT_BUILDERS = textwrap.dedent(
    """
    import importlib.metadata as metadata
    import sys

    every_entry_point = metadata.entry_points

    def entry_points(**params):
        found = every_entry_point(**params)
        return type(found)(entry for entry in found if not entry.value.startswith("ktest_offline"))

    class NoBuilders:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "ktest_offline":
                raise ImportError("ktest-offline is not installed (hidden by the test)")
            return None

    metadata.entry_points = entry_points
    sys.meta_path.insert(0, NoBuilders())
    """
)


def tiny_image(client: Any, version: str, labels: dict[str, str]) -> str:
    """A ``FROM scratch`` image holding kind's ``/kind/version``, tagged ``ktest/kind-node:v<version>``."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as archive:
        files = {"Dockerfile": "FROM scratch\nCOPY version /kind/version\n", "version": f"v{version}\n"}
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    context.seek(0)
    reference = f"{recipe.NODE_IMAGE_REPOSITORY}:v{version}"
    client.images.build(fileobj=context, custom_context=True, tag=reference, labels=labels, rm=True)
    return reference


def ktest_labels(version: str, recipe_version: str = recipe.RECIPE_VERSION) -> dict[str, str]:
    return {
        recipe.LABEL_KUBERNETES_VERSION: f"v{version}",
        recipe.LABEL_KIND_VERSION: recipe.KIND_VERSION,
        recipe.LABEL_RECIPE_VERSION: recipe_version,
    }


@pytest.fixture(scope="module")
def tiny_node_images(docker_client: Any) -> Iterator[dict[str, str]]:
    """One usable image, one of an older recipe, one without ktest's labels; removed after."""
    images = {
        "usable": tiny_image(docker_client, USABLE, ktest_labels(USABLE)),
        "old recipe": tiny_image(docker_client, OLD_RECIPE, ktest_labels(OLD_RECIPE, recipe_version="2")),
        "unlabelled": tiny_image(docker_client, UNLABELLED, {}),
    }
    yield images
    for reference in images.values():
        docker_client.images.remove(reference, force=True)


def without_builders(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child Python where ktest-offline is not installed."""
    script = WITHOUT_BUILDERS + textwrap.dedent(code)
    command = [sys.executable, "-c", script]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_child_has_no_builders() -> None:
    completed = without_builders(
        """
        from ktest.backends.kind.image_sources import node_image_sources
        print(len(node_image_sources()))
        import ktest_offline
        """
    )
    assert completed.stdout.strip() == "0", completed.stderr
    assert "ktest-offline is not installed" in completed.stderr


def test_a_usable_image_is_found_and_chosen_without_the_builders(tiny_node_images: dict[str, str]) -> None:
    completed = without_builders(
        f"""
        import json
        from ktest.backends.kind.node_choice import choose_node_image
        image = choose_node_image({USABLE!r})
        print(json.dumps([image.reference, image.version, image.ktest_built]))
        assert not [name for name in sys.modules if name.startswith("ktest_offline")]
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == [tiny_node_images["usable"], USABLE, True]


def test_an_unusable_image_is_named_with_the_reason(tiny_node_images: dict[str, str]) -> None:
    completed = without_builders(
        f"""
        from ktest.backends.kind.node_choice import choose_node_image
        from ktest.errors import KindError
        for version in ({OLD_RECIPE!r}, {UNLABELLED!r}):
            try:
                choose_node_image(version)
            except KindError as error:
                print(error)
                print("---")
        """
    )
    assert completed.returncode == 0, completed.stderr
    old, unlabelled, _ = completed.stdout.split("---\n")
    assert (
        f"{tiny_node_images['old recipe']} is in the Docker engine but cannot be used: made by recipe 2 "
        f"where this ktest needs {recipe.RECIPE_VERSION}" in old
    ), old
    assert "ktest kind build-image --k8s-version 1.32.997" in old and "ktest-offline" in old
    assert (
        f"{tiny_node_images['unlabelled']} is in the Docker engine but cannot be used: it has none of "
        "ktest's labels" in unlabelled
    ), unlabelled


def test_the_cli_lists_images_and_build_image_reuses_a_usable_one(tiny_node_images: dict[str, str]) -> None:
    completed = without_builders(
        f"""
        from ktest.cli.main import main
        main(["kind", "images", "--all"])
        print("---")
        main(["kind", "build-image", "--k8s-version", {USABLE!r}])
        print("---")
        print(main(["kind", "build-image", "--k8s-version", {OLD_RECIPE!r}]))
        """
    )
    listing, built, refused_code = completed.stdout.split("---\n")
    refused = completed.stderr
    rows = {line.split()[0]: line for line in listing.splitlines()[1:]}
    assert rows[tiny_node_images["usable"]].rstrip().endswith("yes"), listing
    assert "no: made by recipe 2" in rows[tiny_node_images["old recipe"]], listing
    assert built.strip() == tiny_node_images["usable"], completed.stderr
    assert refused_code.strip() != "0"
    assert "needs a node-image source, and none is installed" in refused, completed.stderr
    assert f"{tiny_node_images['old recipe']} is in the Docker engine but cannot be used" in refused
