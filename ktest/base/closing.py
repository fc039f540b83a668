"""``with thing:`` for ktest's resources, written once: leaving the block closes the thing,
whatever happened inside; :class:`StartedOnEnter` also starts it on the way in."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, ClassVar

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


class StartedIfNew(Closing):
    """``with x:`` starts ``x`` unless it was started before, gives it and closes it at the end.
    When the block raised, an error of ``CLOSE_ERRORS_HIDDEN`` from closing is not raised over the
    exception in flight (which already fails the block)."""

    CLOSE_ERRORS_HIDDEN: ClassVar[tuple[type[Exception], ...]] = ()

    def start(self) -> Self:
        raise NotImplementedError

    def _is_new(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if self._is_new():
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if len(exc_info) < 2 or exc_info[1] is None:
            self.close()
            return
        with contextlib.suppress(*self.CLOSE_ERRORS_HIDDEN):
            self.close()
