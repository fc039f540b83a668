"""``Delegated``: an attribute read through another attribute of the same object.

For classes that show a few fields of an object they hold (``call.verb`` is
``call.request.verb``), one line per field instead of a ``@property`` each.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Delegated(Generic[T]):
    """A read-only attribute: ``verb = Delegated[str]("request")`` reads ``self.request.verb``.

    ``attribute`` names the attribute read when it differs from the one defined.
    """

    def __init__(self, through: str, attribute: str | None = None) -> None:
        self.through = through
        self.attribute = attribute or ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = self.attribute or name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Delegated[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(getattr(instance, self.through), self.attribute)

    def __set__(self, instance: object, value: T) -> None:
        raise AttributeError(f"{self.attribute} is read from {self.through}.{self.attribute}; set it there")
