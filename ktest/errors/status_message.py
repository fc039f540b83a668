"""The message of an error answer of the API server: what its ``Status`` body says."""

from __future__ import annotations

import json


def server_message(body: str | bytes) -> str:
    """The ``message`` of a Status body (or the body itself when it is not JSON)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(body)
    except (TypeError, ValueError):
        return body.strip()
    if isinstance(parsed, dict):
        return str(parsed.get("message") or "")
    return ""
