"""Where a session's cluster can come from: every backend, registered once.

A backend is one module plus an entry here (or, from another package, an entry point
in the group ``ktest.backends`` naming a :class:`BackendSpec`). The spec names its
parts as ``"module:attribute"`` strings, imported only when that backend is used, so
this registry imports nothing and every layer may read it:

* ``open(settings, notes) -> Backend`` starts or attaches to the cluster;
* ``check(settings, env) -> Settings``: the backend's own settings rules (run when
  settings are resolved, so a bad one is an error before any test starts);
* ``preflight(settings)``: checks that read files, once, before the cluster starts;
* ``fixtures(config)``: pytest fixtures only this backend offers (kind's ``kind_cluster``);
* ``up(args, k8s_version) -> int``: ``ktest up --backend NAME`` (keep one warm between runs).

Nothing outside this module compares a backend's name: code asks the spec
(``starts_control_plane``, ``nodes``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, what it offers, and where its parts live."""

    name: str
    summary: str
    open: str
    check: str | None = None
    preflight: str | None = None
    fixtures: str | None = None
    up: str | None = None
    starts_control_plane: bool = False
    """ktest starts the API server itself, so extra API server flags and feature gates apply."""
    nodes: Literal["always", "never", "ask"] = "ask"
    """Whether the cluster has real nodes (``ktest_nodes`` tests): always, never, or ask it."""
    creates_cluster: bool = True
    """It makes the cluster it tests against (so a CI matrix cell can use it); False: it takes
    one the user names by kubeconfig context."""

    def load(self, part: str) -> Callable[..., Any] | None:
        """The callable ``part`` (``open``, ``check``, ``preflight``, ``fixtures``) names, or None."""
        target = getattr(self, part)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        loaded: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return loaded


BUILT_IN: tuple[BackendSpec, ...] = (
    BackendSpec(
        "bare",
        "an embedded control plane: etcd + kube-apiserver + kube-controller-manager, no nodes",
        open="ktest.backends.bare:open_bare",
        up="ktest.cli.up:up_bare",
        starts_control_plane=True,
        nodes="never",
    ),
    BackendSpec(
        "kind",
        "a kind cluster: real nodes in Docker",
        open="ktest.backends.kind:open_kind",
        preflight="ktest.backends.kind:preflight",
        fixtures="ktest.plugin.kind_fixtures:register_for_backend",
        up="ktest.cli.kind_clusters:up_from_args",
        nodes="always",
    ),
    BackendSpec(
        "existing",
        "a cluster you already run, by kubeconfig and an explicitly named context",
        open="ktest.backends.existing:open_existing",
        check="ktest.backends.existing:check_settings",
        preflight="ktest.backends.existing:preflight",
        creates_cluster=False,
    ),
)


@cache
def backends() -> dict[str, BackendSpec]:
    """Every backend by name: the built-in ones, then those of installed packages."""
    found = {spec.name: spec for spec in BUILT_IN}
    from importlib.metadata import entry_points

    for entry in entry_points(group="ktest.backends"):
        spec = entry.load()
        if isinstance(spec, BackendSpec) and spec.name not in found:
            found[spec.name] = spec
    return found


def names() -> tuple[str, ...]:
    """The names ``--ktest-backend`` accepts."""
    return tuple(backends())


def matrix_names() -> tuple[str, ...]:
    """The backends a CI matrix can name (those that make their own cluster)."""
    return tuple(name for name, found in backends().items() if found.creates_cluster)


def up_names() -> tuple[str, ...]:
    """The backends ``ktest up`` can keep warm."""
    return tuple(name for name, found in backends().items() if found.up is not None)


def spec(name: str) -> BackendSpec:
    """The backend called ``name`` (``KeyError`` if none is)."""
    return backends()[name]
