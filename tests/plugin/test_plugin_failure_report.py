"""What a user reads when a test fails (issue 49), read from the report of a real child session:
the values a comparison compared (sync and async, ``eventually`` and ``consistently``), an
in-process operator's log once, and its API calls with the writes first."""

from __future__ import annotations

import re

import pytest
from inner_runs import run_inner

GREETER = '''
import kopf

@kopf.on.create("configmaps", labels={"greet": "yes"})
def greet(body, patch, **_):
    patch.setdefault("data", {})["greeting"] = f"hello, {body['data']['who']}"
'''

FAILING = '''
import pytest
import ktest
from ktest.operators import run_kopf
from ktest.wait import aio

def test_greeter(cluster, namespace):
    with run_kopf("greeter", cluster, namespaces=[namespace]):
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "data": {"who": "world"},
                       "metadata": {"name": "hi", "labels": {"greet": "yes"}}}, namespace=namespace)
        ktest.eventually(lambda: cluster.get(("v1", "ConfigMap", "hi", namespace))["data"]["greeting"]
                         == "hello, World", timeout=3)

def settings(cluster, namespace):
    return cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                           "data": {"mode": "fast", "size": "3"}}, namespace=namespace)

def test_sync_consistently(cluster, namespace):
    created = settings(cluster, namespace)
    ktest.consistently(lambda: cluster.get(created)["data"] == {"mode": "fast", "size": "4"}, duration=1)

@pytest.mark.asyncio
async def test_async_eventually(cluster, namespace):
    created = settings(cluster, namespace)
    await aio.eventually(lambda: cluster.get(created)["data"] == {"mode": "slow", "size": "3"}, timeout=1)

@pytest.mark.asyncio
async def test_async_consistently(cluster, namespace):
    created = settings(cluster, namespace)

    async def mode():
        return cluster.get(created)["data"]["mode"]

    async def still_fast():
        return await mode() == "fase"

    await aio.consistently(still_fast, duration=1)
'''


_REPORT: list[str] = []  # the child session runs once for all the tests of this module


@pytest.fixture
def report(pytester: pytest.Pytester, existing_args: list[str]) -> str:
    if not _REPORT:
        pytester.makepyfile(greeter=GREETER)
        result = run_inner(pytester, FAILING, *existing_args)
        result.assert_outcomes(failed=4)
        _REPORT.append("\n".join(result.outlines))
    return _REPORT[0]


def section(report: str, title: str) -> list[str]:
    """The lines of the report section headed ``title`` (up to the next ``---`` header)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^-+ {re.escape(title)} -+$", line))
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^[-=_]{3,} .* [-=_]{3,}$", lines[i])),
               len(lines))
    return lines[start + 1:end]


def failure_of(report: str, test: str) -> str:
    """The ``E`` lines of test ``test``'s failure, without the ``E`` column."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^_+ {test} _+$", line))
    block = []
    for line in lines[start + 1:]:
        if re.match(r"^_+ test_\w+ _+$", line):
            break
        if line.startswith("E "):
            block.append(line[2:].strip())
    return "\n".join(block)


def test_the_greeter_failure_names_both_greetings_with_a_character_diff(report: str) -> None:
    failure = failure_of(report, "test_greeter")
    assert ('where cluster.get(("v1", "ConfigMap", "hi", namespace))["data"]["greeting"] = '
            "'hello, world'") in failure
    assert "'hello, world' == 'hello, World'" in failure
    assert "- hello, World\n?        ^\n+ hello, world\n?        ^" in failure


def test_sync_consistently_shows_the_differing_keys(report: str) -> None:
    failure = failure_of(report, "test_sync_consistently")
    assert "consistently(lambda: cluster.get(created)[\"data\"] == {" in failure
    assert "where cluster.get(created)[\"data\"] = {'mode': 'fast', 'size': '3'}" in failure
    assert "Differing items:\n{'size': '3'} != {'size': '4'}" in failure


def test_async_eventually_shows_the_differing_keys(report: str) -> None:
    failure = failure_of(report, "test_async_eventually")
    assert "Differing items:\n{'mode': 'fast'} != {'mode': 'slow'}" in failure


def test_async_consistently_shows_both_strings(report: str) -> None:
    failure = failure_of(report, "test_async_consistently")
    assert "where await mode() = 'fast'" in failure
    assert "- fase\n?    ^\n+ fast\n?    ^" in failure


def test_each_line_of_the_operator_log_is_in_the_report_once(report: str) -> None:
    logged = [line for line in section(report, "ktest: operator greeter log") if line.strip()]
    assert len(logged) >= 5, logged
    for line in logged:
        message = line.split(": ", 1)[1].split("] ", 1)[-1]  # after the logger (and kopf's object)
        assert report.count(message) == 1, f"{message!r} is in the report {report.count(message)} times"
    assert "Captured log call" not in report.split("_ test_sync_consistently _")[0]


def test_the_api_calls_section_shows_the_patches_first(report: str) -> None:
    calls = section(report, "ktest: operator greeter API calls")
    assert sum(" patch configmaps " in line for line in calls[:5]) == 2, "\n".join(calls[:8])
    discovery = [line for line in calls if line.startswith("start-up discovery: ")]
    assert len(discovery) == 1 and re.match(r"start-up discovery: \d{2} GETs", discovery[0]), discovery
    listed = [line for line in calls if re.search(r" get /apis?(/|\s)", line)]
    assert not listed, "discovery GETs listed one by one"
