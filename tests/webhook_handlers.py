"""The Python webhook handler sets that several test folders serve (tests/webhooks,
tests/on_kind, tests/hardening), each written once. A module of ``tests`` (always on
``sys.path``), since tests/on_kind runs without tests/webhooks on its path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktest.webhooks import AdmissionRequest, Denied, Handlers

GADGETS_CRD = Path(__file__).parent / "webhooks" / "crds" / "gadgets.yaml"


def configmap_validator(check: Callable[[AdmissionRequest], None]) -> Handlers:
    """A handler set of one validating handler for ConfigMaps, ``check`` (its name names the
    webhook: ``<name>.configmaps.core``)."""
    handlers = Handlers()
    handlers.validate("", "v1", "configmaps")(check)
    return handlers


def forbidden_key_guard(default_labels: dict[str, str] | None = None) -> Handlers:
    """A validating handler set that denies a ConfigMap holding ``data.forbidden`` (webhook
    ``no-forbidden-key.configmaps.core``, "data.forbidden is not allowed"); with
    ``default_labels``, a mutating handler also fills in those labels where a ConfigMap lacks them."""

    def no_forbidden_key(request: AdmissionRequest) -> None:
        if "forbidden" in (request.object.get("data") or {}):
            raise Denied("data.forbidden is not allowed")

    handlers = configmap_validator(no_forbidden_key)
    if default_labels:

        @handlers.mutate("", "v1", "configmaps")
        def fill_in_labels(request: AdmissionRequest) -> None:
            labels = request.object.setdefault("metadata", {}).setdefault("labels", {})
            for key, value in default_labels.items():
                labels.setdefault(key, value)

    return handlers


def gadget_conversion(*, lossy: bool = False) -> Handlers:
    """Converts Gadgets (``GADGETS_CRD``) between v1's ``spec.size: "10Gi"`` and v2's
    ``spec.sizeGi: 10``; ``lossy`` seeds a bug: v2 forgets ``spec.color``."""
    handlers = Handlers()

    @handlers.convert("pyhooks.ktest.dev", "gadgets")
    def sizes(obj: dict[str, Any], to_version: str) -> dict[str, Any]:
        spec = obj.setdefault("spec", {})
        if to_version == "v2" and "size" in spec:
            spec["sizeGi"] = int(spec.pop("size").removesuffix("Gi"))
            if lossy:
                spec.pop("color", None)
        if to_version == "v1" and "sizeGi" in spec:
            spec["size"] = f"{spec.pop('sizeGi')}Gi"
        return obj

    return handlers
