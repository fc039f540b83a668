"""The test's kopf settings win over the operator's own startup handlers.

A test sets kopf settings through ``run_kopf(configure=...)`` (ktest's webhook front server needs
``settings.admission.server = wh.kopf_server()``), and ktest sets one of its own (no
``ultimate_exiting_timeout``: the operator must never SIGKILL the test process). An operator
commonly sets the same settings in a ``@kopf.on.startup`` handler, which kopf runs later and which
would replace the test's choice with its production wiring.

So every setting assigned during ``configure`` (and ktest's own) is *pinned*: a later assignment
of that attribute (or of its whole group) is ignored and noted in the operator's log at WARNING,
naming the setting, the value wanted and the file and line that set it. Changes inside a value
(a mapping's items) are not guarded.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

_STATE = "_ktest_pins"
_logger = logging.getLogger("ktest.kopf.settings")
_guarded_classes: dict[type, type] = {}


@dataclasses.dataclass
class _Pins:
    """Which attributes of one settings object are pinned (by whom), and whether assignments are recorded."""

    path: str
    recording: str | None = None
    """While a step of the run's set-up runs: who sets (named in the note of an ignored change)."""
    pinned: dict[str, str] = dataclasses.field(default_factory=dict)


def _guarded_setattr(self: Any, name: str, value: Any) -> None:
    pins: _Pins | None = self.__dict__.get(_STATE)
    if pins is None or name.startswith("_"):
        _set(self, name, value)
        return
    if pins.recording:
        pins.pinned[name] = pins.recording
    elif name in pins.pinned:
        _note_ignored(f"{pins.path}.{name}", getattr(self, name, None), value, pins.pinned[name])
        return
    if pins.path == "settings" and dataclasses.is_dataclass(value) and not isinstance(value, type):
        _replace_group(self, name, value, pins.recording)
        return
    _set(self, name, value)


def _set(obj: Any, name: str, value: Any) -> None:
    """The assignment as the settings class itself does it (properties' setters included)."""
    super(type(obj), obj).__setattr__(name, value)


def _replace_group(settings: Any, name: str, group: Any, recording: str | None) -> None:
    """A whole group assigned (``settings.admission = kopf.AdmissionSettings(...)``). By the test:
    all its fields are pinned. By the operator: the test's pinned fields keep their values."""
    old = getattr(settings, name, None)
    old_pins: _Pins | None = getattr(old, "__dict__", {}).get(_STATE) if old is not None else None
    _guard(group, name)
    pins: _Pins = group.__dict__[_STATE]
    if recording:
        pins.pinned.update({field.name: recording for field in dataclasses.fields(group)})
    elif old_pins is not None:
        for field, origin in sorted(old_pins.pinned.items()):
            kept, wanted = getattr(old, field), getattr(group, field, None)
            if wanted is not kept:
                _note_ignored(f"{name}.{field}", kept, wanted, origin)
            _set(group, field, kept)
        pins.pinned.update(old_pins.pinned)
    pins.recording = recording
    _set(settings, name, group)


def _note_ignored(setting: str, kept: Any, wanted: Any, origin: str) -> None:
    _logger.warning(
        "ktest keeps settings.%s = %r as %s set it; the operator's assignment of %r at %s is ignored",
        setting,
        kept,
        origin,
        wanted,
        _caller(),
    )


def _caller() -> str:
    """The first frame outside this module and kopf: the operator's line that set it."""
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename == __file__ or "/kopf/" in frame.f_code.co_filename
    ):
        frame = frame.f_back  # type: ignore[assignment]
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "(unknown)"


def _guard(obj: Any, path: str) -> None:
    cls = type(obj)
    if _STATE in obj.__dict__:
        return
    guarded = _guarded_classes.get(cls)
    if guarded is None:
        guarded = _guarded_classes[cls] = type(
            cls.__name__, (cls,), {"__setattr__": _guarded_setattr, "__module__": cls.__module__}
        )
    object.__setattr__(obj, _STATE, _Pins(path))
    obj.__class__ = guarded


def _all_pins(settings: Any) -> Iterator[_Pins]:
    yield settings.__dict__[_STATE]
    for field in dataclasses.fields(settings):
        group = getattr(settings, field.name)
        pins = getattr(group, "__dict__", {}).get(_STATE)
        if pins is not None:
            yield pins


def configure_pinned(settings: Any, *steps: tuple[str, Callable[[Any], None] | None]) -> None:
    """Guard ``settings`` (a fresh ``kopf.OperatorSettings``) and its groups, and run each
    ``(origin, step)`` (the test's ``configure``, ktest's own) with pinning on: what they assign,
    the operator cannot change."""
    _guard(settings, "settings")
    for field in dataclasses.fields(settings):
        group = getattr(settings, field.name)
        if dataclasses.is_dataclass(group) and not isinstance(group, type):
            _guard(group, field.name)
    for origin, step in steps:
        if step is None:
            continue
        for pins in list(_all_pins(settings)):
            pins.recording = origin
        try:
            step(settings)
        finally:
            for pins in list(_all_pins(settings)):
                pins.recording = None
