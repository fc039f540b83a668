"""The operator's storage client: no kopf here, so the test and the operator share this module."""

from __future__ import annotations


class StorageDown(Exception):
    """What the storage raises while it is down; the test catches the same class."""


stored: list[str] = []
down = False


def store(name: str) -> None:
    if down:
        raise StorageDown(f"cannot store {name}: the storage is down")
    stored.append(name)
