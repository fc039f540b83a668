"""eventually(): pass/retry/fail semantics and the content of its failure message.

These checks are plain functions (no cluster), so the behaviour under test is the
retry loop itself; the API errors are the real client exception classes.
"""

from __future__ import annotations

import re
import time
import traceback

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError, ServiceUnavailableError
from wait_helpers import Counter

from ktest.errors import ConfigError
from ktest.errors.api import ApiError
from ktest.wait import consistently, eventually, use_defaults

FAST = {"timeout": 0.3, "interval": 0.01}


def test_returns_value_of_first_passing_attempt() -> None:
    assert eventually(lambda: {"phase": "Ready"}, **FAST) == {"phase": "Ready"}


def test_retries_assertion_errors_until_passing_and_returns_last_value() -> None:
    counter = Counter()

    def check() -> int:
        n = counter.tick()
        assert n >= 4, "not yet"
        return n * 10

    assert eventually(check, **FAST) == 40
    assert counter.calls == 4


def test_false_and_other_falsy_values_are_not_yet() -> None:
    counter = Counter()
    assert eventually(lambda: counter.tick() >= 3, **FAST) is True
    assert counter.calls == 3
    for falsy in (None, 0, "", [], {}):
        with pytest.raises(AssertionError, match=re.escape(f"the check returned {falsy!r}")):
            eventually(lambda falsy=falsy: falsy, timeout=0.05, interval=0.01)


def test_failure_message_has_elapsed_attempts_rewritten_assert_and_last_value() -> None:
    state = {"phase": "Pending"}
    counter = Counter()

    def check_phase() -> str:
        counter.tick()
        assert state["phase"] == "Running"
        return state["phase"]

    started = time.monotonic()
    with pytest.raises(AssertionError) as info:
        eventually(check_phase, timeout=0.5, interval=0.02)
    elapsed = time.monotonic() - started
    message = str(info.value)
    first, *_ = message.splitlines()
    assert first.startswith("eventually(check_phase) did not pass within 0.5s: ")
    assert f"{counter.calls} attempts in " in first
    assert elapsed >= 0.5, "gave up before the timeout"
    assert counter.calls >= 5  # ~25 on a quiet machine
    # pytest's rewritten assertion text, not a bare "AssertionError"
    assert "AssertionError: assert 'Pending' == 'Running'" in message
    assert f"Last failure (attempt {counter.calls}, at " in message
    assert f"Values the check saw (attempt {counter.calls}):" in message
    assert "state = {'phase': 'Pending'}" in message
    assert "Last value returned" not in message
    assert "polling every 0.02s (the check read no objects through a Cluster)" in message
    assert isinstance(info.value.__cause__, AssertionError)


def test_failure_message_shows_the_last_value_returned() -> None:
    counter = Counter()

    def check() -> bool:
        n = counter.tick()
        if n % 2:
            return False
        raise AssertionError(f"only {n} replicas ready")

    with pytest.raises(AssertionError) as info:
        eventually(check, timeout=0.15, interval=0.01)
    message = str(info.value)
    last = counter.calls
    last_value_attempt = last if last % 2 else last - 1
    assert f"Last value returned (attempt {last_value_attempt}): False" in message
    if last % 2:
        assert "the check returned False" in message
    else:
        assert f"AssertionError: only {last} replicas ready" in message


def test_values_the_check_saw_are_its_variables_pretty_printed() -> None:
    conditions = [{"type": f"Condition{i}", "status": "False", "reason": "Waiting" * 3}
                  for i in range(6)]

    def check_ready() -> None:
        obj = {"kind": "Widget", "status": {"conditions": conditions}}
        ready = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
        assert ready, "no Ready condition"

    with pytest.raises(AssertionError) as info:
        eventually(check_ready, timeout=0.05, interval=0.01)
    message = str(info.value)
    seen = message[message.index("Values the check saw"):]
    assert "    obj =\n        {'kind': 'Widget',\n" in seen  # long values go below the name
    assert "'type': 'Condition5'" in seen
    assert "    ready = []" in seen
    assert "Last value seen: none" not in message


def test_nothing_seen_is_said_plainly() -> None:
    with pytest.raises(AssertionError) as info:
        eventually(_fail, timeout=0.05, interval=0.01)
    assert "Last value seen: none (the check raised every time" in str(info.value)


def _fail() -> None:
    raise AssertionError("never")


def test_description_replaces_the_function_name() -> None:
    with pytest.raises(AssertionError) as info:
        eventually(lambda: False, description="the widget becomes Ready", **FAST)
    assert str(info.value).startswith("eventually(the widget becomes Ready) did not pass")


def test_lambda_is_described_by_its_source() -> None:
    with pytest.raises(AssertionError) as info:
        eventually(lambda: 1 + 1 == 3, **FAST)
    assert str(info.value).startswith("eventually(lambda: 1 + 1 == 3) did not pass within 0.3s")


def test_other_exceptions_propagate_at_once_with_their_traceback() -> None:
    counter = Counter()

    def check_parse() -> None:
        counter.tick()
        int("not a number")

    started = time.monotonic()
    with pytest.raises(ValueError) as info:
        eventually(check_parse, timeout=5, interval=0.01)
    assert time.monotonic() - started < 5
    assert counter.calls == 1
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "check_parse"
    notes = getattr(info.value, "__notes__", [])
    if hasattr(info.value, "add_note"):
        assert any("raised by eventually(check_parse) on attempt 1" in note for note in notes)


@pytest.mark.parametrize(
    "error",
    [
        ApiException(status=409, reason="Conflict"),
        ApiException(status=429, reason="Too Many Requests"),
        ApiException(status=500, reason="Internal Server Error"),
        ApiException(status=504, reason="Gateway Timeout"),
        ApiException(status=404, reason="Not Found"),
        ApiError(404, "Not Found", '{"message": "widgets \\"w\\" not found"}', method="GET",
                 path="/apis/x/v1/widgets/w"),
        urllib3.exceptions.ProtocolError("Connection aborted."),
        urllib3.exceptions.MaxRetryError(None, "/api", "refused"),  # type: ignore[arg-type]
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(e, "status", "") or ""),
)
def test_transient_api_and_connection_errors_are_retried(error: BaseException) -> None:
    counter = Counter()

    def check() -> str:
        if counter.tick() < 3:
            raise error
        return "ok"

    assert eventually(check, **FAST) == "ok"
    assert counter.calls == 3


def test_dynamic_client_errors_are_retried() -> None:
    counter = Counter()
    original = ApiException(status=404, reason="Not Found")

    def check() -> str:
        n = counter.tick()
        if n == 1:
            raise NotFoundError(original)
        if n == 2:
            raise ServiceUnavailableError(ApiException(status=503, reason="Unavailable"))
        return "ok"

    assert eventually(check, **FAST) == "ok"


@pytest.mark.parametrize("status", [400, 401, 403, 422])
def test_client_errors_other_than_404_409_429_fail_at_once(status: int) -> None:
    counter = Counter()

    def check() -> None:
        counter.tick()
        raise ApiException(status=status, reason="Nope")

    with pytest.raises(ApiException) as info:
        eventually(check, timeout=5, interval=0.01)
    assert info.value.status == status
    assert counter.calls == 1


def test_api_error_at_timeout_is_summarised_in_the_message() -> None:
    body = '{"kind": "Status", "message": "widgets.example.com \\"w\\" not found"}'

    def check() -> None:
        error = ApiException(status=404, reason="Not Found")  # body= only from kubernetes 32 on
        error.body = body
        raise error  # never appears

    with pytest.raises(AssertionError) as info:
        eventually(check, **FAST)
    message = str(info.value)
    assert 'ApiException: 404 Not Found: widgets.example.com "w" not found' in message
    assert isinstance(info.value.__cause__, ApiException)


def test_defaults_come_from_use_defaults() -> None:
    counter = Counter()
    started = time.monotonic()
    with use_defaults(timeout=0.3, interval=0.01), pytest.raises(AssertionError) as info:
        eventually(lambda: counter.tick() < 0)
    assert time.monotonic() - started < 5
    assert "did not pass within 0.3s" in str(info.value)
    assert counter.calls >= 3  # ~30 on a quiet machine


def test_timeout_zero_makes_exactly_one_attempt() -> None:
    counter = Counter()
    with pytest.raises(AssertionError) as info:
        eventually(lambda: counter.tick() < 0, timeout=0, interval=0.01)
    assert counter.calls == 1
    assert "1 attempt in" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"timeout": -1}, "timeout=-1 is out of range"),
        ({"interval": 0}, "interval=0 is out of range"),
        ({"timeout": "5"}, "timeout='5' is not a number of seconds"),
        ({"timeout": float("inf")}, "would wait forever"),
    ],
)
def test_bad_settings_raise_config_error(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        eventually(lambda: True, **kwargs)  # type: ignore[arg-type]


def test_watch_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs cluster="):
        eventually(lambda: True, watch=[("v1", "ConfigMap", "a", "ns")])
    with pytest.raises(ConfigError, match="watch=True"):
        eventually(lambda: True, watch=True)
    with pytest.raises(ConfigError, match="no apiVersion/kind"):
        eventually(lambda: True, watch=[{"metadata": {"name": "a"}}], cluster=object())


def test_not_callable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs a callable check"):
        eventually(True)  # type: ignore[arg-type]


def test_a_misspelt_keyword_names_the_function_and_what_it_takes() -> None:
    with pytest.raises(TypeError, match=r"eventually\(\) got an unexpected keyword argument 'timout'; "
                       r"it takes timeout=, interval="):
        eventually(lambda: True, timout=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"consistently\(\) got an unexpected keyword argument 'timeout'; "
                       r"it takes duration="):
        consistently(lambda: True, timeout=1)  # type: ignore[call-arg]


def test_async_check_in_sync_eventually_points_to_aio() -> None:
    async def check() -> bool:
        return True

    with pytest.raises(TypeError, match=r"use ktest\.wait\.aio\.eventually"):
        eventually(check, **FAST)
