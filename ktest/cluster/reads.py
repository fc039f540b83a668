"""Which objects a check read: the targets watch-driven wake-up listens to.

``Cluster`` calls :func:`record_read` for every get/list/exists; ``eventually``/``consistently``
install a :class:`ReadRecorder` in a ContextVar while a check runs, so reads of other tests,
threads or tasks never mix in, and nothing is recorded outside a check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ktest.errors import ConfigError


@dataclass(frozen=True)
class ReadTarget:
    """Objects of one kind: one object when ``name`` is set, a whole namespace (or,
    with ``namespace=None``, the whole cluster) when it is not."""

    api_version: str
    kind: str
    namespace: str | None = None
    name: str | None = None

    def overlaps(self, api_version: str, kind: str, namespace: str | None, name: str | None) -> bool:
        """Whether a change to (namespace, name) of that kind may change what was read.

        ``None`` on either side stands for "any" (a list, a cluster-scoped object or a
        resync of a whole watch).
        """
        return (
            self.api_version == api_version
            and self.kind == kind
            and (self.namespace is None or namespace is None or self.namespace == namespace)
            and (self.name is None or name is None or self.name == name)
        )

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.api_version} {self.kind} {where}{self.name or '*'}"


class ReadRecorder:
    """Collects (cluster, target) pairs; reads also go to the enclosing recorder, so a
    check nested in another check wakes both."""

    def __init__(self, parent: ReadRecorder | None = None) -> None:
        self._parent = parent
        self._targets: dict[int, tuple[Any, set[ReadTarget]]] = {}  # by id(cluster)

    def add(self, cluster: Any, target: ReadTarget) -> None:
        self._targets.setdefault(id(cluster), (cluster, set()))[1].add(target)
        if self._parent is not None:
            self._parent.add(cluster, target)

    def by_cluster(self) -> list[tuple[Any, frozenset[ReadTarget]]]:
        """The recorded targets grouped by the cluster they were read from."""
        return [(cluster, frozenset(targets)) for cluster, targets in self._targets.values()]

    def __bool__(self) -> bool:
        return bool(self._targets)


_recorder: ContextVar[ReadRecorder | None] = ContextVar("ktest_wait_read_recorder", default=None)


def record_read(cluster: Any, api_version: str, kind: str, namespace: str | None, name: str | None) -> None:
    """Note that ``cluster`` read ``kind`` objects (one by ``name``, or a list).

    Cheap and a no-op outside ``eventually``/``consistently``; safe from any thread.
    """
    recorder = _recorder.get()
    if recorder is not None:
        recorder.add(cluster, ReadTarget(api_version, kind, namespace or None, name or None))


@contextmanager
def recording_reads() -> Iterator[ReadRecorder]:
    """Record the reads made in this context (sync code or the current asyncio task)."""
    recorder = ReadRecorder(parent=_recorder.get())
    token = _recorder.set(recorder)
    try:
        yield recorder
    finally:
        _recorder.reset(token)


def target_of(obj: Any) -> ReadTarget:
    """The watch target for ``watch=`` items: an object dict (or a client object with
    ``to_dict()``), an ``ObjectRef``-like object with ``api_version``/``kind``/``name``/
    ``namespace`` attributes, or a tuple ``(api_version, kind, name[, namespace])``.
    A dict or ref without a name stands for every object of that kind in the namespace.
    """
    if not isinstance(obj, Mapping) and callable(getattr(obj, "to_dict", None)):
        obj = obj.to_dict()
    if isinstance(obj, Mapping):
        metadata = obj.get("metadata") or {}
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        namespace, name = metadata.get("namespace"), metadata.get("name")
    elif isinstance(obj, tuple) and len(obj) in (3, 4):
        api_version, kind, name = obj[0], obj[1], obj[2]
        namespace = obj[3] if len(obj) == 4 else None
    elif hasattr(obj, "kind") and hasattr(obj, "api_version"):
        api_version, kind = obj.api_version, obj.kind
        name, namespace = getattr(obj, "name", None), getattr(obj, "namespace", None)
    else:
        raise ConfigError(
            f"cannot watch {obj!r}: watch= items must be object dicts with apiVersion and "
            "kind, ObjectRef-like objects, or (api_version, kind, name[, namespace]) tuples"
        )
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        raise ConfigError(
            f"cannot watch {obj!r}: it has no apiVersion/kind (got apiVersion={api_version!r}, "
            f"kind={kind!r}); pass the object as returned by the cluster or an ObjectRef"
        )
    return ReadTarget(api_version, kind, namespace or None, name or None)
