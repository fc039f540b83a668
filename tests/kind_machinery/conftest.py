"""Fixtures for the kind layer's tests: the real Docker engine, real node images, one real cluster.

The node images are built before the suite runs (``make kind-image``; the
fixtures then find them in seconds); run alone, the first test builds them.
Default version: ``--ktest-k8s-version`` or 1.37. With ``KTEST_OLDER_K8S_VERSION``
set (``make test-kind-older``) the image tests also run for that version.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kind_helpers import KindTestCluster  # type: ignore[import-not-found]

from ktest.backends.kind import engine, recipe
from ktest.backends.kind.binary import resolve_kind
from ktest.backends.kind.image_sources import build_node_image, resolve_version

CREATE_TIMEOUT_SECONDS = 300


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return engine.connect()


@pytest.fixture(scope="session")
def kind_binary() -> Path:
    return resolve_kind(progress=False)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests taking ``node_selector`` run for the default version and KTEST_OLDER_K8S_VERSION."""
    if "node_selector" in metafunc.fixturenames:
        selectors = {"default": metafunc.config.getoption("--ktest-k8s-version", default=None)}
        if os.environ.get("KTEST_OLDER_K8S_VERSION"):
            selectors["older"] = os.environ["KTEST_OLDER_K8S_VERSION"]
        metafunc.parametrize(
            "node_selector", list(selectors.values()), ids=list(selectors), scope="session"
        )


@pytest.fixture(scope="session")
def default_version(pytestconfig: pytest.Config) -> str:
    return resolve_version(pytestconfig.getoption("--ktest-k8s-version", default=None))


@pytest.fixture(scope="session")
def default_image(default_version: str, docker_client: Any) -> str:
    return build_node_image(default_version, progress=True)


@pytest.fixture(scope="session")
def node_version(node_selector: str | None) -> str:
    return resolve_version(node_selector)


@pytest.fixture(scope="session")
def node_image(node_version: str, docker_client: Any) -> str:
    return build_node_image(node_version, progress=True)


@pytest.fixture(scope="module")
def kind_cluster(
    node_image: str, node_version: str, kind_binary: Path, docker_client: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KindTestCluster]:
    """One cluster per module from the node image, with the config the image requires; always deleted."""
    from ktest.assets import resolve_assets

    directory = tmp_path_factory.mktemp("kind")
    name = f"ktest-imagetest-{secrets.token_hex(3)}"
    config = recipe.required_cluster_config(
        node_version, cgroup_version=engine.cgroup_version(docker_client)
    )
    (directory / "cluster.yaml").write_text(yaml.safe_dump(config))
    kubeconfig = directory / "kubeconfig"
    command = [
        str(kind_binary), "create", "cluster", "--name", name, "--image", node_image,
        "--config", str(directory / "cluster.yaml"), "--kubeconfig", str(kubeconfig), "--wait", "3m",
    ]
    try:
        created = subprocess.run(
            command, capture_output=True, text=True, timeout=CREATE_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL, check=False,
        )
        assert created.returncode == 0, f"kind create cluster failed:\n{created.stderr[-3000:]}"
        cluster = KindTestCluster(name, kubeconfig, resolve_assets(node_version).binary("kubectl"))
        yield cluster
    finally:
        subprocess.run(
            [str(kind_binary), "delete", "cluster", "--name", name],
            capture_output=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
        )
