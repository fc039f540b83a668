"""A kopf operator with a validating admission handler for Gadgets (served by kopf's own
webhook server, which the test configures with ktest's certificate and port)."""

from __future__ import annotations

from typing import Any

import kopf

COLORS = ("red", "green", "blue")


@kopf.on.validate("pyhooks.ktest.dev", "v1", "gadgets", id="validate-gadget-color")
def color_is_known(spec: dict[str, Any], **_: Any) -> None:
    color = spec.get("color")
    if color is not None and color not in COLORS:
        raise kopf.AdmissionError(f"spec.color {color!r} is not one of {', '.join(COLORS)}", code=422)
