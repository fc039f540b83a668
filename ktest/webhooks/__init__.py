"""Admission and conversion webhooks, tested against the real API server.

:class:`Webhooks` installs the user's webhook configurations (and CRDs with a
conversion webhook) rewritten to point at ktest, with a CA of its own, and
waits until the API server really calls them. Three ways to serve, one API:
the operator's own webhook server (``cert_dir``, ``operator_port``), Python
handlers (:class:`Handlers`), Python conversion handlers. Every call is logged
(:class:`CallLog`) and shown in a failing test's report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.webhooks.calls import CallLog as CallLog
    from ktest.webhooks.calls import WebhookCall as WebhookCall
    from ktest.webhooks.handlers import AdmissionRequest as AdmissionRequest
    from ktest.webhooks.handlers import Denied as Denied
    from ktest.webhooks.handlers import Handlers as Handlers
    from ktest.webhooks.webhook_set import Webhooks as Webhooks

_NAMES_BY_MODULE = {
    "calls": ("CallLog", "WebhookCall"),
    "handlers": ("AdmissionRequest", "Denied", "Handlers"),
    "webhook_set": ("Webhooks",),
}
_EXPORTS = {name: f"ktest.webhooks.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names}
"""Imported on first use: the pytest plugin loads this add-on's plugin module without its machinery."""

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
