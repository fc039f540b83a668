"""One version of the operator, as the upgrade starts it: kopf handlers (a module or ``.py``
path), a Python callable, or a command (a binary, ``python -m ...``), through ktest's own runners
(``run_kopf``, ``run_callable``, ``run_subprocess``) and their options."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.errors import OperatorError

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.operators.operator import OperatorHandle

RUNNERS = ("kopf", "callable", "command")


@dataclass(frozen=True)
class OperatorVersion:
    """``runner`` (kopf, callable or command), what it runs, and the runner's keyword arguments
    for this version only (``env=``, ``ready_http=``, ``configure=``...)."""

    runner: str
    target: Any
    options: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise OperatorError(f"OperatorVersion: runner {self.runner!r} is none of {', '.join(RUNNERS)}")

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.runner == "callable":
            return f"callable {getattr(self.target, '__qualname__', self.target)!r}"
        if self.runner == "command":
            return "command " + " ".join(str(part) for part in self.target)[:120]
        return f"kopf {self.target}"

    def start(self, cluster: Cluster, options: Mapping[str, Any]) -> OperatorHandle:
        """Start this version with ``options`` (shared) under its own, and wait until it is ready;
        on failure nothing is left running (the runners' rule)."""
        merged: dict[str, Any] = {**options, **self.options}
        if self.runner == "kopf":
            from ktest.operators.kopf.runner import run_kopf

            return run_kopf(self.target, cluster, **merged)
        if self.runner == "callable":
            from ktest.operators.inprocess import run_callable

            return run_callable(self.target, cluster, **merged)
        from ktest.operators.process_runner import run_subprocess

        return run_subprocess(self.target, cluster, **merged)


VersionSpec = OperatorVersion | str | Path | Sequence[str] | Callable[..., Any]
"""What ``before=``/``after=`` take: an :class:`OperatorVersion`; a kopf module name or ``.py``
path; a command (a list of strings: a binary and its arguments); a callable (``main(ctx)``)."""


def kopf_version(modules_or_paths: Any, *, label: str | None = None, **options: Any) -> OperatorVersion:
    """kopf handlers (as ``run_kopf`` takes them) with options of this version only."""
    return OperatorVersion("kopf", modules_or_paths, options, label)


def callable_version(fn: Callable[..., Any], *, label: str | None = None, **options: Any) -> OperatorVersion:
    """``fn(ctx)`` (as ``run_callable`` takes it) with options of this version only."""
    return OperatorVersion("callable", fn, options, label)


def command_version(
    cmd: Sequence[str | Path], *, label: str | None = None, **options: Any
) -> OperatorVersion:
    """A command (as ``run_subprocess`` takes it: a Go manager binary and its arguments) with
    options of this version only (``env=``, ``ready_http=``)."""
    return OperatorVersion("command", list(cmd), options, label)


def as_version(spec: VersionSpec, which: str) -> OperatorVersion:
    """``spec`` as an :class:`OperatorVersion`; ``which`` (before, after) names it in errors."""
    if isinstance(spec, OperatorVersion):
        return spec
    if isinstance(spec, (str, Path)):
        return OperatorVersion("kopf", spec)
    if isinstance(spec, Sequence) and spec and all(isinstance(part, (str, Path)) for part in spec):
        return OperatorVersion("command", list(spec))
    if callable(spec):
        return OperatorVersion("callable", spec)
    raise OperatorError(
        f"operator_upgrade: {which}={spec!r:.100} is no operator version; give a kopf module or .py "
        "path (a string), a command (a list of strings), a callable main(ctx), or kopf_version(...), "
        "command_version(...), callable_version(...) for options of that version only"
    )
