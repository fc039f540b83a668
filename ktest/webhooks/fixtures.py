"""The ``webhooks`` fixture: :class:`ktest.webhooks.Webhooks` for one test, in its namespace.

A thin layer: the fixture is a factory, so a test passes its own manifests and
handlers; every set it starts is limited to the test's namespace (a
``namespaceSelector`` term) and removed after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.webhooks import Webhooks


@pytest.fixture
def webhooks(
    cluster: Cluster, namespace: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Webhooks]]:
    """``webhooks(*manifests, handlers=..., **options)``: started webhooks, limited to the test's
    namespace (``namespaces=`` overrides), removed after the test; see ``ktest.webhooks.Webhooks``.
    ``start=False``: not started yet (start the operator with its ``cert_dir`` and
    ``operator_port`` first, then call ``start()``)."""
    from ktest.webhooks import Webhooks

    started: list[Webhooks] = []

    def start(*manifests: Any, start: bool = True, **options: Any) -> Webhooks:
        options.setdefault("namespaces", [namespace])
        options.setdefault("name", request.node.name)
        webhook_set = Webhooks(cluster, *manifests, **options)
        started.append(webhook_set)
        if start:
            webhook_set.start()
        return webhook_set

    yield start
    errors = []
    for webhook_set in reversed(started):
        try:
            webhook_set.close()
        except Exception as error:
            errors.append(str(error))
    if errors:
        raise AssertionError("\n".join(errors))
