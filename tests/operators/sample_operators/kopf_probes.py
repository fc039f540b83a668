"""A kopf operator with liveness probe handlers (what `kopf run --liveness` serves)."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.probe(id="backend")
def backend(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    return {"reachable": True, "region": memo.get("region", "unknown")}


@kopf.on.probe(id="version")
def version(**_: Any) -> str:
    return "1.2.3"


@kopf.on.create("configmaps", labels={"ktest.dev/probed": "true"})
def noop(**_: Any) -> None:
    pass
