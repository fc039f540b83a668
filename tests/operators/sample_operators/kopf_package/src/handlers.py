"""An operator laid out as `kopf run src/handlers.py` expects: it imports its sibling
module `cache` by its plain name (no package, no sys.path change of its own)."""

from __future__ import annotations

from typing import Any

import kopf
from cache import remember  # a sibling of this file, found because its folder is on sys.path


@kopf.on.create("configmaps", labels={"ktest.dev/sibling": "true"})
def record(name: str, patch: kopf.Patch, **_: Any) -> None:
    from cache import SOURCE  # imported again inside a handler: the same module

    patch.metadata.setdefault("annotations", {})["ktest.dev/cached"] = f"{remember(name)} from {SOURCE}"
