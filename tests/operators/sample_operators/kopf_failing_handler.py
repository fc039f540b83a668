"""A kopf operator whose handler raises for ConfigMaps labelled ``ktest.dev/explode=true``."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("configmaps", labels={"ktest.dev/explode": "true"}, backoff=30)
def explode(name: str, **_: Any) -> None:
    raise ValueError(f"cannot reconcile {name}: data.size must be a positive number")
