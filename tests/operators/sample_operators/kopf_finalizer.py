"""A kopf operator with a deletion handler: kopf puts its finalizer on labelled ConfigMaps
and removes it only when the handler ran, so the namespace holding them can only
be deleted while the operator runs."""

from __future__ import annotations

from typing import Any

import kopf

LABELS = {"ktest.dev/guarded": "true"}


@kopf.on.create("configmaps", labels=LABELS)
def guard(logger: Any, **_: Any) -> None:
    logger.info("guarding")


@kopf.on.delete("configmaps", labels=LABELS)
def release(logger: Any, **_: Any) -> None:
    logger.info("released")
