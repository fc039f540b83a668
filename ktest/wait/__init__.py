"""Eventually/consistently assertions, watch-driven wake-up and partial matching.

``eventually(fn)`` re-evaluates ``fn`` until it passes, ``consistently(fn)`` requires
it to keep passing; both wake up as soon as an object the check read through a
``Cluster`` changes.  ``assert_matches``/``diff`` compare an object with an expected
subset.  ``ktest.wait.aio`` has the same two functions for ``async def`` tests.
"""

from __future__ import annotations

from ktest.wait import aio
from ktest.wait.defaults import WaitDefaults, current_defaults, use_defaults
from ktest.wait.match import ListKeys, assert_matches, diff
from ktest.wait.sync import consistently, eventually
from ktest.wait.tracking import ReadTarget, record_read, recording_reads
from ktest.wait.wakeup import close_hub

__all__ = [
    "ListKeys",
    "ReadTarget",
    "WaitDefaults",
    "aio",
    "assert_matches",
    "close_hub",
    "consistently",
    "current_defaults",
    "diff",
    "eventually",
    "record_read",
    "recording_reads",
    "use_defaults",
]
