"""A kopf operator whose handler logs the problem itself, then asks kopf to retry, as many
operators in the wild do: one failure, two ERROR records (the handler's, then kopf's
"failed temporarily"). Acts on ConfigMaps labelled ``ktest.dev/explode=true``.
"""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("configmaps", labels={"ktest.dev/explode": "true"})
def explode(name: str, logger: Any, **_: Any) -> None:
    problem = f"cannot reconcile {name}: data.size must be a positive number"
    logger.error(problem)
    raise kopf.TemporaryError(problem, delay=30)
