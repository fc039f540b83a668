"""WaitDefaults / use_defaults: scoped by ContextVar, validated."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ktest.errors import ConfigError
from ktest.wait import WaitDefaults, current_defaults, use_defaults


def test_built_in_defaults_are_the_envtest_values() -> None:
    assert current_defaults() == WaitDefaults(timeout=10.0, interval=0.25, duration=2.0)


def test_use_defaults_changes_only_given_fields_and_restores() -> None:
    with use_defaults(timeout=30) as inside:
        assert inside == WaitDefaults(timeout=30, interval=0.25, duration=2.0)
        assert current_defaults() is inside
        with use_defaults(WaitDefaults(timeout=1, interval=0.1, duration=0.5), duration=3):
            assert current_defaults() == WaitDefaults(timeout=1, interval=0.1, duration=3)
        assert current_defaults().timeout == 30
    assert current_defaults() == WaitDefaults()


def test_defaults_do_not_leak_into_other_threads() -> None:
    seen: list[WaitDefaults] = []
    with use_defaults(timeout=99):
        thread = threading.Thread(target=lambda: seen.append(current_defaults()))
        thread.start()
        thread.join()
    assert seen == [WaitDefaults()]


def test_tasks_started_inside_see_the_defaults() -> None:
    async def main() -> float:
        with use_defaults(interval=0.5):
            return await asyncio.create_task(_interval())

    async def _interval() -> float:
        return current_defaults().interval

    assert asyncio.run(main()) == 0.5


@pytest.mark.parametrize("field", ["timeout", "interval", "duration"])
def test_invalid_values_are_config_errors(field: str) -> None:
    with pytest.raises(ConfigError, match=f"wait {field}=-2 is out of range"):
        WaitDefaults(**{field: -2})
    with pytest.raises(ConfigError, match=f"wait {field}=True is not a number"), use_defaults(
        **{field: True}
    ):
        pass
