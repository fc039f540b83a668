"""Backend ``kind``: all of kind, behind its one registration (``registration``: its ``BackendSpec``).

Its registry parts: ``backend`` (open, preflight, attach for xdist workers, diagnostics:
``kind export logs`` of a failed run), ``fixtures`` (``kind``, pytest-kind's ``kind_cluster``
from ``pytest_kind_compat``, the "cluster stopped" health check), ``cli`` (``ktest up/down/status``
and ``ktest kind ...``), ``settings`` (its rows ``kind_config``, ``kind_image``, ``keep_cluster``,
``kind_pool``, and pytest-kind's options it takes), ``ci`` (its steps of ``ktest init
github-actions``), ``on_death`` (the janitor's rule: delete a dead holder's cluster).
The machinery they drive: ``engine`` (the Docker engine), ``binary`` (the kind binary),
``recipe`` (what node images are made of), ``node_choice``/``image_sources``/``node_images``
(which node image), ``cluster``/``handle``/``kubectl``/``load``/``network`` (a cluster and
what tests do with it), ``records``/``sweep``/``pool`` (ktest's clusters on this machine: their
records, the sweep of orphans, the warm pool), ``cache``, ``kubeadm_patches``.
The plugin and the CLI reach all of it through ``ktest.backend_registry`` only.
"""
