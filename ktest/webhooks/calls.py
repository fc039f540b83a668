"""The webhook calls the API server made during a test: what, answer, latency, errors.

Every call passes through ktest's front server, so the log sees Python handlers, the operator's
own server and conversions alike; a failing test's report lists them ("why was my object
rejected", "was my webhook even called").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

_CLOCK_MARGIN = 0.1
_CONSEQUENCES = {  # of a failed call, by failurePolicy ("-": a conversion)
    "Ignore": "the API server ignored the failure (failurePolicy Ignore): "
    "the request went on WITHOUT this webhook",
    "Fail": "the API server failed the request (failurePolicy Fail)",
    "-": "the API server failed the request (conversion)",
}


@dataclass
class WebhookCall:
    """One request of the API server to a webhook and how it ended."""

    webhook: str  # the webhook's name (the configuration's entry, or the CRD for conversion)
    kind: str  # "validating", "mutating" or "conversion"
    served_by: str  # "python handler <name>" or "operator at 127.0.0.1:PORT/path"
    failure_policy: str  # "Fail" or "Ignore" ("-" for conversion: a failed conversion always fails)
    timeout_seconds: float
    operation: str = ""  # CREATE, UPDATE, ... or "convert to v2"
    object: str = ""  # Kind namespace/name
    allowed: bool | None = None  # None: no answer (error) or a conversion
    message: str = ""  # the denial's message, the patch, or the conversion result
    error: str = ""  # why no valid answer reached the API server
    started: float = field(default_factory=time.monotonic)
    latency: float = 0.0
    finished: bool = False  # logged when it arrives: a call still running shows as such

    @property
    def timed_out(self) -> bool:
        # The API server's clock started before the request reached ktest (connection, TLS):
        # what ktest measures is a little short of what the API server waited.
        return self.elapsed >= self.timeout_seconds - _CLOCK_MARGIN

    @property
    def elapsed(self) -> float:
        return self.latency if self.finished else time.monotonic() - self.started

    def finish(self) -> None:
        self.latency = time.monotonic() - self.started
        self.finished = True

    def outcome(self) -> str:
        if not self.finished:
            late = (
                f": past timeoutSeconds={self.timeout_seconds:g}, the API server gave up on it "
                f"(failurePolicy {self.failure_policy})"
                if self.timed_out
                else ""
            )
            return f"NO ANSWER YET after {self.elapsed:.1f}s{late}"
        if self.error:
            return f"ERROR {self.error}; {_CONSEQUENCES.get(self.failure_policy, _CONSEQUENCES['-'])}"
        if self.timed_out:
            return (
                f"answered after {self.latency:.1f}s, but the API server gives up after "
                f"timeoutSeconds={self.timeout_seconds:g}: treated as a failure "
                f"(failurePolicy {self.failure_policy})"
            )
        if self.allowed is None:
            return self.message or "converted"
        return (
            f"allowed{': ' + self.message if self.message else ''}"
            if self.allowed
            else f"DENIED: {self.message}"
        )

    def describe(self) -> str:
        what = " ".join(part for part in (self.operation, self.object) if part)
        return (
            f"{self.kind} webhook {self.webhook} ({self.served_by}, failurePolicy {self.failure_policy}): "
            f"{what or '?'} -> {self.outcome()} [{self.elapsed * 1000:.0f} ms]"
        )


class CallLog:
    """The calls of one :class:`~ktest.webhooks.Webhooks` (thread-safe; the server appends)."""

    def __init__(self) -> None:
        self._calls: list[WebhookCall] = []
        self._lock = threading.Lock()

    def add(self, call: WebhookCall) -> None:
        with self._lock:
            self._calls.append(call)

    def __iter__(self) -> Iterator[WebhookCall]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self._calls)

    @property
    def calls(self) -> list[WebhookCall]:
        with self._lock:
            return list(self._calls)

    def since(self, mark: int) -> list[WebhookCall]:
        """Calls made after :meth:`mark` returned ``mark``."""
        with self._lock:
            return self._calls[mark:]

    def mark(self) -> int:
        with self._lock:
            return len(self._calls)

    def describe(self, calls: list[WebhookCall] | None = None) -> str:
        calls = self.calls if calls is None else calls
        if not calls:
            return "no webhook calls"
        return "\n".join(call.describe() for call in calls)
