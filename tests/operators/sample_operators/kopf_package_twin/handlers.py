"""Another operator with a sibling module named `cache` (a different one)."""

from __future__ import annotations

from typing import Any

import kopf
from cache import SOURCE


@kopf.on.create("configmaps", labels={"ktest.dev/sibling": "true"})
def record(name: str, patch: kopf.Patch, **_: Any) -> None:
    patch.metadata.setdefault("annotations", {})["ktest.dev/cached"] = f"1 from {SOURCE}"
