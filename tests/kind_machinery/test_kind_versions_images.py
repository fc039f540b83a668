"""``ktest versions`` reports the kind node images the real Docker engine holds, per minor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ktest.backends.kind.node_images import node_image_inventory
from ktest.cli.main import main

# A version no release has, so no real image can carry this tag.
UNRELEASED = "1.33.999"


@pytest.fixture
def official_tag(docker_client: Any, default_image: str) -> Iterator[str]:
    """The default node image tagged as kind's official image of an unreleased 1.33 patch."""
    reference = f"kindest/node:v{UNRELEASED}"
    docker_client.images.get(default_image).tag("kindest/node", f"v{UNRELEASED}")
    yield reference
    docker_client.images.remove(reference, noprune=True)


def test_the_node_images_the_engine_holds_are_listed_under_their_minor(
    official_tag: str, default_image: str, default_version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["versions", "--json"]) == 0
    table = {row["minor"]: row for row in json.loads(capsys.readouterr().out)["minors"]}
    assert official_tag in table["1.33"]["node_images"]
    default_minor = ".".join(default_version.split(".")[:2])
    assert default_image in table[default_minor]["node_images"]
    assert table["1.33"]["node_images_note"] == ""


def test_an_untagged_minor_shows_how_to_build_its_image(
    docker_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = node_image_inventory()
    assert inventory.unknown == ""
    minor = next(m for m in ("1.32", "1.33", "1.34") if not inventory.for_minor(m))
    assert main(["versions", "--k8s-version", minor]) == 0
    expected = f"  kind node image: none (`ktest kind build-image --k8s-version {minor}`)\n"
    assert expected in capsys.readouterr().out
