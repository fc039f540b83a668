"""``ktest-toy``: a backend from another package, registered by one entry point and nothing else.

It runs ktest's embedded control plane under the name ``toy``, with a setting of its own
(``toy_banner``: ``--ktest-toy-banner``, ini ``ktest_toy_banner``, ``KTEST_TOY_BANNER``) that it
says in the session's notes, and a ``ktest`` verb of its own (``ktest toy``: the banner it
would use). ktest's tests install it with pip and run a pytest session on it
(tests/plugin_backend/test_out_of_tree_backend.py).
"""

from __future__ import annotations

from ktest.extension import BackendSpec

SPEC = BackendSpec(
    "toy",
    "ktest's embedded control plane, registered by the ktest-toy package",
    open="ktest_toy.backend:open_toy",
    check="ktest_toy.backend:check",
    cli="ktest_toy.cli:register",
    settings="ktest_toy.settings:ROWS",
    starts_control_plane=True,
    nodes="never",
)
