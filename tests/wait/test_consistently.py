"""consistently(): holds for the whole window, or breaks with when and on which attempt."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException
from wait_helpers import Counter

from ktest.wait import consistently, use_defaults


def test_passes_when_the_check_holds_for_the_whole_window() -> None:
    counter = Counter()
    started = time.monotonic()
    assert consistently(lambda: counter.tick() > 0, duration=0.5, interval=0.02) is None
    assert time.monotonic() - started >= 0.5, "stopped before the window ended"
    # ~25 checks on a quiet machine; 5 leaves room for a loaded CI runner's late wake-ups
    assert counter.calls >= 5


def test_the_last_attempt_lands_at_the_end_of_the_window() -> None:
    times: list[float] = []
    started = time.monotonic()
    consistently(lambda: times.append(time.monotonic() - started) or True, duration=0.25, interval=0.1)
    assert times[-1] >= 0.25


def test_breaks_on_the_attempt_that_fails_and_says_so() -> None:
    counter = Counter()

    def replicas_stay_at_three() -> dict[str, int]:
        n = counter.tick()
        replicas = 3 if n < 4 else 5
        assert replicas == 3, f"replicas changed to {replicas}"
        return {"replicas": replicas, "attempt": n}

    started = time.monotonic()
    with pytest.raises(AssertionError) as info:
        consistently(replicas_stay_at_three, duration=10, interval=0.01)
    assert time.monotonic() - started < 10, "did not stop at the first failure"
    assert counter.calls == 4
    message = str(info.value)
    first, second = message.splitlines()[:2]
    assert first.startswith("consistently(replicas_stay_at_three) broke on attempt 4, ")
    assert first.endswith("s into its 10s window: it now raises AssertionError: replicas changed to 5 "
                          "(it had returned {'replicas': 3, 'attempt': 3}).")
    assert second.startswith("It held before: 3 attempts passed, the last at ")
    assert "AssertionError: replicas changed to 5" in message
    assert "assert 5 == 3" in message  # pytest's rewritten explanation
    assert "Last value before the break (attempt 3): {'replicas': 3, 'attempt': 3}" in message
    assert isinstance(info.value.__cause__, AssertionError)


def test_false_result_breaks_it_and_is_shown_as_the_value_at_the_break() -> None:
    counter = Counter()
    with pytest.raises(AssertionError) as info:
        consistently(lambda: counter.tick() < 3, duration=5, interval=0.01)
    message = str(info.value)
    assert "broke on attempt 3" in message
    assert "window: its result changed from True to False." in message.splitlines()[0]
    assert "Failure: the check returned False" in message
    assert "Value at the break (attempt 3): False" in message


def test_failing_first_attempt_says_it_never_held() -> None:
    with pytest.raises(AssertionError) as info:
        consistently(lambda: False, duration=5, interval=0.01)
    assert "broke on attempt 1" in str(info.value)
    assert str(info.value).splitlines()[0].endswith("window: it returned False.")
    assert "It never held: the first attempt failed." in str(info.value)


def test_404_means_the_object_is_gone_and_breaks_it() -> None:
    counter = Counter()

    def check() -> None:
        if counter.tick() == 2:
            raise ApiException(status=404, reason="Not Found")

    with pytest.raises(AssertionError) as info:
        consistently(check, duration=5, interval=0.01)
    assert counter.calls == 2
    assert "Failure: ApiException: 404 Not Found" in str(info.value)


def test_transient_errors_are_evaluated_again_without_breaking() -> None:
    counter = Counter()

    def check() -> bool:
        if counter.tick() in (2, 3):
            raise ApiException(status=503, reason="Service Unavailable")
        return True

    consistently(check, duration=0.15, interval=0.01)
    assert counter.calls > 4


def test_only_transient_errors_is_a_failure() -> None:
    def check() -> None:
        raise ApiException(status=429, reason="Too Many Requests")

    with pytest.raises(AssertionError) as info:
        consistently(check, duration=0.1, interval=0.01)
    message = str(info.value)
    assert "could not evaluate the check during its 0.1s window" in message
    assert "ApiException: 429 Too Many Requests" in message


def test_other_exceptions_propagate_at_once() -> None:
    counter = Counter()

    def check() -> None:
        if counter.tick() == 2:
            raise ValueError("bug in the check")

    with pytest.raises(ValueError, match="bug in the check"):
        consistently(check, duration=5, interval=0.01)
    assert counter.calls == 2


def test_duration_default_comes_from_use_defaults() -> None:
    counter = Counter()
    started = time.monotonic()
    with use_defaults(duration=0.1, interval=0.02):
        consistently(lambda: counter.tick() > 0)
    assert time.monotonic() - started >= 0.1, "stopped before the window ended"
    # The window it used, in its own words (not the 2s built-in default): no clock involved.
    breaks = Counter()
    with use_defaults(duration=0.1, interval=0.02), pytest.raises(AssertionError) as info:
        consistently(lambda: breaks.tick() < 2)
    assert "s into its 0.1s window" in str(info.value), str(info.value)
