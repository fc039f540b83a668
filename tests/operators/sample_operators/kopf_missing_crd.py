"""A kopf operator for a custom resource whose CRD the tests never install."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("ktest.dev", "v1", "widgets")
def widget(**_: Any) -> None:  # pragma: no cover - the CRD does not exist
    pass
