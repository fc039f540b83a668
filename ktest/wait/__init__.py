"""Eventually/consistently assertions, watch-driven wake-up and partial matching.

``eventually(fn)`` re-evaluates ``fn`` until it passes, ``consistently(fn)`` requires
it to keep passing; both wake up as soon as an object the check read through a
``Cluster`` changes.  ``assert_matches``/``diff`` compare an object with an expected
subset.  ``ktest.wait.aio`` has the same two functions for ``async def`` tests.

Names are imported on first use: the pytest plugin imports ``ktest.wait.defaults``
at session start, which must not pull in the kubernetes client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.cluster.reads import ReadTarget as ReadTarget
    from ktest.cluster.reads import record_read as record_read
    from ktest.cluster.reads import recording_reads as recording_reads
    from ktest.wait import aio as aio
    from ktest.wait.defaults import WaitDefaults as WaitDefaults
    from ktest.wait.defaults import current_defaults as current_defaults
    from ktest.wait.defaults import use_defaults as use_defaults
    from ktest.wait.match import ListKeys as ListKeys
    from ktest.wait.match import assert_matches as assert_matches
    from ktest.wait.match import diff as diff
    from ktest.wait.sync import consistently as consistently
    from ktest.wait.sync import eventually as eventually
    from ktest.wait.wakeup import close_hub as close_hub

_EXPORTS = {
    "ListKeys": "ktest.wait.match",
    "ReadTarget": "ktest.cluster.reads",
    "WaitDefaults": "ktest.wait.defaults",
    "assert_matches": "ktest.wait.match",
    "close_hub": "ktest.wait.wakeup",
    "consistently": "ktest.wait.sync",
    "current_defaults": "ktest.wait.defaults",
    "diff": "ktest.wait.match",
    "eventually": "ktest.wait.sync",
    "record_read": "ktest.cluster.reads",
    "recording_reads": "ktest.cluster.reads",
    "use_defaults": "ktest.wait.defaults",
}

__all__ = sorted([*_EXPORTS, "aio"])


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals(), submodules=("aio",))
