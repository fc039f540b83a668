"""Backend ``bare``'s registration: ktest's embedded control plane, its ``ktest up`` warm ones."""

from __future__ import annotations

from ktest.extension import BackendSpec

SPEC = BackendSpec(
    "bare",
    "an embedded control plane: etcd + kube-apiserver + kube-controller-manager; simulated nodes "
    "with ktest_nodes",
    open="ktest.backends.bare.backend:_open_bare",
    settings="ktest.backends.bare.settings:ROWS",
    describe="ktest.backends.bare.settings:describe",
    cli="ktest.backends.bare.cli:register",
    up="ktest.backends.bare.cli:up_bare",
    down="ktest.backends.bare.cli:down_bare",
    status="ktest.backends.bare.cli:status_bare",
    starts_control_plane=True,
    nodes="never",
)
