"""kopf's retries by design: which ``TemporaryError`` retries fail a test, and when.

kopf logs each ``kopf.TemporaryError`` at ERROR ("Handler 'x' failed temporarily: ...") and calls
the handler again: the operator working as designed, so such a record alone fails nothing. The
retries fail the test when the same handler failed on the same object more than ``tolerated``
times in a row, or was still failing when the test ended. kopf giving up (retries or timeout
exhausted, a PermanentError) and every other ERROR record (an unexpected exception, a daemon's or
a webhook's failure) fail it at once. This covers resource handlers, timers and activities; kopf's
retries of its own API requests are judged the same way (:class:`RequestRetryTracker`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ktest.cluster import Cluster

_KINDS = "Handler|Timer|Activity"
_PREFIX = r"^(?:\[[^\]]*\] )?"  # kopf's own formatter may have put "[namespace/name] " in front
_HANDLER = rf"{_PREFIX}(?P<kind>{_KINDS}) (?P<id>'.*?'|\".*?\")"
_TEMPORARY = re.compile(rf"{_HANDLER} failed temporarily: (?P<error>.*)$", re.S)
_SUCCEEDED = re.compile(rf"{_HANDLER} succeeded\.$", re.S)

DEFAULT_TOLERATED_RETRIES = 5
"""Temporary failures in a row of one handler on one object that do not fail a test."""
DEFAULT_SETTLE_TIMEOUT = 3.0
"""Seconds ktest waits at the end of a test for a handler's pending retry to succeed."""
R = TypeVar("R")


@dataclass
class Retry:
    """A handler that failed temporarily and has not succeeded since."""

    handler: str
    """kopf's name for it: ``Handler 'create_bucket'``, ``Activity 'configure'``."""
    ref: dict[str, Any] | None
    """kopf's reference of the object (apiVersion, kind, namespace, name, uid); None for activities."""
    failures: int
    last_error: str
    since: float

    @property
    def where(self) -> str:
        if not self.ref:
            return ""
        namespace, name = self.ref.get("namespace"), self.ref.get("name")
        name = f"{namespace}/{name}" if namespace else name
        return f" on {self.ref.get('kind') or 'object'} {name}"

    def describe(self) -> str:
        times = "once" if self.failures == 1 else f"{self.failures} times in a row"
        return f"{self.handler}{self.where} failed temporarily {times}; its last error: {self.last_error}"


class _Pending(Generic[R]):
    """The retries of one kopf run whose last attempt failed (thread-safe; a change wakes waiters)."""

    def __init__(self, failed_at: Callable[[R], float]) -> None:
        self._pending: dict[Any, R] = {}
        self._changed = threading.Condition()
        self._failed_at = failed_at

    @property
    def pending(self) -> list[R]:
        """The retries whose last attempt failed, oldest first."""
        with self._changed:
            return sorted(self._pending.values(), key=self._failed_at)

    def settle(self, timeout: float) -> list[R]:
        """Wait up to ``timeout`` s until none is failing; those still failing."""
        with self._changed:
            self._changed.wait_for(lambda: not self._pending, timeout)
            return self.pending


class RetryTracker(_Pending[Retry]):
    """The temporary failures of one kopf run's handlers, from its log records."""

    def __init__(self) -> None:
        super().__init__(lambda retry: retry.since)

    def observe(self, record: logging.LogRecord) -> Retry | None:
        """Take one record into account: the retry it adds to (a temporary failure), else None."""
        if not record.name.startswith("kopf"):
            return None
        message = record.getMessage()
        ref = getattr(record, "k8s_ref", None)
        ref = ref if isinstance(ref, dict) else None
        failed = _TEMPORARY.match(message) if record.levelno >= logging.ERROR else None
        succeeded = None if failed else _SUCCEEDED.match(message)
        match = failed or succeeded
        if match is None:
            return None
        handler = f"{match.group('kind')} {match.group('id')}"
        key = (handler, str(ref.get("uid") or ref.get("name")) if ref else None)
        with self._changed:
            if succeeded:
                self._pending.pop(key, None)
                self._changed.notify_all()
                return None
            retry = self._pending.get(key)
            if retry is None:
                retry = self._pending[key] = Retry(handler, ref, 0, "", time.monotonic())
            retry.failures += 1
            retry.last_error = match.group("error").strip()
            self._changed.notify_all()
            return retry


def retried_object_exists(cluster: Cluster, retry: Retry) -> bool:
    """A retry of an object deleted meanwhile can no longer succeed, nor matter."""
    ref = retry.ref
    if not ref or not ref.get("apiVersion") or not ref.get("kind") or not ref.get("name"):
        return True
    from ktest.errors import ClusterError
    from ktest.errors.api import ApiError

    try:
        info = cluster.info(ref["apiVersion"], ref["kind"])
        obj = cluster.rest.request("GET", info.path(ref.get("namespace"), ref["name"]))
    except ApiError as error:
        return error.status != 404
    except ClusterError:
        return False  # its kind is no longer served
    except Exception:
        return True  # cannot tell (the cluster is unreachable): the retry did not succeed
    return not ref.get("uid") or (obj.get("metadata") or {}).get("uid") == ref["uid"]


# ---------------------------------------------------------------- kopf's own API-request retries

_REQUEST = re.compile(
    rf"{_PREFIX}Request attempt #(?P<attempt>\d+)(?:/(?P<count>\d+))? "
    r"(?:failed; (?P<outcome>will retry|escalating|(?:TCP|SSL) closed; will re-authenticate)"
    r"|(?P<ok>succeeded))"
    r": (?P<method>[A-Z]+) (?P<url>\S+)(?: -> (?P<error>.*))?$",
    re.S,
)


@dataclass
class RequestRetry:
    """An API request of kopf's own whose last attempt failed (kopf retries it after a backoff)."""

    request: str
    """``GET https://127.0.0.1:6443/api/v1/namespaces/ns/configmaps?watch=true&...``"""
    endpoint: str
    """The method and the URL without its query: a later request there answering ends the retry."""
    attempt: int
    attempts: int | None
    """kopf's number of attempts for the request (None: unbounded ``error_backoffs``)."""
    last_error: str
    failed_at: float
    gave_up: bool = False
    backoff: float = 0.0
    """Seconds kopf waits before its next attempt (from its ``error_backoffs``)."""

    def describe(self) -> str:
        of = f"/{self.attempts}" if self.attempts else ""
        return f"{self.request}: attempt #{self.attempt}{of} failed; its last error: {self.last_error}"

    def gave_up_failure(self) -> tuple[str, str]:
        """What kopf giving up on this request fails the test with: (what, details)."""
        attempts = self.attempts or self.attempt
        return (
            f"gave up on its API request {self.request} after {attempts} attempts",
            f"Its last error: {self.last_error}",
        )


REQUEST_HINT = (
    "kopf retries its own API requests (settings.networking.error_backoffs) while the API server "
    "is unavailable or refuses them (5xx, 429, 403, a lost connection); ktest lets such retries pass "
    "when a later attempt succeeds, but not when kopf gives up or the request is still failing when "
    "the test ends. Check that the API server came back and that the operator's RBAC allows it."
)


def still_failing_failure(still: Sequence[Retry] | Sequence[RequestRetry]) -> tuple[str, str]:
    """What handlers or requests still failing at the end of a test fail it with: (what, details)."""
    first = still[0]
    if isinstance(first, Retry):
        what = (
            f"was still retrying {first.handler}{first.where} when the test ended: it failed "
            f"temporarily {first.failures} time(s) and has not succeeded since"
        )
    else:
        what = (
            f"was still retrying its API request {first.request} when the test ended: attempt "
            f"#{first.attempt} failed and no attempt has succeeded since"
        )
    others = "".join(f"\n- {retry.describe()}" for retry in still[1:])
    return what, f"Its last error: {first.last_error}" + (f"\nAlso still failing:{others}" if others else "")


class RequestRetryTracker(_Pending[RequestRetry]):
    """kopf's API-request retries of one run, from its "Request attempt #n/m ..." records.

    kopf logs each failed attempt at ERROR and a later attempt's success only at DEBUG
    ("Request attempt #2/9 succeeded: ..."): the runner lets kopf's DEBUG records through
    while a retry is pending (:class:`KopfDebugRecords`)."""

    def __init__(self) -> None:
        super().__init__(lambda retry: retry.failed_at)
        self._debug_records = False

    def observe(self, record: logging.LogRecord, backoffs: Any = None) -> RequestRetry | None:
        """The retry a failed attempt starts or adds to (``gave_up`` once kopf escalates), else None.

        A success ends every pending retry of the same endpoint. A closed connection (kopf
        re-authenticates and sends the request afresh, its failures logged again) is returned
        but not kept pending: kopf does not log the fresh request's success. ``backoffs``: the
        run's ``settings.networking.error_backoffs``, for the wait before kopf's next attempt."""
        if not record.name.startswith("kopf"):
            return None
        match = _REQUEST.match(record.getMessage())
        if match is None:
            return None
        method, url = match.group("method"), match.group("url")
        endpoint = f"{method} {url.split('?', 1)[0]}"
        with self._changed:
            if match.group("ok"):
                for request, retry in list(self._pending.items()):
                    if retry.endpoint == endpoint:
                        del self._pending[request]
                self._changed.notify_all()
                return None
            outcome = match.group("outcome")
            count = match.group("count")
            retry = RequestRetry(
                request=f"{method} {url}",
                endpoint=endpoint,
                attempt=int(match.group("attempt")),
                attempts=int(count) if count else None,
                last_error=(match.group("error") or outcome).strip(),
                failed_at=time.monotonic(),
                gave_up=outcome == "escalating",
            )
            if outcome == "will retry":
                if isinstance(backoffs, (int, float)):
                    retry.backoff = float(backoffs)
                elif isinstance(backoffs, Sequence) and len(backoffs) >= retry.attempt:
                    retry.backoff = float(backoffs[retry.attempt - 1])
                self._pending[retry.request] = retry
                if not self._debug_records:  # kopf logs a retried request's success at DEBUG only
                    self._debug_records = True
                    KopfDebugRecords.acquire()
            else:
                self._pending.pop(retry.request, None)
            self._changed.notify_all()
            return retry

    def release(self) -> None:
        """Once the run ended: stop letting kopf's DEBUG records through for it."""
        with self._changed:
            if self._debug_records:
                self._debug_records = False
                KopfDebugRecords.release()

    def settle(self, timeout: float) -> list[RequestRetry]:
        """Wait until no request is failing (each gets its backoff plus ``timeout`` s); those failing."""
        with self._changed:
            if not self._pending:
                return []
            # Fixed once: a request failing again meanwhile gets no more time.
            deadline = max(retry.failed_at + retry.backoff for retry in self._pending.values()) + timeout
            return super().settle(deadline - time.monotonic())


class KopfDebugRecords:
    """Let kopf's DEBUG records through (its logger ``kopf`` at DEBUG) while any user holds it.

    Reference-counted across operators; the level kopf's logger had is restored by the last
    release."""

    _lock = threading.Lock()
    _users = 0
    _saved_level: int | None = None

    @classmethod
    def acquire(cls) -> None:
        with cls._lock:
            logger = logging.getLogger("kopf")
            if cls._users == 0:
                cls._saved_level = logger.level
            cls._users += 1
            if logger.getEffectiveLevel() > logging.DEBUG:
                logger.setLevel(logging.DEBUG)

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0 and cls._saved_level is not None:
                logging.getLogger("kopf").setLevel(cls._saved_level)
                cls._saved_level = None


def is_kopf_stream_cancel_noise(record: logging.LogRecord) -> bool:
    """kopf's own bug, harmless: the done-callback of a cancelled stream request
    (``request_cancel_callback`` in ``kopf/_cogs/clients/api.py``) asserts that it runs in a task,
    but asyncio runs done-callbacks outside any task, so a watch stream that kopf cancels (when it
    pauses for a peer of higher priority, or resumes) logs "Exception in callback" with an
    AssertionError. Nothing of the operator's work is lost; it is not the test's failure."""
    if record.name != "asyncio" or not record.exc_info or record.exc_info[2] is None:
        return False
    frames = traceback.extract_tb(record.exc_info[2])
    return bool(frames) and frames[-1].name == "request_cancel_callback" and "kopf" in frames[-1].filename
