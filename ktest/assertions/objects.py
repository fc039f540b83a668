"""What every assertion needs: name an object in a message, read it, fetch a field.

Failure messages follow one shape, built by :func:`failure`: a headline naming
the object by kind and name, its full identity (namespace/name, apiVersion, uid)
on an ``Object:`` line, the Kubernetes rule that was broken, then what was observed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.wait.defaults import check_seconds, current_defaults

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster


def describe(target: RefLike, uid: str | None = None) -> str:
    """``Widget ns/name (example.com/v1, uid 1234...)``: how messages name an object."""
    ref = as_ref(target)
    if uid is None and isinstance(target, Mapping):
        uid = uid_of(target)
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return f"{ref.kind} {where} ({ref.api_version}{f', uid {uid}' if uid else ''})"


_IDENTITY = re.compile(
    r"(?P<kind>[A-Z][A-Za-z0-9]*) (?:(?P<namespace>[a-z0-9][-a-z0-9.]*)/)?(?P<name>[^\s/()]+) "
    r"\((?P<api>[A-Za-z0-9.-]+/)?(?P<version>v[0-9][a-z0-9]*)(?:, uid [0-9a-f-]+)?\)"
)


def failure(headline: str, rule: str, observed: str | Iterable[str]) -> str:
    """The text of an assertion failure: what is wrong, the rule broken, what was seen.

    Objects named in the headline (as :func:`describe` names them) are shortened to
    kind and name, so the headline shows what is wrong rather than a generated namespace
    and a uid; their full identity follows on ``Object:`` lines.
    """
    lines = [observed] if isinstance(observed, str) else list(observed)
    body = "\n".join(f"  {line}" for text in lines for line in str(text).splitlines())
    objects: list[str] = []

    def shorten(match: re.Match[str]) -> str:
        if match.group(0) not in objects:
            objects.append(match.group(0))
        return f"{match.group('kind')} {match.group('name')}"

    first, _, rest = headline.partition("\n")
    short = _IDENTITY.sub(shorten, first)
    identities = "".join(f"\nObject: {identity}" for identity in objects)
    return f"{short}{identities}{chr(10) + rest if rest else ''}\nRule: {rule}\nObserved:\n{body}"


def read_existing(cluster: Cluster, target: RefLike, *, purpose: str) -> dict[str, Any]:
    """The object's current state; an AssertionError naming ``purpose`` if it does not exist."""
    current = cluster.get_or_none(target)
    if current is None:
        raise AssertionError(f"{describe(target)} does not exist, so cannot {purpose}")
    return current


def uid_of(obj: Mapping[str, Any] | None) -> str | None:
    return field(obj, "metadata.uid")


def field(obj: Mapping[str, Any] | None, path: str, default: Any = None) -> Any:
    """The value at a dotted path such as ``status.observedGeneration`` (``default`` if absent)."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return default
        current = current[part]
    return current


def crd_of(cluster: Cluster, ref: ObjectRef) -> dict[str, Any] | None:
    """The CustomResourceDefinition of ``ref``'s kind, or None (a built-in kind, or none found)."""
    if not ref.group:
        return None
    name = f"{cluster.info(ref.api_version, ref.kind).plural}.{ref.group}"
    return cluster.get_or_none(("apiextensions.k8s.io/v1", "CustomResourceDefinition", name))


def finalizers_of(obj: Mapping[str, Any] | None) -> list[str]:
    return list(field(obj, "metadata.finalizers") or [])


def seconds(name: str, value: float | None, default: float) -> float:
    """``value`` checked (ConfigError if invalid), or ``default`` when None."""
    return default if value is None else check_seconds(name, value, allow_zero=True)


def timeout_or_default(timeout: float | None) -> float:
    return seconds("timeout", timeout, current_defaults().timeout)


def duration_or_default(duration: float | None, name: str = "duration") -> float:
    return seconds(name, duration, current_defaults().duration)


class Clock:
    """Seconds since an assertion started, for "after 0.42s" in messages."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __str__(self) -> str:
        return f"{self.elapsed():.2f}s"
