"""``ApiError``: an error answer of the API server, readable and still an ``ApiException``."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from ktest.errors import ClusterError
from ktest.errors.status_message import server_message


class ApiError(ClusterError, ApiException):
    """The API server answered with an error status.

    A ``kubernetes.client.ApiException`` too (``.status``, ``.reason``,
    ``.body``), so code written for the official client keeps working, but its
    message is the server's own explanation rather than raw HTTP headers.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        body: str,
        *,
        method: str,
        path: str,
        context: str = "",
        note: str = "",
    ) -> None:
        # Only the arguments every supported client version takes (31 has no body=).
        ApiException.__init__(self, status=status, reason=reason)
        self.body = body
        self.headers = getattr(self, "headers", None)
        self.method = method
        self.path = path
        self.context = context
        self.note = note
        self.message = server_message(body) or reason

    def with_context(self, context: str) -> ApiError:
        """The same error, prefixed with where the request came from (file, document)."""
        return ApiError(
            self.status,
            self.reason,
            self.body or "",
            method=self.method,
            path=self.path,
            context=context,
            note=self.note,
        )

    def __str__(self) -> str:
        prefix = f"{self.context}: " if self.context else ""
        suffix = f" ({self.note})" if self.note else ""
        return f"{prefix}{self.method} {self.path}: {self.status} {self.reason}: {self.message}{suffix}"

