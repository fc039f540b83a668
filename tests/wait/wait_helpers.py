"""Small helpers shared by the wait tests (``tests/wait`` is on ``sys.path``)."""

from __future__ import annotations


class Counter:
    """Counts calls of ``tick()``: a check whose attempts a test can count."""

    def __init__(self) -> None:
        self.calls = 0

    def tick(self) -> int:
        self.calls += 1
        return self.calls
