"""References to Kubernetes objects: (apiVersion, kind, name, namespace).

Every ktest helper accepts an object as returned by the API (a dict), an
:class:`ObjectRef`, or a plain tuple, so tests never have to convert. A kind
(for lists, discovery, watches) is the tuple's first half: ``(apiVersion, kind)``.
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
KindRef = tuple[str, str]
"""A kind, as ``(apiVersion, kind)``: ``("v1", "ConfigMap")``, ``("apps/v1", "Deployment")``."""


def as_kind(api_version: str | KindRef, kind: str | None = None) -> KindRef:
    """``(apiVersion, kind)`` from that tuple, or from the two strings given apart.

    Methods that name a kind (``Cluster.list``, ``info``, ``resource``) take either form,
    as ``Cluster.get`` takes ``(apiVersion, kind, name[, namespace])``.
    """
    if isinstance(api_version, tuple):
        if kind is not None or len(api_version) != 2 or not all(isinstance(x, str) for x in api_version):
            raise TypeError(
                f"expected a kind as (apiVersion, kind), e.g. ('apps/v1', 'Deployment'), got "
                f"{_abbreviate(api_version)}{f' and {kind!r}' if kind is not None else ''}"
            )
        return api_version[0], api_version[1]
    if isinstance(api_version, str) and isinstance(kind, str):
        return api_version, kind
    raise TypeError(
        f"expected a kind as (apiVersion, kind) or as two strings, got {_abbreviate(api_version)}"
        f"{f' and {kind!r}' if kind is not None else ' without a kind'}"
    )


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
