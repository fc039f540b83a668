"""A kopf operator whose handler records how often it ran, in an annotation of the object.

If its handlers were registered twice, an object would be handled twice and
the handler count of the run's registry would double."""

from __future__ import annotations

from typing import Any

import kopf

LABELS = {"ktest.dev/counted": "true"}
ANNOTATION = "ktest.dev/handled"
IMPORTS: list[str] = []
IMPORTS.append(__name__)


@kopf.on.create("configmaps", labels=LABELS)
def count(body: Any, patch: Any, **_: Any) -> None:
    seen = int((body.metadata.annotations or {}).get(ANNOTATION, "0"))
    patch.metadata.annotations[ANNOTATION] = str(seen + 1)
