"""Backend ``kind``'s registration: a kind cluster, real nodes in Docker."""

from __future__ import annotations

from ktest.extension import BackendSpec

SPEC = BackendSpec(
    "kind",
    "a kind cluster: real nodes in Docker",
    open="ktest.backends.kind.backend:open_kind",
    preflight="ktest.backends.kind.backend:preflight",
    fixtures="ktest.backends.kind.fixtures:register",
    attach="ktest.backends.kind.backend:attach",
    health="ktest.backends.kind.fixtures:watch_nodes",
    diagnostics="ktest.backends.kind.backend:diagnostics",
    cli="ktest.backends.kind.cli:register",
    up="ktest.backends.kind.cli:up_from_args",
    down="ktest.backends.kind.cli:down_from_args",
    status="ktest.backends.kind.cli:status_lines",
    versions="ktest.backends.kind.node_images:versions",
    settings="ktest.backends.kind.settings:ROWS",
    describe="ktest.backends.kind.settings:describe",
    on_death="ktest.backends.kind.on_death:command",
    ci_steps="ktest.backends.kind.ci:ci_steps",
    foreign_options="ktest.backends.kind.settings:PYTEST_KIND_OPTIONS",
    nodes="always",
)
