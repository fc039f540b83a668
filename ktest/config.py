"""ktest's settings, resolved in one place: CLI option > environment variable > ini key > default.

The environment beats the ini file (pytest-django's order) so that a CI matrix
cell (``KTEST_BACKEND=kind``, ``KTEST_K8S_VERSION=1.35``) overrides what the
project's pyproject.toml or pytest.ini sets; the session header says where
every value that is not a default came from.

Each setting is declared once, in :data:`CORE_SETTINGS` or in its backend's package (the
``settings`` part of its ``BackendSpec``: kind's rows live in ``ktest.backends.kind.settings``),
with its option, ini key, environment variable, default and parser; :data:`SETTINGS` is all of
them, core rows first. The pytest plugin registers the
options and ini keys from that table, and plain-Python code calls
:func:`resolve_settings` with whatever sources it has. A bad value raises
:class:`~ktest.errors.ConfigError` naming where it came from and what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ktest import backend_registry as registry
from ktest.config_values import (  # noqa: F401  (apiserver_arguments: ktest.config's too)
    Source,
    Spec,
    apiserver_arguments,
    check_apiserver_flags,
    flag,
    parse_apiserver_flags,
    parse_backend,
    parse_choice,
    parse_controllers,
    parse_feature_gates,
    parse_image_reference,
    parse_path,
    parse_paths,
    parse_seconds,
    parse_text,
    parse_version,
    setting,
    shown,
)
from ktest.errors import ConfigError

if TYPE_CHECKING:
    from ktest.assets.selectors import Selector

KEEP_NAMESPACES = ("never", "on-failure", "always")
NAMESPACE_DELETION = ("wait", "background")
TIMELINE = ("off", "on-failure", "always")
DEFAULT_CONTROLLERS = ("garbagecollector", "namespace")


@dataclass(frozen=True)
class Settings:
    """Everything the plugin (or plain Python) needs to know to provide clusters and namespaces."""

    k8s_version: str | None = None
    backend: str = "bare"
    kubeconfig: Path | None = None
    context: str | None = None
    crds: tuple[Path, ...] = ()
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS
    timeout: float = 10.0
    interval: float = 0.25
    consistently: float = 2.0
    crd_timeout: float = 60.0
    namespace_timeout: float = 60.0
    finalizer_grace: float = 10.0
    keep_namespaces: str = "never"
    namespace_deletion: str = "background"
    reuse: bool = False
    artifacts_dir: Path | None = None
    timeline: str = "on-failure"
    run_dir: Path | None = None
    operator_proxy: bool = True
    operator_proxy_http2: bool = True
    apiserver_flags: tuple[str, ...] = ()
    feature_gates: tuple[str, ...] = ()
    rbac: Path | None = None
    backend_values: Mapping[str, Any] = field(default_factory=dict)
    """The values given for backends' own rows, by name; read them as attributes
    (``settings.kind_image``): a row not given reads as its default (off, or None)."""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """Where each non-default value came from (for messages), e.g. ``{"backend": "ini ktest_backend"}``."""

    def __getattr__(self, name: str) -> Any:
        """A backend's row (``kind_image``): its value, else its default; other names: AttributeError."""
        if name.startswith("_") or name in ("backend_values", "sources"):
            raise AttributeError(name)
        if name in self.backend_values:
            return self.backend_values[name]
        row = backend_rows().get(name)
        if row is None:
            raise AttributeError(f"{type(self).__name__!r} has no setting {name!r}")
        return row.default_text == "true" if row.flag else None

    def with_values(self, **values: Any) -> Settings:
        """A copy with ``values`` set, core settings and backends' rows alike."""
        core = {f.name for f in fields(self)}
        extra = {name: value for name, value in values.items() if name not in core}
        unknown = set(extra) - set(backend_rows())
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        own = {name: value for name, value in values.items() if name in core}
        if extra:
            own["backend_values"] = {**self.backend_values, **extra}
        return replace(self, **own)

    @property
    def k8s_selector(self) -> Selector:
        """``k8s_version`` as a value (``latest`` when unset): ask it, do not parse the text."""
        from ktest.assets.selectors import parse_selector

        return parse_selector(self.k8s_version)

    def source_of(self, name: str) -> str:
        return self.sources.get(name, "default")

    def describe(self) -> str:
        """One line for the test session header."""
        parts = [f"backend={self.backend}", f"k8s={self.k8s_version or 'latest'}"]
        if not registry.spec(self.backend).creates_cluster:
            parts.append(f"context={self.context}")
        else:
            parts.append(f"controllers={','.join(self.controllers) or 'none'}")
        if self.crds:
            parts.append(f"crds={len(self.crds)} path(s)")
        if self.reuse:
            parts.append("reuse=on")
        for _backend, describe in registry.parts("describe"):
            parts += describe(self)
        if self.keep_namespaces != "never":
            parts.append(f"keep-namespaces={self.keep_namespaces}")
        if self.namespace_deletion != "background":
            parts.append(f"namespace-deletion={self.namespace_deletion}")
        if not self.operator_proxy:
            parts.append("operator-proxy=off")
        if self.apiserver_flags:
            parts.append(f"apiserver-flags={' '.join(self.apiserver_flags)}")
        if self.feature_gates:
            parts.append(f"feature-gates={','.join(self.feature_gates)}")
        if self.rbac is not None:
            parts.append(f"rbac={self.rbac}")
        return " ".join(parts)

    def describe_sources(self) -> str:
        """Where each value that is not a default came from, for the session header."""
        given = [
            f"{spec.name}={shown(getattr(self, spec.name))} ({self.sources[spec.name]})"
            for spec in all_settings()
            if spec.name in self.sources
        ]
        return ", ".join(given) if given else "all defaults"


# -------------------------------------------------------------------- the table

# fmt: off
CORE_SETTINGS: tuple[Spec, ...] = (
    setting("k8s_version", parse_version,
             "Kubernetes version: 1.37.2, 1.37 (newest patch) or latest", "latest", metavar="VERSION"),
    setting("backend", parse_backend,
             "where the cluster comes from", "bare", metavar="NAME"),  # + each registered backend's summary
    setting("kubeconfig", parse_path,
             "kubeconfig for backend existing", "$KUBECONFIG, else ~/.kube/config", metavar="PATH"),
    setting("context", parse_text,
             "kubeconfig context for backend existing; required, and must be the current context", "(none)",
             metavar="NAME"),
    setting("crds", parse_paths,
             "CRD files or directories installed once per session", "(none)", multiple=True, metavar="PATH"),
    setting("controllers", parse_controllers,
             "kube-controller-manager controllers (comma-separated), by the full names its "
             "--controllers flag lists (job-controller, garbage-collector-controller) or short forms "
             "(job, garbagecollector); or none", ",".join(DEFAULT_CONTROLLERS),
             metavar="LIST"),
    setting("timeout", parse_seconds(allow_zero=True),
             "default eventually() timeout, seconds", "10", metavar="SECONDS"),
    setting("interval", parse_seconds(allow_zero=False),
             "default eventually()/consistently() poll interval, seconds", "0.25", metavar="SECONDS"),
    setting("consistently", parse_seconds(allow_zero=True),
             "default consistently() duration, seconds", "2", metavar="SECONDS"),
    setting("crd_timeout", parse_seconds(allow_zero=False),
             "how long CRDs may take to be served, seconds", "60", metavar="SECONDS"),
    setting("namespace_timeout", parse_seconds(allow_zero=False),
             "how long a test namespace may take to be deleted, seconds", "60", metavar="SECONDS"),
    setting("finalizer_grace", parse_seconds(allow_zero=True),
             "after this many seconds, finalizers holding a test namespace are reported and removed", "10",
             metavar="SECONDS"),
    setting("keep_namespaces", parse_choice(KEEP_NAMESPACES),
             "keep test namespaces: never, on-failure or always", "never", metavar="WHEN"),
    setting("namespace_deletion", parse_choice(NAMESPACE_DELETION),
             "wait: each test's teardown waits until its namespace is gone; background: deletions are "
             "waited for while later tests run, and all of them before the session ends", "background",
             metavar="HOW"),
    flag("reuse",
          "attach to a compatible control plane started by `ktest up` (never stopped by the tests)"),
    setting("artifacts_dir", parse_path,
             "where diagnostics too big for a report go (timelines, kind export logs after a failed run); "
             "a directory ktest creates holds a .gitignore of *",
             ".ktest-artifacts in the rootdir", key="artifacts", metavar="DIR"),
    setting("timeline", parse_choice(TIMELINE),
             "write a failure timeline (one self-contained HTML page per test, under <artifacts>/timelines): "
             "off, on-failure or always", "on-failure", metavar="WHEN"),
    setting("run_dir", parse_path,
             "where embedded control planes keep their private directory (etcd data, certificates, logs)",
             "/dev/shm when it has 1 GiB free, else the temp directory", metavar="DIR"),
    flag("operator_proxy",
          "operators started by ktest's runners talk to the API server through ktest's recording, "
          "fault-injecting proxy (op.traffic, op.faults)", on=True),
    flag("operator_proxy_http2",
          "the operator proxy offers HTTP/2 (h2) as well as HTTP/1.1: Go operators then multiplex their "
          "requests over one connection, as they do with a real API server", on=True),
    setting("apiserver_flags", parse_apiserver_flags,
             "extra kube-apiserver flag as --name=value (backend bare), checked against the binary's own "
             "--help; environment: space-separated", "(none)", option="--ktest-apiserver-flag", multiple=True,
             metavar="--NAME=VALUE"),
    setting("feature_gates", parse_feature_gates,
             "kube-apiserver feature gates, Name=true|false comma-separated (backend bare), checked against "
             "the gates the binary knows", "(none)", metavar="GATES"),
    setting("rbac", parse_path,
             "the operator's shipped roles (a Role/ClusterRole file, kubebuilder's config/rbac, a rendered "
             "Helm chart): every operator request of the session is checked against them; a missing rule "
             "fails the session, unused and wildcard rules are listed, the derived rules are written to "
             "rbac/ in the artifacts directory", "(off)", metavar="PATH"),
)
# fmt: on


def backend_rows() -> dict[str, Spec]:
    """Every registered backend's own rows (the ``settings`` part of its spec), by name."""
    rows: dict[str, Spec] = {}
    for backend, part in registry.parts("settings"):
        for row in cast("tuple[Spec, ...]", part):
            if row.name in rows or any(row.name == core.name for core in CORE_SETTINGS):
                raise ConfigError(
                    f"backend {backend.name} registers the setting {row.name!r}, which another backend or "
                    "ktest itself already has: rename it (prefix it with the backend's name)"
                )
            rows[row.name] = row
    return rows


def all_settings() -> tuple[Spec, ...]:
    """Every setting: ktest's own rows, then each registered backend's."""
    core = tuple(_listing_backends(row) if row.parse is parse_backend else row for row in CORE_SETTINGS)
    return core + tuple(backend_rows().values())


def _listing_backends(row: Spec) -> Spec:
    """The backend row, its help naming every registered backend with its summary (built-in or
    from another package alike: the registry is the one list)."""
    listed = "; ".join(f"{spec.name} ({spec.summary})" for spec in registry.backends().values())
    return replace(row, help=f"{row.help}: {listed}")


def specs_by_name() -> dict[str, Spec]:
    """Every setting by name."""
    return {spec.name: spec for spec in all_settings()}


if TYPE_CHECKING:  # read through __getattr__ below, typed for the checker
    SETTINGS: tuple[Spec, ...]
    SPECS_BY_NAME: dict[str, Spec]


def __getattr__(name: str) -> Any:
    """``SETTINGS`` and ``SPECS_BY_NAME``: read when asked, so that they hold the rows of
    backends registered by other packages (importing this module loads no backend)."""
    if name == "SETTINGS":
        return all_settings()
    if name == "SPECS_BY_NAME":
        return specs_by_name()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def given_foreign_options(getoption: Callable[[str], Any], arguments: Sequence[str]) -> dict[str, Any]:
    """The options of other plugins given in this run (pytest-kind's, for backend kind), by dest:
    ``getoption(dest)`` reads a value (None when that plugin is not installed), ``arguments`` are
    the command line and addopts, so that a value equal to the plugin's default counts when it is
    spelled out."""
    given = {}
    for foreign in foreign_options():
        value = getoption(foreign.dest)
        spelled = any(word == foreign.option or word.startswith(foreign.option + "=") for word in arguments)
        if value is not None and (value != foreign.default or spelled):
            given[foreign.dest] = value
    return given


def foreign_options(backend: str | None = None) -> tuple[registry.ForeignOption, ...]:
    """The other plugin's options ``backend`` takes the place of (its spec's ``foreign_options``;
    None: every backend's), e.g. pytest-kind's on backend kind."""
    found: list[registry.ForeignOption] = []
    for spec, part in registry.parts("foreign_options"):
        if backend is None or spec.name == backend:
            found += cast("tuple[registry.ForeignOption, ...]", part)
    return tuple(found)


def add_setting_option(parser: Any, name: str, *, fallback: str | None = None) -> None:
    """Add ``--<name>`` to a ``ktest`` command's argparse ``parser`` with the setting's help and
    metavar; its default is the setting's environment variable, else ``fallback``, so the command
    and pytest read the same variable."""
    spec = specs_by_name()[name]
    parser.add_argument(
        f"--{name.replace('_', '-')}",
        default=os.environ.get(spec.env) or fallback,
        metavar=spec.metavar,
        help=f"{spec.help} (default: ${spec.env}, else {spec.default_text})",
    )


def resolve_settings(
    *,
    options: Mapping[str, Any] | None = None,
    ini: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ini_dir: Path | None = None,
    foreign: Mapping[str, Any] | None = None,
) -> Settings:
    """Build :class:`Settings` from the given sources (each keyed by setting name).

    ``options`` values are strings, lists of strings (repeated options) or
    booleans (flags), None when not given; ``ini`` values are strings or lists
    of lines, None or empty when not set; ``env`` is keyed by variable name
    (default: ``os.environ``). Relative paths are taken from ``cwd`` for options
    and environment variables and from ``ini_dir`` for ini keys. ``foreign``: the
    other plugins' options given (:func:`given_foreign_options`), taken or refused as the
    backend's ``foreign_options`` say (pytest-kind's on backend kind).
    """
    options = options or {}
    ini = ini or {}
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    ini_dir = ini_dir or cwd
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in all_settings():
        found = _raw_value(spec, options.get(spec.name), ini.get(spec.name), env, cwd, ini_dir)
        if found is None:
            continue
        text, source = found
        values[spec.name] = spec.parse(text, spec, source)
        sources[spec.name] = source.label
    settings = Settings(sources=sources).with_values(**{k: v for k, v in values.items() if v is not None})
    if foreign and foreign_options(settings.backend):
        settings = _with_foreign_options(settings, foreign, cwd)
    return _check_combination(settings, env)


def _with_foreign_options(settings: Settings, given: Mapping[str, Any], cwd: Path) -> Settings:
    """``settings`` with the other plugin's options taken; a refused one, or one that contradicts
    ktest's own option, is a ConfigError."""
    changes: dict[str, Any] = {}
    sources = dict(settings.sources)
    for foreign in foreign_options(settings.backend):
        if foreign.dest not in given:
            continue
        label = f"option {foreign.option} ({foreign.plugin}'s)"
        if foreign.setting is None:
            raise ConfigError(
                f"{label}: ktest's {foreign.fixture} takes the place of {foreign.plugin}'s on backend "
                f"{settings.backend}, and {foreign.option} has no meaning there: {foreign.refusal}"
            )
        spec = specs_by_name()[foreign.setting]
        value = spec.parse(_text(given[foreign.dest]), spec, Source("option", label, cwd))
        own = settings.source_of(spec.name)
        current = getattr(settings, spec.name)
        if own.startswith("option ") and current != value:
            raise ConfigError(
                f"{label} and {own} disagree ({shown(value)} against {shown(current)}); "
                f"give one of them ({spec.option} is ktest's spelling)"
            )
        if not own.startswith("option "):
            changes[spec.name] = value
            sources[spec.name] = label
    if not changes:
        return settings
    return replace(settings.with_values(**changes), sources=sources)


_CRD_API_VERSION = "apiextensions.k8s.io/v1"


def check_before_start(settings: Settings) -> None:
    """What can be checked before a cluster starts and costs more than parsing: every
    CRD file parses and holds only CustomResourceDefinitions (errors name the setting,
    the file and the line), backend existing's context is the kubeconfig's current
    one, backend kind's extra config is a valid kind Cluster config, the run
    directory exists, and extra API server flags and feature gates are ones the
    version's kube-apiserver knows (its binaries are found or installed for that).
    Raises :class:`~ktest.errors.ConfigError`."""
    from ktest.cluster.manifests import load_as

    source = settings.source_of("crds")
    for path in settings.crds:
        for manifest in load_as(path, ConfigError, source):
            obj = manifest.obj
            if (obj.get("apiVersion"), obj.get("kind")) != (_CRD_API_VERSION, "CustomResourceDefinition"):
                raise ConfigError(
                    f"{source}: {manifest.origin}: {manifest.ref_text} ({obj.get('apiVersion')}) is not a "
                    "CustomResourceDefinition (apiextensions.k8s.io/v1); CRD paths must hold only CRDs "
                    "(apply other objects in the test or a fixture with cluster.apply)"
                )
    preflight = registry.spec(settings.backend).load("preflight")
    if preflight is not None:
        preflight(settings)
    if settings.apiserver_flags or settings.feature_gates:  # only backends that start an API server
        from ktest.assets import resolve_assets

        assets = resolve_assets(settings.k8s_version)
        check_apiserver_flags(settings, assets.binary("kube-apiserver"), assets.version)
    if settings.run_dir is not None and not settings.run_dir.is_dir():
        raise ConfigError(
            f"{settings.source_of('run_dir')}: {settings.run_dir} is not a directory; give an existing "
            "directory for the control planes' private directories (etcd data, certificates, logs), "
            "or leave it unset (/dev/shm, else the temp directory)"
        )


def settings_from_env(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Settings from environment variables only (plain Python, outside pytest)."""
    return resolve_settings(env=env, cwd=cwd)


def _raw_value(
    spec: Spec, option: Any, ini_value: Any, env: Mapping[str, str], cwd: Path, ini_dir: Path
) -> tuple[str, Source] | None:
    if option is not None and option != []:
        return _text(option), Source("option", f"option {spec.option}", cwd)
    raw = env.get(spec.env)
    if raw is not None and raw.strip():
        return raw, Source("env", f"environment variable {spec.env}", cwd)
    if ini_value is not None and ini_value not in ("", []):
        return _text(ini_value), Source("ini", f"ini key {spec.ini}", ini_dir)
    return None


def _text(value: Any) -> str:
    """A given value as the text its parser reads: a flag as true/false, repeated values one a line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "\n".join(str(item) for item in value)
    return str(value)


def _check_combination(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Rules between settings: API server flags need a control plane ktest starts; backend
    existing needs an explicit context and a kubeconfig."""
    backend_spec = registry.spec(settings.backend)
    for name in ("apiserver_flags", "feature_gates"):
        if getattr(settings, name) and (not backend_spec.starts_control_plane or settings.reuse):
            where = (
                "reuse (a control plane started by `ktest up`)"
                if settings.reuse
                else f"backend {settings.backend}"
            )
            hint = (
                "for kind, put them in the kind config (ktest_kind_config: featureGates, or "
                "kubeadmConfigPatches with apiServer extraArgs)"
                if backend_spec.nodes == "always"
                else "start the control plane yourself with them"
            )
            raise ConfigError(
                f"{settings.source_of(name)}: {name.replace('_', ' ')} apply only to the control plane ktest "
                f"starts itself (backend bare, without reuse), but this run uses {where}, whose API server "
                f"is already running; unset them, or {hint}"
            )
    check = backend_spec.load("check")
    return check(settings, env) if check is not None else settings


def default_kubeconfig(env: Mapping[str, str]) -> Path:
    """``$KUBECONFIG`` (a single file) or ``~/.kube/config``."""
    raw = env.get("KUBECONFIG", "")
    entries = [entry for entry in raw.split(os.pathsep) if entry]
    if len(entries) > 1:
        raise ConfigError(
            f"KUBECONFIG lists {len(entries)} files; ktest needs one: set ktest_kubeconfig "
            "(or --ktest-kubeconfig / KTEST_KUBECONFIG) to the file that holds the test context"
        )
    if entries:
        return Path(entries[0]).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".kube" / "config"
