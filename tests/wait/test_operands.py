"""The values a check compared, in the failure messages of ``eventually``/``consistently``
(ktest.wait.operands rewrites the check's last expression, ktest.wait.comparison shows it).

The checks read plain Python state; tests/wait/test_operand_reports.py runs the same kinds of
failure against a real cluster in child pytest sessions.
"""

from __future__ import annotations

import asyncio
import importlib
import linecache
import sys
from pathlib import Path
from typing import Any

import pytest
from wait_helpers import Counter

from ktest.wait import aio, consistently, eventually
from ktest.wait.operands import instrument

FAST = {"timeout": 0.2, "interval": 0.02}


def failure(call: Any) -> str:
    with pytest.raises(AssertionError) as info:
        call()
    return str(info.value)


# -------------------------------------------------------------------- the messages


def test_a_string_comparison_names_both_strings_with_pytests_character_diff() -> None:
    config_map = {"data": {"greeting": "hello, world"}}
    message = failure(lambda: eventually(lambda: config_map["data"]["greeting"] == "hello, World", **FAST))
    assert 'where config_map["data"]["greeting"] = \'hello, world\'' in message
    assert "'hello, world' == 'hello, World'" in message
    assert "- hello, World" in message and "+ hello, world" in message
    assert "?        ^" in message  # the character that differs


def test_a_dict_comparison_names_the_differing_keys() -> None:
    status = {"phase": "Pending", "replicas": 1, "extra": True}
    message = failure(lambda: eventually(lambda: status == {"phase": "Ready", "replicas": 1}, **FAST))
    assert "Differing items:" in message and "{'phase': 'Pending'} != {'phase': 'Ready'}" in message
    assert "Left contains 1 more item:" in message
    assert "where {" not in message  # a literal is not shown again as its own value


def test_the_values_come_from_the_real_attempts_with_no_extra_call() -> None:
    counter = Counter()
    message = failure(lambda: consistently(lambda: counter.tick() < 3, duration=2, interval=0.01))
    assert "broke on attempt 3" in message
    assert "where counter.tick() = 3" in message  # the value of the breaking attempt itself
    assert counter.calls == 3  # the check was not called again to show it
    assert "Compared at the first attempt" in message and "where counter.tick() = 1" in message


def test_the_first_attempt_is_shown_only_when_its_values_differ() -> None:
    replicas = {"ready": 0}
    unchanged = failure(lambda: eventually(lambda: replicas["ready"] == 3, **FAST))
    assert "Compared at the first attempt" not in unchanged


def test_a_boolean_combination_shows_each_clause_and_what_was_not_evaluated() -> None:
    obj = {"phase": "Pending", "conditions": []}

    def ready() -> bool:
        phase = obj["phase"]
        return phase == "Ready" and "Available" in obj["conditions"]

    message = failure(lambda: eventually(ready, **FAST))
    assert 'phase == "Ready": False' in message and "where phase = 'Pending'" in message
    assert "\"Available\" in obj[\"conditions\"]: not evaluated (and stopped before it)" in message


def test_a_call_shows_its_arguments() -> None:
    pods = [{"name": "a", "ready": False}]
    message = failure(lambda: eventually(lambda: all_ready(pods, minimum=1), **FAST))
    assert "all_ready(pods, minimum=1)" in message
    assert "where pods = [{'name': 'a', 'ready': False}]" in message


def all_ready(pods: list[dict[str, Any]], *, minimum: int) -> bool:
    return len(pods) >= minimum and all(pod["ready"] for pod in pods)


def test_not_shows_the_negated_value() -> None:
    items = ["leftover"]
    message = failure(lambda: eventually(lambda: not items, **FAST))
    assert "where items = ['leftover']" in message


def test_async_checks_of_aio_eventually_and_consistently_show_values() -> None:
    state = {"greeting": "hello, world"}

    async def greeting() -> str:
        await asyncio.sleep(0)
        return state["greeting"]

    async def greeted() -> bool:
        return await greeting() == "hello, World"

    message = failure(lambda: asyncio.run(aio.eventually(greeted, **FAST)))
    assert "where await greeting() = 'hello, world'" in message and "- hello, World" in message
    broke = failure(lambda: asyncio.run(aio.consistently(lambda: state == {"greeting": "hi"}, duration=0.2)))
    assert "Differing items:" in broke and "{'greeting': 'hello, world'} != {'greeting': 'hi'}" in broke


def test_an_assertion_style_check_keeps_pytests_rewritten_message() -> None:
    phase = {"value": "Pending"}

    def is_ready() -> None:
        assert phase["value"] == "Ready"

    message = failure(lambda: eventually(is_ready, **FAST))
    assert "assert 'Pending' == 'Ready'" in message  # pytest's own rewriting of the test module
    assert "Compared" not in message and "cannot show" not in message


def test_a_missing_key_in_an_operand_is_still_not_there_yet() -> None:
    obj: dict[str, Any] = {"status": {}}
    message = failure(lambda: eventually(lambda: obj["status"]["phase"] == "Ready", **FAST))
    assert "not there yet: key 'phase' is missing (KeyError)" in message
    assert 'obj["status"]["phase"]' in message and "Compared" not in message


def test_without_source_the_message_says_so_and_stays_as_before() -> None:
    scope: dict[str, Any] = {}
    exec("check = lambda: 1 == 2", scope)  # no file behind it
    message = failure(lambda: eventually(scope["check"], **FAST))
    assert "ktest cannot show the values the check compared: its source is not available" in message
    assert "Last value returned (attempt" in message


def test_a_builtin_check_is_named_as_such() -> None:
    message = failure(lambda: eventually(sys.is_finalizing, **FAST))
    assert "cannot show the values the check compared: the check is a builtin" in message


# -------------------------------------------------------------------- the rewriting itself


def test_the_rewritten_check_reads_the_same_closure_cells() -> None:
    wanted = "a"
    rewritten = instrument(lambda: wanted == "b")
    assert rewritten.expression is not None and rewritten.call() is False
    wanted = "b"  # rebinding after the rewrite is seen: the cells are the original's
    assert rewritten.call() is True


def test_the_rewritten_check_keeps_defaults_short_circuits_and_walrus() -> None:
    calls: list[str] = []

    def side(name: str) -> bool:
        calls.append(name)
        return True

    def check(limit: int = 2, *, floor: int = 0) -> bool:
        return (size := limit) > floor or side(f"never {size}")

    rewritten = instrument(check)
    assert rewritten.expression is not None and rewritten.capture is not None
    assert rewritten.call() is True and calls == []
    values = rewritten.capture.take()
    assert list(values.values()).count(2) >= 1 and rewritten.capture.values == {}


def test_checks_that_would_change_meaning_are_left_alone() -> None:
    class Widget:
        def __init__(self) -> None:
            self.__secret = 1

        def check(self) -> bool:
            return self.__secret == 1  # mangled inside the class body only

    def generator() -> Any:
        yield 1 == 1

    def asserting() -> bool:
        assert 1
        return 1 == 1

    for fn in (Widget().check.__func__, generator, asserting, lambda: 1 + 1):
        assert instrument(fn).expression is None


def test_a_value_whose_repr_raises_does_not_break_the_message() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    broken = Broken()
    message = failure(lambda: eventually(lambda: broken == 1, **FAST))
    assert "did not pass within" in message
    assert "(its values cannot be shown: RuntimeError: no repr)" in message


def test_a_source_edited_since_import_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_file = tmp_path / "edited_check.py"
    module_file.write_text("limit = 3\ncheck = lambda: limit == 4\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("edited_check")
    module_file.write_text("other = 3\ncheck = lambda: other + limit == 4\n")  # what runs is the old one
    linecache.checkcache(str(module_file))
    rewritten = instrument(module.check)
    assert rewritten.expression is None and rewritten.call is module.check
