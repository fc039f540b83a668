"""A crashed operator fails a wait at once with its own error, not after the timeout."""

from __future__ import annotations

import pytest
from wait_helpers import Counter

from ktest.errors import OperatorError
from ktest.run_context import add_health_check, run_context
from ktest.wait import aio, consistently, eventually


def crashed() -> None:
    raise OperatorError("operator 'bucketclaim' died: ZeroDivisionError in on_create")


def test_eventually_fails_fast_when_an_operator_crashed() -> None:
    looks, attempts = Counter(), Counter()

    def crashes_after_two_looks() -> None:
        if looks.tick() > 2:
            crashed()

    with run_context("test", test=True):
        add_health_check(crashes_after_two_looks)
        with pytest.raises(OperatorError, match="ZeroDivisionError in on_create"):
            eventually(lambda: attempts.tick() < 0, timeout=5, interval=0.01)
    # Polled every 0.01 s for up to 5 s: waiting out the timeout makes hundreds of attempts.
    assert attempts.calls <= 2, f"{attempts.calls} attempts: the wait went on after the operator crashed"


def test_consistently_fails_fast_when_an_operator_crashed() -> None:
    with run_context("test", test=True):
        add_health_check(crashed)
        with pytest.raises(OperatorError, match="died"):
            consistently(lambda: True, duration=5)


def test_healthy_checks_do_not_interfere_and_removal_works() -> None:
    with run_context("test", test=True):
        remove = add_health_check(crashed)
        remove()
        assert eventually(lambda: 42, timeout=1) == 42


@pytest.mark.asyncio
async def test_async_eventually_fails_fast_when_an_operator_crashed() -> None:
    with run_context("test", test=True):
        add_health_check(crashed)
        with pytest.raises(OperatorError, match="ZeroDivisionError"):
            await aio.eventually(lambda: False, timeout=5)
