"""Where the session's cluster comes from: ``bare``, ``kind``, ``existing``, or a warm ``ktest up`` (reuse).

``open_session(settings)`` is what the pytest plugin calls, and what plain
Python can call too::

    from ktest.backends import open_session
    from ktest.config import settings_from_env

    with open_session(settings_from_env()) as backend:
        backend.cluster.apply(...)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktest.backends.base import Backend
    from ktest.config import Settings

__all__ = ["open_backend", "open_session"]


def open_backend(settings: Settings, notes: list[str] | None = None) -> Backend:
    """The backend ``settings`` ask for; ``notes`` collects what the user should be told."""
    notes = [] if notes is None else notes
    if settings.backend == "existing":
        from ktest.backends.existing import ExistingBackend

        assert settings.kubeconfig is not None and settings.context is not None  # checked by config
        return ExistingBackend(settings.kubeconfig, settings.context, run_dir=settings.run_dir)
    if settings.backend == "kind":
        from ktest.backends.kind import KindBackend, find_kept

        if settings.reuse:
            kept = find_kept(settings, notes)
            if kept is not None:
                return kept
            notes.append("reuse: no kept kind cluster matches; created one for this session "
                         "(`ktest up --backend kind` keeps one warm between runs)")
        return KindBackend.start(settings)
    if settings.reuse:
        from ktest.backends import reuse

        record, removed = reuse.find_compatible(settings)
        notes.extend(removed)
        if record is not None:
            return reuse.attach(record)
        notes.append(
            "reuse: no running control plane matches "
            f"(Kubernetes {settings.k8s_version or 'latest'}, controllers "
            f"{','.join(settings.controllers) or 'none'}); started one for this session. "
            "`ktest up` keeps one warm between runs"
        )
    from ktest.backends.bare import BareBackend

    return BareBackend.start(settings)


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
