"""Helpers shared by the operator tests."""

from __future__ import annotations

import sys
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
