"""ktest.wait.aio: the same semantics for async def tests, sync or async checks."""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes.client.exceptions import ApiException

from ktest.wait import aio


@pytest.mark.asyncio
async def test_async_check_passes_once_another_task_changes_state() -> None:
    state = {"ready": False}

    async def become_ready() -> None:
        await asyncio.sleep(0.05)
        state["ready"] = True

    async def check_ready() -> dict[str, bool]:
        assert state["ready"], "not ready yet"
        return state

    task = asyncio.create_task(become_ready())  # only runs if the sleeps yield to the loop
    assert await aio.eventually(check_ready, timeout=2, interval=0.01) == {"ready": True}
    await task


@pytest.mark.asyncio
async def test_sync_check_is_accepted() -> None:
    calls = []
    assert await aio.eventually(lambda: calls.append(1) or len(calls) >= 3, timeout=1,
                                interval=0.01) is True
    assert len(calls) == 3


@pytest.mark.asyncio
async def test_async_failure_message() -> None:
    async def check_phase() -> None:
        phase = "Pending"
        assert phase == "Running"

    with pytest.raises(AssertionError) as info:
        await aio.eventually(check_phase, timeout=0.1, interval=0.02)
    message = str(info.value)
    assert message.startswith("eventually(check_phase) did not pass within 0.1s: ")
    assert "AssertionError: assert 'Pending' == 'Running'" in message


@pytest.mark.asyncio
async def test_async_transient_errors_retried_and_others_raised() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ApiException(status=409, reason="Conflict")
        return "ok"

    assert await aio.eventually(flaky, timeout=1, interval=0.01) == "ok"

    async def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await aio.eventually(broken, timeout=5, interval=0.01)


@pytest.mark.asyncio
async def test_async_consistently_holds_and_breaks() -> None:
    started = time.monotonic()
    await aio.consistently(lambda: True, duration=0.1, interval=0.02)
    assert time.monotonic() - started >= 0.1

    calls = 0

    async def stays() -> int:
        nonlocal calls
        calls += 1
        assert calls < 3, "changed"
        return calls

    with pytest.raises(AssertionError) as info:
        await aio.consistently(stays, duration=5, interval=0.01)
    assert "broke on attempt 3" in str(info.value)
    assert "Last value before the break (attempt 2): 2" in str(info.value)


@pytest.mark.asyncio
async def test_the_event_loop_keeps_running_while_waiting() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(AssertionError):
            await aio.eventually(lambda: False, timeout=1.0, interval=0.1)
    finally:
        task.cancel()
    # a loop blocked between attempts ticks at most once an attempt (about 11); a free one about
    # 200 times, and still far above 30 on a busy machine (0.2 s once gave 8 ticks there)
    assert ticks >= 30
