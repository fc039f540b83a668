"""Where the session's cluster comes from: ``bare``, ``kind``, ``existing``, or a warm ``ktest up`` (reuse).

``open_session(settings)`` is what the pytest plugin calls, and what plain
Python can call too::

    from ktest.backends import open_session
    from ktest.config import settings_from_env

    with open_session(settings_from_env()) as backend:
        backend.cluster.apply(...)

Each backend's package registers it in its ``registration`` module, made with ``ktest.extension``
as another package's backend is: ``ktest.backend_registry`` reads its ``SPEC`` as it reads an
entry point (its parts are imported only when needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktest.config import Settings
    from ktest.sessions.backend import Backend

__all__ = ["open_backend", "open_session"]


def open_backend(settings: Settings, notes: list[str] | None = None) -> Backend:
    """The backend ``settings`` ask for (see ``ktest.backend_registry``); ``notes`` collects what
    the user should be told."""
    from ktest.backend_registry import spec

    opener = spec(settings.backend).load("open")
    assert opener is not None
    backend: Backend = opener(settings, [] if notes is None else notes)
    return backend


def open_session(settings: Settings, notes: list[str] | None = None) -> Backend:
    """:func:`open_backend`, then install the session's CRDs (closing the backend if that fails)."""
    backend = open_backend(settings, notes)
    if settings.crds:
        try:
            backend.cluster.install_crds(*settings.crds, timeout=settings.crd_timeout)
        except BaseException:
            backend.close()
            raise
    return backend
