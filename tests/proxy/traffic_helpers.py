"""Helpers shared by the proxy tests: reading an operator's traffic record."""

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

