"""A kopf operator that wires its own admission webhook server in a startup handler, as a
production operator does (a Service address, kopf's self-signed certificate): the test's
configure= must win over it, so ktest's webhook front server reaches the operator."""

from __future__ import annotations

import logging
from typing import Any

import kopf

SIZES = ("small", "medium", "large")


@kopf.on.startup()
def production_wiring(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.admission.server = kopf.WebhookServer(addr="127.0.0.1", host="sizes-operator.operators.svc")
    settings.posting.level = logging.ERROR  # a setting the test leaves alone: the operator's to set


@kopf.on.validate("configmaps", id="validate-size")
def size_is_known(body: kopf.Body, **_: Any) -> None:
    size = (body.get("data") or {}).get("size")
    if size is not None and size not in SIZES:
        raise kopf.AdmissionError(f"data.size {size!r} is not one of {', '.join(SIZES)}", code=422)


@kopf.on.create("configmaps", labels={"ktest.dev/sized": "true"})
def noop(**_: Any) -> None:
    pass
