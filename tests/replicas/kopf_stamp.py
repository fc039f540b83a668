"""A kopf operator for the replica tests: stamps ConfigMaps labelled ``ktest.dev/stamp=true``
with the annotation ``ktest.dev/stamped``."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("configmaps", labels={"ktest.dev/stamp": "true"})
def stamp(patch: Any, **_: Any) -> None:
    patch.metadata.annotations["ktest.dev/stamped"] = "yes"
