"""What the tests of several modules saw on one shared start (tests/controlplane/startup_planes.py,
tests/hardening/hardening_starts.py): each module lists functions to call while the plane runs; a
test gets its function's result, or what it raised, once the plane has stopped."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest


def function_key(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def listed(session: pytest.Session, listing: str) -> list[Callable[..., Any]]:
    """The functions listed under ``listing`` by the modules of the session's tests."""
    modules = dict.fromkeys(getattr(item, "module", None) for item in session.items)
    return [function for module in modules for function in getattr(module, listing, ())]


@dataclasses.dataclass(kw_only=True)
class Observations:
    """What each listed function returned (or raised) while the shared plane ran."""

    listing: str  # the module attribute that lists the functions (its name in error messages)
    results: dict[str, Any] = dataclasses.field(default_factory=dict)
    errors: dict[str, BaseException] = dataclasses.field(default_factory=dict)

    def observe(self, session: pytest.Session, *args: Any) -> None:
        """Call every function the session's modules list, with ``args``; keep what each gave."""
        for function in listed(session, self.listing):
            try:
                self.results[function_key(function)] = function(*args)
            except (Exception, pytest.fail.Exception) as error:  # for the test that asks for it
                self.errors[function_key(function)] = error

    def result(self, function: Callable[..., Any]) -> Any:
        """What ``function`` returned while the plane ran; raises what it raised."""
        key = function_key(function)
        if key in self.errors:
            raise self.errors[key]
        if key not in self.results:
            raise LookupError(f"{key} is not in its module's {self.listing} tuple: it was not called")
        return self.results[key]
