"""Handlers that store into shop.storage, the module the test inspects."""

from __future__ import annotations

from typing import Any

import kopf

from shop import storage


@kopf.on.create("configmaps", labels={"ktest.dev/shop": "true"})
def record(name: str, patch: kopf.Patch, **_: Any) -> None:
    try:
        storage.store(name)
    except storage.StorageDown as error:
        raise kopf.PermanentError(str(error)) from None
    patch.metadata.setdefault("annotations", {})["ktest.dev/stored"] = "yes"
