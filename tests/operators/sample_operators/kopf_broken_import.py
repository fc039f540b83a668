"""A kopf operator that cannot even be imported (a configuration error at import time)."""

from __future__ import annotations

import kopf

raise RuntimeError("boom at import: OPERATOR_MODE must be 'strict' or 'lenient'")


@kopf.on.create("configmaps")
def never(**_: object) -> None:  # pragma: no cover - unreachable on purpose
    pass
