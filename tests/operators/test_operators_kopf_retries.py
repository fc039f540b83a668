"""kopf's retries by design: a handler's kopf.TemporaryError retries pass when it then succeeds,
and fail the test when it keeps failing or is still failing when the test ends."""

from __future__ import annotations

import logging
import sys

import pytest
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES, wait_for

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import run_kopf
from ktest.operators.kopf.retries import is_kopf_stream_cancel_noise
from ktest.run_context import check_health, run_context
from ktest.wait import eventually

RETRYING = SAMPLES / "kopf_retrying.py"
RETRY = {"ktest.dev/retry": "true"}


def provisioned(admin: Cluster, ns: str, name: str) -> str | None:
    annotations = admin.get(configmap_ref(name, ns))["metadata"].get("annotations") or {}
    return annotations.get("ktest.dev/provisioned")


def test_a_handler_failing_twice_then_succeeding_passes_by_default(admin: Cluster, ns: str) -> None:
    with run_context("test-scope"), run_kopf(RETRYING, admin, namespaces=[ns]) as op:
        admin.create(configmap("flaky", ns, {"failures": "2"}, labels=RETRY))
        eventually(lambda: provisioned(admin, ns, "flaky") == "after 2 retries")
        check_health()
        assert op.error is None
        assert op.pending_retries == []
    assert op.logs.count("Handler 'provision' failed temporarily: backend for flaky not ready yet") == 2


def test_a_handler_retrying_forever_fails_the_test_naming_it_and_its_last_error(
    admin: Cluster, ns: str
) -> None:
    with run_context("test-scope"):
        op = run_kopf(RETRYING, admin, namespaces=[ns], name="retrier")
        try:
            admin.create(configmap("doomed", ns, {"failures": "forever"}, labels=RETRY))
            with pytest.raises(OperatorError) as raised:
                eventually(lambda: provisioned(admin, ns, "doomed") is not None, timeout=60)
        finally:
            op.close()
    message = str(raised.value)
    assert (
        f"operator 'retrier' (kopf) kept retrying Handler 'provision' on ConfigMap {ns}/doomed: "
        "it failed temporarily 6 times in a row (tolerated_retries=5)" in message
    )
    assert "Its last error: backend for doomed not ready yet (attempt 6)" in message
    assert "should be reported (status, kopf.PermanentError), not retried" in message


def test_a_handler_still_failing_when_the_test_ends_fails_it(admin: Cluster, ns: str) -> None:
    with run_context("test-scope"):
        op = run_kopf(RETRYING, admin, namespaces=[ns], name="slow-retrier", tolerated_retries=1000)
        admin.create(configmap("pending", ns, {"failures": "forever"}, labels=RETRY))
        wait_for(lambda: len(op.pending_retries) == 1)
        check_health()  # retrying, within what is tolerated: no failure yet
        with pytest.raises(OperatorError) as raised:
            op.close()  # the end of the test
    message = str(raised.value)
    assert (
        f"operator 'slow-retrier' (kopf) was still retrying Handler 'provision' on ConfigMap {ns}/pending "
        "when the test ended" in message
    )
    assert "Its last error: backend for pending not ready yet (attempt" in message


def test_tolerated_retries_zero_fails_on_the_first_temporary_error(admin: Cluster, ns: str) -> None:
    with run_context("test-scope"):
        op = run_kopf(RETRYING, admin, namespaces=[ns], tolerated_retries=0)
        try:
            admin.create(configmap("strict", ns, {"failures": "1"}, labels=RETRY))
            with pytest.raises(OperatorError, match="failed temporarily 1 times in a row"):
                eventually(lambda: False, timeout=60)
        finally:
            op.close()
    with pytest.raises(OperatorError, match="tolerated_retries=-1 must be a whole number >= 0"):
        run_kopf(RETRYING, admin, namespaces=[ns], tolerated_retries=-1)


def test_a_retry_of_an_object_deleted_meanwhile_is_forgotten(admin: Cluster, ns: str) -> None:
    with run_context("test-scope"):
        op = run_kopf(RETRYING, admin, namespaces=[ns], tolerated_retries=1000)
        gone = admin.create(configmap("gone", ns, {"failures": "forever"}, labels=RETRY))
        wait_for(lambda: len(op.pending_retries) == 1)
        admin.delete(gone)
        wait_for(lambda: admin.get_or_none(gone) is None)
        op.close()  # no failure: the handler can no longer succeed, nor does it matter
    assert "failed temporarily" in op.logs


def _asyncio_callback_record(filename: str, function: str) -> logging.LogRecord:
    """The record asyncio logs for a done-callback that raised, with a real traceback whose last
    frame is ``function`` in ``filename``."""
    source = f"def {function}():\n    assert None is not None\n"
    namespace: dict[str, object] = {}
    exec(compile(source, filename, "exec"), namespace)
    try:
        namespace[function]()  # type: ignore[operator]
    except AssertionError:
        exc_info = sys.exc_info()
    return logging.LogRecord("asyncio", logging.ERROR, "", 0, "Exception in callback", None, exc_info)


def test_kopfs_own_stream_cancel_assertion_is_not_the_tests_failure() -> None:
    """kopf 1.45's request_cancel_callback asserts a current task, which asyncio's done-callbacks
    never have (a stream cancelled when kopf pauses for a peer); any other callback error counts."""
    kopf_file = "/venv/site-packages/kopf/_cogs/clients/api.py"
    assert is_kopf_stream_cancel_noise(_asyncio_callback_record(kopf_file, "request_cancel_callback"))
    assert not is_kopf_stream_cancel_noise(_asyncio_callback_record(kopf_file, "stream"))
    users_own = _asyncio_callback_record("/app/handlers.py", "request_cancel_callback")
    assert not is_kopf_stream_cancel_noise(users_own)
    plain = logging.LogRecord("asyncio", logging.ERROR, "", 0, "Exception in callback", None, None)
    assert not is_kopf_stream_cancel_noise(plain)
