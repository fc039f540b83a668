"""References to Kubernetes objects: (apiVersion, kind, name, namespace).

Every ktest helper accepts an object as returned by the API (a dict), an
:class:`ObjectRef`, or a plain tuple, so tests never have to convert.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ktest.errors import ManifestError


@dataclass(frozen=True)
class ObjectRef:
    """Identifies one object; ``namespace`` is None for cluster-scoped kinds."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference of an object dict (as returned by the API or a manifest)."""
        try:
            meta = obj["metadata"]
            return cls(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        except (KeyError, TypeError) as error:
            raise ManifestError(
                f"cannot tell which object this is: missing {error} in {_abbreviate(obj)}; "
                "an object needs apiVersion, kind and metadata.name"
            ) from None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.api_version})"


RefLike = ObjectRef | Mapping[str, Any] | tuple


def as_ref(target: RefLike, namespace: str | None = None) -> ObjectRef:
    """Turn a dict, an ObjectRef or a tuple ``(apiVersion, kind, name[, namespace])`` into a ref.

    ``namespace`` fills in a reference that has none (a manifest without
    ``metadata.namespace`` applied into a test namespace).
    """
    if isinstance(target, ObjectRef):
        ref = target
    elif isinstance(target, Mapping):
        ref = ObjectRef.of(target)
    elif isinstance(target, tuple) and len(target) in (3, 4):
        ref = ObjectRef(*target)
    else:
        raise TypeError(
            f"expected an object dict, an ObjectRef or (apiVersion, kind, name[, namespace]), "
            f"got {_abbreviate(target)}"
        )
    if ref.namespace is None and namespace is not None:
        ref = ObjectRef(ref.api_version, ref.kind, ref.name, namespace)
    return ref


def _abbreviate(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
