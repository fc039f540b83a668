"""What every operator runner takes: the keyword arguments (declared once, as TypedDicts the
runners unpack), their defaults, and the check of ``namespaces``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ktest.errors import OperatorError

DEFAULT_READY_TIMEOUT = 60.0
DEFAULT_STOP_TIMEOUT = 10.0


class OperatorOptions(TypedDict, total=False):
    """The keyword arguments every runner (``run_callable``, ``run_kopf``, ``run_subprocess``)
    takes, declared once.

    ``name``: the operator's name in logs, reports and field managers. ``namespaces``
    (names or globs) / ``cluster_wide``: what it serves (see :class:`OperatorHandle`).
    ``wait``: return once it is ready (default True). ``ready_timeout`` / ``stop_timeout``:
    seconds. ``fail_on_forbidden``: an RBAC refusal in its output fails the test.
    ``log_dir``: where its log file goes. ``proxy``: run it behind ktest's API proxy
    (default: the ``ktest_operator_proxy`` setting, on): ``op.traffic``, ``op.faults``.
    """

    name: str | None
    namespaces: Sequence[str] | None
    cluster_wide: bool
    wait: bool
    ready_timeout: float
    stop_timeout: float
    fail_on_forbidden: bool
    log_dir: Path | str | None
    proxy: bool | None


class InProcessOptions(OperatorOptions, total=False):
    """What the in-process runners (``run_callable``, ``run_kopf``) take beside
    :class:`OperatorOptions`: ``fail_on_errors`` (an ERROR log record fails the test; for kopf,
    a handler's ``kopf.TemporaryError`` retries fail it only when they do not end in success,
    see :func:`~ktest.operators.kopf.runner.run_kopf`) and ``log_level`` (the lowest level
    written to its log)."""

    fail_on_errors: bool
    log_level: int


class KopfOptions(InProcessOptions, total=False):
    """What ``run_kopf`` takes beside :class:`~ktest.operators.options.InProcessOptions` (see
    :func:`~ktest.operators.kopf.runner.run_kopf`)."""

    configure: Callable[[Any], None] | None
    memo: dict[str, Any] | None
    liveness: bool
    tolerated_retries: int
    settle_timeout: float
    peering: str | None
    priority: int


def checked_replicas(runner: str, replicas: object) -> int:
    """``replicas`` as a count of at least 1; anything else is a ``ValueError`` naming it."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(
            f"{runner}: replicas={replicas!r} must be a whole number of at least 1: how many instances "
            "of the operator to run side by side (1, the default, runs one as before)."
        )
    return replicas


def checked_namespaces(
    runner: str, namespaces: Sequence[str] | None, cluster_wide: bool
) -> list[str] | None:
    """``namespaces`` as a list of names or globs, or None (cluster-wide); a wrong one is an OperatorError."""
    if namespaces is None:
        return None
    if isinstance(namespaces, str):
        raise OperatorError(f"{runner}: namespaces must be a list such as [{namespaces!r}], not a string.")
    if cluster_wide:
        raise OperatorError(
            f"{runner}: pass either namespaces=[...] or cluster_wide=True, not both "
            "(an operator serves some namespaces or all of them)."
        )
    if not namespaces:
        raise OperatorError(
            f"{runner}: namespaces=[] serves nothing; pass names or globs, or cluster_wide=True."
        )
    return [str(namespace) for namespace in namespaces]
