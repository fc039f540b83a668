"""Helpers shared by the operator tests."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "sample_operators"
GO_MANAGER = HERE.parent.parent / "fixtures" / "go-manager"


def configmap(
    name: str, namespace: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": data or {},
    }


def ref(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


def python() -> str:
    return sys.executable


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``condition`` without running health checks (``eventually`` would raise the very
    operator error a test is waiting to inspect)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        time.sleep(0.02)
