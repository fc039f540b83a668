"""A kopf operator whose handler raises kopf.TemporaryError by design.

ConfigMaps labelled ``ktest.dev/retry`` carry in ``data.failures`` how many attempts
fail before one succeeds ("forever": none does); each failure is retried after 0.1 s.
"""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("configmaps", labels={"ktest.dev/retry": "true"}, id="provision")
def provision(name: str, body: kopf.Body, retry: int, patch: kopf.Patch, **_: Any) -> None:
    failures = body.get("data", {}).get("failures", "0")
    if failures == "forever" or retry < int(failures):
        raise kopf.TemporaryError(f"backend for {name} not ready yet (attempt {retry + 1})", delay=0.1)
    patch.metadata.setdefault("annotations", {})["ktest.dev/provisioned"] = f"after {retry} retries"
