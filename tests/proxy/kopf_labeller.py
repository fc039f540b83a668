"""A kopf operator for the proxy tests: it labels every ConfigMap it sees ``seen=yes``."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("", "v1", "configmaps")
def label(patch: kopf.Patch, **_: Any) -> None:
    patch.metadata["labels"] = {"seen": "yes"}
