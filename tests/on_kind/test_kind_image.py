"""The node image setting on real images and a real cluster: a cluster is made from the image the
user names (here through pytest-kind-ng's own ``--kind-image``, with its ``--keep-cluster``, on a
``kind_cluster`` test: pytest-kind users' command line, on ktest's cluster), and the image's
Kubernetes version is read from it (ktest's labels, else kind's ``/kind/version``), checked
against the version setting, with clear errors for what cannot be a node image.

The configured image is the session's node image under a name of its own, so the cluster's node
container shows which reference it was made from.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ktest.backends.kind import records
from ktest.backends.kind.cluster import existing_clusters
from ktest.backends.kind.engine import connect
from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.node_choice import configured_node_image
from ktest.errors import KindError

pytestmark = [pytest.mark.xdist_group("kind-clusters"), pytest.mark.timeout(1800)]
ALIAS_REPOSITORY = "ktest-test/configured-node"

INNER = """
def test_on_the_configured_image(request, kind_cluster):
    assert request.config.pluginmanager.hasplugin("pytest-kind-ng")  # the fork is loaded ...
    # ... and ktest's fixture runs
    assert type(kind_cluster).__module__ == "ktest.backends.kind.pytest_kind_compat"
    assert "Ready" in kind_cluster.kubectl("get", "nodes")
    print("CLUSTER", kind_cluster.name)
"""


@pytest.fixture(scope="module")
def docker_client() -> Any:
    return connect()


@pytest.fixture(scope="module")
def configured_image(kind: KindHandle, docker_client: Any) -> Iterator[str]:
    """The session's node image, tagged under a name of its own for this module."""
    node = docker_client.containers.get(kind.nodes[0])
    image = docker_client.images.get(node.attrs["Config"]["Image"])
    tag = f"v{kind.version}-{secrets.token_hex(3)}"
    image.tag(ALIAS_REPOSITORY, tag)
    reference = f"{ALIAS_REPOSITORY}:{tag}"
    yield reference
    docker_client.images.remove(reference, noprune=True)


def _ktest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ktest.cli.main", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, timeout=600)


def test_a_cluster_is_made_from_the_configured_image_and_kept(
    pytester: pytest.Pytester, kind: KindHandle, configured_image: str, docker_client: Any,
    monkeypatch: pytest.MonkeyPatch, binary_cache: Path,
) -> None:
    # The inner run inherits our (pytester's) HOME, so it keeps the records we read; ktest's cache is
    # the real one (pytester's HOME has an empty one): its kind binary, not a build of kind.
    monkeypatch.setenv("KTEST_CACHE_DIR", str(binary_cache))
    before = {record.name for record in records.list_records()}
    pytester.makepyfile(INNER)
    try:
        result = pytester.runpytest_subprocess(
            "-s", "-p", "no:cacheprovider", "--ktest-backend", "kind", f"--kind-image={configured_image}",
            "--keep-cluster",
        )
        made = [r for r in records.list_records() if r.name not in before and r.image == configured_image]
        result.assert_outcomes(passed=1)
        output = result.stdout.str() + result.stderr.str()
        assert len(made) == 1, (records.list_records(), output)
        name = made[0].name
        assert f"CLUSTER {name}" in output
        assert f"kind_image={configured_image} (option --kind-image (pytest-kind's))" in output
        assert f"ktest: kept kind cluster {name}" in output  # --keep-cluster was honoured
        assert name in existing_clusters(kind.kind)
        node = docker_client.containers.get(f"{name}-control-plane")
        assert node.attrs["Config"]["Image"] == configured_image
        assert made[0].version == kind.version  # read from the image (no version setting given)
    finally:
        for record in records.list_records():
            if record.name not in before and record.image == configured_image:
                down = _ktest("down", f"--kind={record.name}")
                assert down.returncode == 0, down.stderr
                assert record.name not in existing_clusters(kind.kind)


def test_the_version_comes_from_the_image_and_must_match_the_setting(
    kind: KindHandle, configured_image: str
) -> None:
    chosen = configured_node_image(configured_image, None)
    assert (chosen.reference, chosen.version, chosen.ktest_built) == (configured_image, kind.version, True)
    minor = ".".join(kind.version.split(".")[:2])
    assert configured_node_image(configured_image, minor).version == kind.version
    other = f"1.{int(minor.split('.')[1]) + 1}"
    with pytest.raises(KindError) as refused:
        configured_node_image(configured_image, other, source="option --ktest-kind-image")
    assert str(refused.value) == (
        f"option --ktest-kind-image: node image {configured_image} runs Kubernetes {kind.version}, but the "
        f"version setting asks for {other}; give an image of {other}, or drop the version setting (the image "
        "decides)"
    )


def test_without_ktests_labels_the_version_is_kinds_own_file(
    kind: KindHandle, configured_image: str, docker_client: Any
) -> None:
    """An image without ktest's version label (as kind's own images are) is read like kind reads it."""
    container = docker_client.containers.create(configured_image, command=["true"])
    reference = f"{ALIAS_REPOSITORY}:unlabelled-{secrets.token_hex(3)}"
    try:
        container.commit(*reference.split(":"), changes=['LABEL io.ktest.kind.kubernetes-version=""'])
    finally:
        container.remove(force=True)
    try:
        assert not docker_client.images.get(reference).labels.get("io.ktest.kind.kubernetes-version")
        assert configured_node_image(reference, None).version == kind.version
    finally:
        docker_client.images.remove(reference, noprune=True)


def test_an_image_that_is_no_node_image_is_refused(echo_image: str) -> None:
    with pytest.raises(KindError, match=rf"^ktest_kind_image: {echo_image} is not a kind node image: it has "
                                        r"neither ktest's label io.ktest.kind.kubernetes-version nor kind's "
                                        r"/kind/version file$"):
        configured_node_image(echo_image, None)


def test_a_digest_pinned_image_the_engine_has_not_got_is_explained(configured_image: str) -> None:
    pinned = f"{configured_image}@sha256:{'0' * 64}"
    with pytest.raises(KindError) as refused:
        configured_node_image(pinned, None, source="environment variable KTEST_KIND_IMAGE")
    message = str(refused.value)
    assert message.startswith(
        f"environment variable KTEST_KIND_IMAGE: node image {pinned} is not in the Docker engine and cannot "
        "be pulled (no registry access?). A digest-pinned reference matches an image pulled from a registry"
    ), message
    assert "locally built or loaded image has none: give its tag" in message
