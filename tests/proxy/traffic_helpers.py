"""Helpers shared by the proxy tests: manifests, and reading an operator's traffic record."""

from __future__ import annotations

from ktest.proxy.traffic import Call


def answered(calls: list[Call]) -> list[Call]:
    """``calls``, once each has its answer recorded; for ``eventually``.

    A change can be visible in the API server a moment before the proxy has recorded
    the answer that carried it (``status`` is None until then)."""
    assert calls, "no such calls yet"
    pending = [call.describe() for call in calls if call.status is None]
    assert not pending, f"answers not recorded yet: {pending}"
    return calls


def config_map(name: str, data: dict[str, str] | None = None) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {"a": "1"}}
