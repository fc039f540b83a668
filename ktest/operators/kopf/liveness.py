"""kopf's liveness endpoint, as ``kopf run --liveness`` serves it: whether it answers yet, and
what it answers (the ``@kopf.on.probe`` handlers' results by handler id)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from ktest.errors import OperatorError


async def answers(url: str) -> bool:
    """Whether something accepts connections at the URL's host and port."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.open_connection(parts.hostname, parts.port)
    except OSError:
        return False
    writer.close()
    return True


def read_probe(operator: str, url: str, timeout: float) -> dict[str, Any]:
    """The endpoint's JSON answer; an :class:`OperatorError` naming the operator when it has none."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return dict(json.loads(response.read().decode()))
    except urllib.error.HTTPError as error:
        body = error.read().decode("utf-8", "replace")
        raise OperatorError(
            f"operator {operator!r}: its liveness endpoint {url} answered "
            f"{error.code} {error.reason}: {body[:500]}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise OperatorError(
            f"operator {operator!r}: its liveness endpoint {url} did not answer: {error}"
        ) from None
