"""Tests of the kind backend: run with ``--ktest-backend kind`` (``make test`` does, on one shared cluster).

Under another backend the ``kind`` fixture skips these tests with the reason;
``make test`` runs them for real, so they are never skipped in CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktest.backends.kind.binary_image import image_from_binary
from ktest.operators import build_go_binary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ECHO_SOURCE = FIXTURES / "images" / "echo"
GO_MANAGER = FIXTURES / "go-manager"


@pytest.fixture(scope="session")
def echo_image() -> str:
    """A tiny static HTTP/DNS test image (fixtures/images/echo), built locally: nothing is pulled."""
    return image_from_binary(build_go_binary(ECHO_SOURCE, reproducible=True), "ktest-fixtures/echo:v1")


@pytest.fixture(scope="session")
def go_manager_image() -> str:
    """The Go controller-runtime manager of fixtures/go-manager as an image (FROM scratch)."""
    return image_from_binary(build_go_binary(GO_MANAGER, reproducible=True), "ktest-fixtures/go-manager:v1")


def echo_deployment(name: str, image: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "echo",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "args": ["serve", "--port", "8080"],
                            "ports": [{"containerPort": 8080}],
                            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                        }
                    ]
                },
            },
        },
    }


def service(name: str, port: int = 8080) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]},
    }


def one_shot_pod(name: str, image: str, args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "args": args}],
        },
    }
