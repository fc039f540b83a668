"""Attributes read through another attribute of the same object, one line each instead of
a ``@property`` each: ``Delegated`` for the fields of an object held (``call.verb`` is
``call.request.verb``), ``PathBelow`` for fixed paths below a root directory
(``locations.k8s_dir`` is ``locations.cache_root / "k8s"``).
"""

from __future__ import annotations

from pathlib import Path
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


class PathBelow:
    """A read-only path: ``k8s_dir = PathBelow("cache_root", "k8s")`` is ``self.cache_root / "k8s"``."""

    def __init__(self, root: str, *parts: str) -> None:
        self.root = root
        self.parts = parts

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> PathBelow: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Path: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return Path(getattr(instance, self.root), *self.parts)
