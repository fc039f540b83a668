"""Backend ``kind``: everything that makes kind one of ktest's backends, behind its registration.

``backend`` (open, preflight, attach for xdist workers, diagnostics: ``kind export logs``
of a failed run), ``fixtures`` (``kind``, pytest-kind's ``kind_cluster`` from
``pytest_kind_compat``, the "cluster stopped" health check), ``cli`` (``ktest up/down/status``
and ``ktest kind ...``). The Docker- and kind-level machinery it drives is ``ktest.kind``.
The plugin and the CLI reach all of it through ``ktest.backend_registry`` only.
"""
