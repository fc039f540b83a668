"""Failure timelines: what happened during a test, in order, on one page.

Plain Python::

    from ktest import timeline

    with timeline.recording(cluster, test="my scenario") as rec:
        ...  # start operators, create objects, eventually(...)
    rec.write("timeline.html")

The pytest plugin records every test and writes the page of each failing one (setting
``ktest_timeline``: off, on-failure, always). See :mod:`ktest.timeline.rendering` for the page and
:mod:`ktest.timeline.model` for the data it embeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.timeline.model import SCHEMA as SCHEMA
    from ktest.timeline.model import Event as Event
    from ktest.timeline.model import TimelineData as TimelineData
    from ktest.timeline.recorder import Recorder as Recorder
    from ktest.timeline.recorder import recording as recording
    from ktest.timeline.rendering import render as render
    from ktest.timeline.rendering import write_page as write_page

_NAMES_BY_MODULE = {
    "model": ("SCHEMA", "Event", "TimelineData"),
    "recorder": ("Recorder", "recording"),
    "rendering": ("render", "write_page"),
}
_EXPORTS = {name: f"ktest.timeline.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names}
"""Imported on first use: the pytest plugin loads this add-on's plugin module without its machinery."""

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
