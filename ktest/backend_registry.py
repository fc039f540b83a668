"""Where a session's cluster can come from: every backend, registered once.

A backend is one package plus one registration: a :class:`BackendSpec` (from
``ktest.extension``, the public door) named by an entry point in the group ``ktest.backends``.
ktest's own backends register the same way, from their packages
(``ktest/backends/<name>/registration.py``, listed in :data:`BUILT_IN`); this registry only
collects them. The spec names its parts as ``"module:attribute"`` strings, imported only when
that part is needed, so this registry imports nothing and every layer may read it; each field of
:class:`BackendSpec` says what its part is called with and what it returns.

Nothing outside this module compares a backend's name: code asks the spec
(``starts_control_plane``, ``nodes``) or calls its parts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class LogExport:
    """A backend's answer to ``diagnostics``: where a failed run's cluster logs go, and how.

    The failure report of each test names ``directory``; at the end of a failed session the
    plugin calls ``export`` (None in processes that do not own the cluster: xdist workers)."""

    what: str
    """What the logs are, for the report title ("kind cluster logs")."""
    directory: Path
    how: str
    """The tool that writes them ("kind export logs")."""
    contents: str
    """What they hold, for the note after the export ("node journal, kubelet, containerd, pods")."""
    export: Callable[[], object] | None = None


@dataclass(frozen=True)
class ForeignOption:
    """An option of another pytest plugin that describes the cluster it creates (pytest-kind's,
    for backend kind: a backend's ``foreign_options``).

    Where ktest creates that cluster instead (backend kind, whose ``kind_cluster`` takes the place
    of pytest-kind's), the option is taken as the ktest ``setting`` it means, or refused with
    ``refusal`` (what to use instead), never ignored. On other backends it is the plugin's alone."""

    dest: str
    option: str
    plugin: str
    """The plugin whose option it is ("pytest-kind")."""
    fixture: str
    """ktest's fixture that takes the place of the plugin's ("kind_cluster")."""
    setting: str | None = None
    refusal: str = ""
    default: Any = None
    """The plugin's default: a value equal to it was not given (unless the option is spelled out)."""


@dataclass(frozen=True)
class CiContext:
    """What a backend's ``ci_steps`` may use in the workflow ``ktest init github-actions`` writes."""

    platform: str
    """The runner's OS and architecture, as a GitHub expression (for cache keys)."""
    release: str
    """The cell's exact Kubernetes release, as a GitHub expression."""
    cache_action: str
    """The pinned ``actions/cache`` to use."""
    upload_action: str
    """The pinned ``actions/upload-artifact`` to use."""


@dataclass(frozen=True)
class CiSteps:
    """A backend's part of that workflow, in the matrix cells of this backend (each step says
    ``if: matrix.backend == '<name>'`` itself): YAML lines at step indentation."""

    extra: str | None = None
    """ktest's pip extra its cells install (``kind``), or None."""
    before_tests: tuple[str, ...] = ()
    """Steps between the Kubernetes binaries and pytest (its tools, its node image)."""
    after_failure: tuple[str, ...] = ()
    """Steps after a failed pytest run (uploading its cluster's logs)."""


class NodeImages(Protocol):
    """The node images a machine holds, per Kubernetes minor, or why they could not be looked for."""

    @property
    def unknown(self) -> str:
        """Why the images could not be looked for ("unknown (no Docker engine)"); "" when they were."""
        ...

    def for_minor(self, minor: str) -> list[str]:
        """The image references of ``minor`` (``"1.37"``), newest first."""
        ...


@dataclass(frozen=True)
class BackendVersions:
    """A backend's answer to ``versions``: what ``ktest versions`` says of it (``kind backend uses
    kind v0.33.0``, JSON ``kind_version``; per minor ``kind node image: ...``, JSON ``node_images``)."""

    tool: str
    """The tool it makes clusters with ("kind")."""
    version: str
    """That tool's version ("v0.33.0")."""
    node_images: NodeImages
    build_hint: str
    """The command that makes a minor's missing node image, ``{minor}`` filled in by ``ktest versions``."""


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, what it offers, and where its parts live."""

    name: str
    """What users select it by: ``--ktest-backend NAME``, ``KTEST_BACKEND``, ``ktest up --backend``."""
    summary: str
    """One line for help texts and ``ktest versions``."""
    open: str
    """``open(settings, notes) -> Backend``: starts or attaches to the session's cluster."""
    check: str | None = None
    """``check(settings, env) -> Settings``: the backend's own settings rules, run when settings are
    resolved, so a bad one is an error before any test starts."""
    preflight: str | None = None
    """``preflight(settings)``: checks that read files, once, before the cluster starts."""
    fixtures: str | None = None
    """``fixtures(config, selected)``: its pytest fixtures, called for every registered backend
    (``selected``: it is the session's), so a fixture such as ``kind`` exists (and skips) on the
    others."""
    attach: str | None = None
    """``attach(share, name) -> Backend``: the cluster as a pytest-xdist worker sees it (default:
    :class:`ktest.sessions.attached.AttachedBackend`)."""
    health: str | None = None
    """``health(backend)``: health checks registered once the session's cluster is open."""
    diagnostics: str | None = None
    """``diagnostics(backend, artifacts) -> LogExport | None``: where a failed run's cluster logs go."""
    cli: str | None = None
    """``cli(subparsers, parsers)``: its own ``ktest`` subcommands and its options of ``ktest up`` and
    ``ktest down`` (``parsers`` by command name)."""
    up: str | None = None
    """``up(args, k8s_version) -> int``: ``ktest up --backend NAME`` (keep one warm between runs)."""
    down: str | None = None
    """``down(args) -> int``: ``ktest down --backend NAME``."""
    status: str | None = None
    """``status() -> list[str]``: its lines of ``ktest status`` (one saying "none" when it has none)."""
    versions: str | None = None
    """``versions() -> BackendVersions``: its part of ``ktest versions`` (the tool it makes clusters
    with, and the node images this machine holds per Kubernetes minor)."""
    settings: str | None = None
    """A tuple of its own setting rows (``ktest.config_values.Spec``), resolved by ``ktest.config``
    with every other setting and read as ``settings.<name>``."""
    describe: str | None = None
    """``describe(settings) -> list[str]``: its words in the session header's settings line."""
    ci_steps: str | None = None
    """``ci_steps(context) -> list[str]``: the GitHub Actions steps ``ktest init github-actions`` adds to
    a matrix cell of this backend before the test step (YAML lines, indented as steps)."""
    on_death: str | None = None
    """The function that builds the command line ktest's janitor runs when a holder is killed before
    its own clean-up ran (see ``ktest.base.janitor_client.JanitorHandle.on_death``), named here so a
    reader finds each backend's rule beside its other parts."""
    foreign_options: str | None = None
    """A tuple of :class:`ForeignOption`: another plugin's options this backend takes the place of
    (kind: pytest-kind's ``--keep-cluster``, ``--kind-image``...)."""
    starts_control_plane: bool = False
    """ktest starts the API server itself, so extra API server flags and feature gates apply."""
    nodes: Literal["always", "never", "ask"] = "ask"
    """Whether the cluster has real nodes (``ktest_nodes`` tests): always, never, or ask it."""
    creates_cluster: bool = True
    """It makes the cluster it tests against (so a CI matrix cell can use it); False: it takes
    one the user names by kubeconfig context."""

    def load(self, part: str) -> Callable[..., Any] | None:
        """What ``part`` (``open``, ``check``, ``fixtures``, ``down``...) names, or None: a callable
        (``settings``: the tuple of rows)."""
        target = getattr(self, part)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        loaded: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return loaded


PARTS = ("open", *(field.name for field in fields(BackendSpec) if field.type == "str | None"))
"""The fields of :class:`BackendSpec` that name a ``"module:attribute"``."""


BUILT_IN: tuple[str, ...] = (
    "ktest.backends.bare.registration:SPEC",
    "ktest.backends.kind.registration:SPEC",
    "ktest.backends.existing.registration:SPEC",
)
"""Where ktest's own backends register themselves: ``"module:attribute"`` of each one's
:class:`BackendSpec`, read as an entry point of another package is (in this order, first)."""


GROUP = "ktest.backends"
"""The entry-point group other packages register their backends in."""


@cache
def backends() -> dict[str, BackendSpec]:
    """Every backend by name: the built-in ones, then those of installed packages (each read the
    same way, as an entry point; a later one with a name already taken is not used)."""
    from importlib.metadata import EntryPoint, entry_points

    built_in = [EntryPoint(value.split(".")[2], value, GROUP) for value in BUILT_IN]
    found: dict[str, BackendSpec] = {}
    for entry in [*built_in, *entry_points(group=GROUP)]:
        spec = _load_entry(entry)
        found.setdefault(spec.name, spec)
    return found


def _load_entry(entry: Any) -> BackendSpec:
    """The :class:`BackendSpec` an entry point names; a ConfigError naming the package when it
    cannot be loaded or names something else (a broken plug-in must not pass unnoticed)."""
    from ktest.errors import ConfigError

    package = entry.dist.name if getattr(entry, "dist", None) is not None else "ktest"
    where = f"entry point {entry.name} = {entry.value} (group ktest.backends) of {package}"
    try:
        spec = entry.load()
    except Exception as error:  # whatever the plug-in raises: say which one it is
        raise ConfigError(
            f"{where} cannot be loaded ({type(error).__name__}: {error}); fix it, or uninstall {package}"
        ) from error
    if not isinstance(spec, BackendSpec):
        raise ConfigError(
            f"{where} names a {type(spec).__name__}, not a ktest.extension.BackendSpec; "
            f"fix it, or uninstall {package}"
        )
    return spec


def names(having: str | None = None) -> tuple[str, ...]:
    """The names ``--ktest-backend`` accepts; with ``having``, those whose spec has that part or
    flag: ``up``/``down`` (``ktest up``/``ktest down``), ``creates_cluster`` (a CI matrix's)."""
    return tuple(name for name, found in backends().items() if having is None or getattr(found, having))


def node_names() -> tuple[str, ...]:
    """The backends whose clusters always have real nodes (for ``ktest_nodes`` tests)."""
    return tuple(name for name, found in backends().items() if found.nodes == "always")


def parts(part: str) -> list[tuple[BackendSpec, Callable[..., Any]]]:
    """Every backend that has ``part``, with that part loaded (``status``, ``cli``, ``fixtures``)."""
    loaded = [(backend, backend.load(part)) for backend in backends().values()]
    return [(backend, found) for backend, found in loaded if found is not None]


def spec(name: str) -> BackendSpec:
    """The backend called ``name`` (``KeyError`` if none is)."""
    return backends()[name]
