"""When a check passes (ktest.wait.checks): "not there yet" is retried and reported,
and a check never passes by accident.  One test per row of the table in docs/guides/waiting.md.

The checks read state that a background thread fills in a little later, the way
an operator writes status after a test created the object.
"""

from __future__ import annotations

import ast
import functools
import linecache
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from wait_helpers import Counter

from ktest.wait import assert_matches, consistently, eventually
from ktest.wait import checks as check_rule
from ktest.wait.checks import is_assertion_style

FAST = {"timeout": 0.3, "interval": 0.01}


def later(action: Callable[[], Any], delay: float = 0.05) -> threading.Thread:
    """Run ``action`` after ``delay`` seconds on a thread (the "operator")."""
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    thread.start()
    return thread


# -------------------------------------------------------------------- returns None / falsy


def test_a_lookup_returning_none_waits_instead_of_passing_at_once() -> None:
    """The user's bug: ``.get("finalizers")`` is None before the operator adds one."""
    obj: dict[str, Any] = {"metadata": {}}
    writer = later(lambda: obj["metadata"].update(finalizers=["example.com/cleanup"]))
    assert eventually(lambda: obj["metadata"].get("finalizers"), timeout=2, interval=0.01) == [
        "example.com/cleanup"
    ]
    writer.join()


def test_a_helper_returning_none_for_absent_never_passes() -> None:
    def find_widget() -> dict[str, Any] | None:
        for item in []:
            return item
        return None

    with pytest.raises(AssertionError) as info:
        eventually(find_widget, **FAST)
    message = str(info.value)
    assert "Last failure (attempt" in message and "the check returned None" in message
    assert "None means not yet" in message
    assert "make it a def without return" in message


def test_an_empty_result_is_not_yet_and_the_message_says_why() -> None:
    with pytest.raises(AssertionError) as info:
        eventually(lambda: [], **FAST)
    assert "[] is falsy, so it means not yet" in str(info.value)


# -------------------------------------------------------------------- lookup errors


def test_a_missing_key_is_retried_until_it_appears() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "w"}}
    writer = later(lambda: obj.update(status={"phase": "Ready"}))
    assert eventually(lambda: obj["status"]["phase"] == "Ready", timeout=2, interval=0.01) is True
    writer.join()


def test_a_key_that_never_appears_is_named_in_the_message() -> None:
    obj: dict[str, Any] = {"status": {}}
    with pytest.raises(AssertionError) as info:
        eventually(lambda: obj["status"]["phase"], **FAST)
    message = str(info.value)
    assert "did not pass within 0.3s" in message
    assert "not there yet: key 'phase' is missing (KeyError) in " in message
    assert '`obj["status"]["phase"]` (test_check_rule.py:' in message
    assert "obj = {'status': {}}" in message  # the last value the check saw
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    ("check", "fragment"),
    [
        (lambda obj: obj["status"]["phase"], "TypeError: 'NoneType' object is not subscriptable"),
        (lambda obj: obj["status"].get("phase"), "AttributeError: 'NoneType' object has no attribute"),
        (lambda obj: "Ready" in obj["status"], "argument of type 'NoneType' is not iterable"),
        (lambda obj: obj["conditions"][0], "index out of range (IndexError"),
    ],
    ids=["none-subscript", "none-attribute", "none-in", "index"],
)
def test_none_used_as_an_object_and_missing_indexes_are_not_yet(
    check: Callable[[dict[str, Any]], Any], fragment: str
) -> None:
    obj: dict[str, Any] = {"status": None, "conditions": []}
    with pytest.raises(AssertionError) as info:
        eventually(lambda: check(obj), **FAST)
    message = str(info.value)
    assert "not there yet: " in message and fragment in message


def test_a_type_error_that_is_a_bug_still_propagates_at_once() -> None:
    counter = Counter()

    def check() -> bool:
        counter.tick()
        return len(5) > 0  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="has no len"):
        eventually(check, timeout=5, interval=0.01)
    assert counter.calls == 1


# -------------------------------------------------------------------- assertion-style checks


def test_an_assertion_style_def_passes_when_it_runs_to_its_end() -> None:
    state = {"ready": False}
    counter = Counter()

    def check_ready() -> None:
        counter.tick()
        if not state["ready"] and counter.calls == 2:
            state["ready"] = True
            return  # a bare return is still "no return value"
        assert state["ready"], "not ready"

    assert eventually(check_ready, **FAST) is None
    assert counter.calls == 2


def test_a_def_that_returns_values_does_not_pass_on_none() -> None:
    def phase() -> str | None:
        value = None
        if value:
            return value
        return None if value is None else "x"

    assert not is_assertion_style(phase)
    with pytest.raises(AssertionError, match="the check returned None"):
        eventually(phase, timeout=0.05, interval=0.01)


class _Checks:
    def ready(self) -> None:
        assert True

    def __call__(self) -> None:
        assert True


def _lookup_assertion(obj: dict[str, Any]) -> None:
    assert obj["a"] == 1


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (lambda: None, False),
        (_Checks().ready, True),
        (_Checks(), True),
        (functools.partial(_lookup_assertion, {"a": 1}), True),
        (Counter().tick, False),
        (print, False),
        (lambda: _lookup_assertion({}), True),
        (lambda: _Checks().ready(), False),  # a call on a call's result is not looked up
        (lambda: print("x"), False),
    ],
    ids=["lambda", "bound-method", "callable-object", "partial", "method-returning-value", "builtin",
         "lambda-calling-assertion", "lambda-calling-a-call", "lambda-calling-builtin"],
)
def test_which_callables_are_assertion_style(check: Callable[[], Any], expected: bool) -> None:
    assert is_assertion_style(check) is expected


def test_a_def_without_readable_source_does_not_pass_on_none() -> None:
    namespace: dict[str, Any] = {}
    exec("def generated():\n    pass\n", namespace)  # no file: its source cannot be read
    with pytest.raises(AssertionError) as info:
        eventually(namespace["generated"], timeout=0.05, interval=0.01)
    assert "ktest could not read the check's source" in str(info.value)


def test_a_lambda_that_only_calls_an_assertion_helper_is_assertion_style() -> None:
    obj = {"a": 1}
    checks = _Checks()
    assert eventually(lambda: _lookup_assertion(obj), **FAST) is None
    assert eventually(lambda: checks.ready(), **FAST) is None
    assert eventually(lambda: assert_matches(obj, {"a": 1}), **FAST) is True  # returns True itself
    # two lambdas on one line: each is judged by its own body
    value_check, assertion = (lambda: _returns_nothing_found(obj)), (lambda: _lookup_assertion(obj))
    assert is_assertion_style(assertion) and not is_assertion_style(value_check)
    with pytest.raises(AssertionError, match="the check returned None"):
        eventually(value_check, timeout=0.05, interval=0.01)


def test_a_lambda_doing_more_than_calling_a_helper_must_return_a_truthy_value() -> None:
    obj = {"a": 1}
    with pytest.raises(AssertionError) as info:
        eventually(lambda: obj and _lookup_assertion(obj), timeout=0.05, interval=0.01)
    assert "None means not yet" in str(info.value)
    assert "make it a def without return" in str(info.value)


def _returns_nothing_found(obj: dict[str, Any]) -> dict[str, Any] | None:
    return obj.get("absent")


# -------------------------------------------------------------------- consistently


def test_consistently_breaks_on_a_key_that_disappears_and_names_it() -> None:
    obj: dict[str, Any] = {"status": {"phase": "Ready"}}
    counter = Counter()

    def phase() -> str:
        if counter.tick() == 3:
            obj["status"].clear()
        return obj["status"]["phase"]

    with pytest.raises(AssertionError) as info:
        consistently(phase, duration=5, interval=0.01)
    first = str(info.value).splitlines()[0]
    assert first.startswith("consistently(phase) broke on attempt 3, ")
    assert first.endswith("window: key 'phase' is missing (KeyError) in "
                          "`obj[\"status\"][\"phase\"]` (test_check_rule.py:"
                          f"{phase.__code__.co_firstlineno + 3}) (it had returned 'Ready').")


def test_consistently_headline_says_how_the_value_changed() -> None:
    counter = Counter()
    with pytest.raises(AssertionError) as info:
        consistently(lambda: 3 if counter.tick() < 3 else 0, duration=5, interval=0.01)
    assert "window: its result changed from 3 to 0." in str(info.value).splitlines()[0]


def test_consistently_with_an_assertion_style_check() -> None:
    counter = Counter()
    limit = {"calls": 1000}

    def stays_small() -> None:
        assert counter.tick() < limit["calls"], f"grew to {counter.calls}"

    consistently(stays_small, duration=0.03, interval=0.01)
    limit["calls"] = counter.calls + 3
    with pytest.raises(AssertionError) as info:
        consistently(stays_small, duration=5, interval=0.01)
    message = str(info.value)
    first = message.splitlines()[0]
    assert "it now raises AssertionError: grew to " in first
    assert "it had returned" not in first
    assert "Last value before the break" not in message  # None is not a value it "returned"


def test_an_attribute_error_that_is_a_bug_propagates_at_once() -> None:
    counter = Counter()

    def check() -> bool:
        counter.tick()
        return {"spec": {}}.spec  # type: ignore[attr-defined]  # a dict, not an object

    with pytest.raises(AttributeError, match="'dict' object has no attribute 'spec'"):
        eventually(check, timeout=5, interval=0.01)
    assert counter.calls == 1


@pytest.mark.asyncio
async def test_aio_follows_the_same_rule() -> None:
    from ktest.wait import aio

    obj: dict[str, Any] = {"metadata": {}}

    async def check_finalized() -> None:  # assertion-style coroutine: passes by running to its end
        assert obj["metadata"]["finalizers"] == ["example.com/cleanup"]

    async def finalizers() -> list[str] | None:  # returns a value: None is "not yet"
        return obj["metadata"].get("finalizers")

    with pytest.raises(AssertionError) as info:
        await aio.eventually(check_finalized, timeout=0.05, interval=0.01)
    assert "not there yet: key 'finalizers' is missing (KeyError)" in str(info.value)
    with pytest.raises(AssertionError, match="the check returned None"):
        await aio.eventually(finalizers, timeout=0.05, interval=0.01)
    obj["metadata"]["finalizers"] = ["example.com/cleanup"]
    assert await aio.eventually(check_finalized, timeout=1, interval=0.01) is None
    assert await aio.eventually(finalizers, timeout=1, interval=0.01) == ["example.com/cleanup"]


def test_print_stays_a_builtin_while_operators_route_it() -> None:
    """While an in-process operator runs, ktest routes ``print`` to its log; a check that
    only prints must still not count as assertion-style (CI: it passed at once)."""
    from ktest.operators.logs import routing

    with routing():
        assert is_assertion_style(lambda: print("x")) is False


@pytest.mark.parametrize("spurious", [1, 2])
def test_a_spurious_systemerror_from_the_parser_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, spurious: int
) -> None:
    """Python 3.11's AST construction can raise "AST constructor recursion depth mismatch" when
    another thread builds an AST meanwhile (CPython gh-106905); judged on that, an assertion-style
    lambda would look like one returning None and never pass."""
    real_parse, failures = ast.parse, []

    def parse_meeting_the_bug(source: str, *args: Any, **kwargs: Any) -> ast.Module:
        if len(failures) < spurious:
            failures.append(source)
            raise SystemError("AST constructor recursion depth mismatch (before=162, after=184)")
        return real_parse(source, *args, **kwargs)

    check_rule._parse.cache_clear()
    obj = {"a": 1}
    with monkeypatch.context() as patch:
        patch.setattr(ast, "parse", parse_meeting_the_bug)
        judged = is_assertion_style(lambda: _lookup_assertion(obj))
    assert judged
    assert len(failures) == spurious


def test_a_parser_that_keeps_failing_is_reported_not_misjudged(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: str, *args: Any, **kwargs: Any) -> ast.Module:
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")

    check_rule._parse.cache_clear()
    obj = {"a": 1}
    with pytest.raises(SystemError, match="recursion depth mismatch"), monkeypatch.context() as patch:
        patch.setattr(ast, "parse", broken)
        is_assertion_style(lambda: _lookup_assertion(obj))


def test_the_check_text_is_the_lambdas_own_as_python_reads_it() -> None:
    """``eventually`` names its check by the lambda's own text, cut from the file's cached lines
    (not the whole source split again on every call): the same text ``ast.get_source_segment``
    gives, for every expression of this file, for a check after non-ASCII text on its line
    (offsets count UTF-8 bytes), and for a check over several lines."""
    lines = linecache.getlines(__file__)
    source = "".join(lines)
    expressions = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.expr)]
    assert len(expressions) > 500
    for node in expressions:
        assert check_rule.source_segment(lines, node) == ast.get_source_segment(source, node)
    label = "état"; accented = (label, lambda: label == "état")[1]  # noqa: E702
    several = [lambda: sorted(
        [label],
    )][0]
    assert check_rule.lambda_source(accented) == 'lambda: label == "état"'
    assert check_rule.lambda_source(several) == "lambda: sorted(\n        [label],\n    )"
