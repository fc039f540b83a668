"""``with thing:`` for ktest's resources, written once: leaving the block closes the thing,
whatever happened inside; :class:`StartedOnEnter` also starts it on the way in."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self


class Closing:
    """``with x:`` gives ``x`` and calls ``x.close()`` at the end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class StartedOnEnter(Closing):
    """``with x:`` calls ``x.start()`` first, then gives ``x`` and closes it at the end."""

    def start(self) -> Self:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self
