"""Admission and conversion webhooks, tested against the real API server.

:class:`Webhooks` installs the user's webhook configurations (and CRDs with a
conversion webhook) rewritten to point at ktest, with a CA of its own, and
waits until the API server really calls them. Three ways to serve, one API:
the operator's own webhook server (``cert_dir``, ``operator_port``), Python
handlers (:class:`Handlers`), Python conversion handlers. Every call is logged
(:class:`CallLog`) and shown in a failing test's report.
"""

from __future__ import annotations

from ktest.webhooks.calls import CallLog, WebhookCall
from ktest.webhooks.handlers import AdmissionRequest, Denied, Handlers
from ktest.webhooks.webhook_set import Webhooks

__all__ = ["AdmissionRequest", "CallLog", "Denied", "Handlers", "WebhookCall", "Webhooks"]
