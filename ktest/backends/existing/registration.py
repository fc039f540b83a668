"""Backend ``existing``'s registration: a cluster the user runs, by kubeconfig and context.

ktest registers its own backends through the door other packages use (``ktest.extension``):
``ktest.backend_registry`` reads this ``SPEC`` as it reads an entry point of the group
``ktest.backends``. Each part is named by ``"module:attribute"`` and imported only when needed,
so registering imports nothing heavy.
"""

from __future__ import annotations

from ktest.extension import BackendSpec

SPEC = BackendSpec(
    "existing",
    "a cluster you already run, by kubeconfig and an explicitly named context",
    open="ktest.backends.existing.backend:open_existing",
    check="ktest.backends.existing.backend:check_settings",
    preflight="ktest.backends.existing.backend:preflight",
    cli="ktest.backends.existing.cli:register",
    down="ktest.backends.existing.cli:down_from_args",
    creates_cluster=False,
)
