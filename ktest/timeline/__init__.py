"""Failure timelines: what happened during a test, in order, on one page.

Plain Python::

    from ktest import timeline

    with timeline.recording(cluster, test="my scenario") as rec:
        ...  # start operators, create objects, eventually(...)
    rec.write("timeline.html")

The pytest plugin records every test and writes the page of each failing one (setting
``ktest_timeline``: off, on-failure, always). See :mod:`ktest.timeline.render` for the page and
:mod:`ktest.timeline.model` for the data it embeds.
"""

from __future__ import annotations

from ktest.timeline.model import SCHEMA, Event, TimelineData
from ktest.timeline.recorder import Recorder, recording
from ktest.timeline.render import render, write_page

__all__ = ["SCHEMA", "Event", "Recorder", "TimelineData", "recording", "render", "write_page"]
