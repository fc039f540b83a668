"""How each setting's text becomes a value: the row type (:class:`Spec`), where a raw value came
from (:class:`Source`), one parser per kind of value, and the check of extra kube-apiserver flags
and feature gates against the binary's own ``--help``.

:mod:`ktest.config` declares the settings with these and resolves them; every parser raises
:class:`~ktest.errors.ConfigError` naming where the bad text came from and what is allowed.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ktest import backend_registry as registry
from ktest.controller_names import KNOWN_CONTROLLERS, known_controller, short_name
from ktest.errors import AssetsError, ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Source:
    """Where one raw value came from: ``kind`` is option, ini or env; ``base`` anchors relative paths."""

    kind: str
    label: str
    base: Path


Parser = Callable[[str, "Spec", Source], Any]


@dataclass(frozen=True)
class Spec:
    """One setting: its names in every source, its default and how its text is parsed."""

    name: str
    option: str
    ini: str
    env: str
    parse: Parser
    help: str
    default_text: str
    flag: bool = False  # the option takes no value (reuse)
    multiple: bool = False  # the option may be repeated, the ini key holds several lines
    metavar: str = "VALUE"  # what ``pytest --help`` shows after the option

    @property
    def ini_type(self) -> str:
        """The pytest ini type: ``bool`` for flags, ``linelist`` for repeatable settings."""
        return "bool" if self.flag else "linelist" if self.multiple else "string"


def setting_names(key: str) -> tuple[str, str, str]:
    """A setting's option, ini key and environment variable:
    ``--ktest-<key>``, ``ktest_<key>`` and ``KTEST_<KEY>``."""
    return f"--ktest-{key.replace('_', '-')}", f"ktest_{key}", f"KTEST_{key.upper()}"


def setting(
    name: str, parse: Parser, help: str, default_text: str, *, key: str = "", option: str = "", **details: Any
) -> Spec:
    """A setting's row: its option, ini key and environment variable follow from ``key`` (default:
    ``name``) by :func:`setting_names`; ``option`` overrides the first."""
    default_option, ini, env = setting_names(key or name)
    return Spec(name, option or default_option, ini, env, parse, help, default_text, **details)


def flag(name: str, help: str, *, on: bool = False) -> Spec:
    """A setting that is on or off: ``--ktest-<name>`` takes no value and turns it on."""
    return setting(name, parse_bool, help, "true" if on else "false", flag=True)


def shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value) or "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -------------------------------------------------------------------- parsers


def parse_backend(text: str, spec: Spec, source: Source) -> str:
    """A backend registered in ``ktest.backend_registry``."""
    return parse_choice(sorted(registry.names()))(text, spec, source)


def parse_choice(allowed: Sequence[str]) -> Parser:
    def parse(text: str, spec: Spec, source: Source) -> str:
        value = text.strip().lower()
        if value in allowed:
            return value
        raise ConfigError(
            f"{source.label}: {text!r} is not a valid {spec.name}; allowed values: {', '.join(allowed)}"
        )

    return parse


def parse_seconds(*, allow_zero: bool) -> Parser:
    def parse(text: str, spec: Spec, source: Source) -> float:
        try:
            value = float(text.strip().removesuffix("s"))
        except ValueError:
            value = math.nan
        if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not allow_zero):
            bound = "0 or more" if allow_zero else "more than 0"
            raise ConfigError(
                f"{source.label}: {text!r} is not a valid {spec.name}; "
                f"give a finite number of seconds, {bound} (for example 5 or 0.5)"
            )
        return value

    return parse


def parse_bool(text: str, spec: Spec, source: Source) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(
        f"{source.label}: {text!r} is not a valid {spec.name}; "
        f"allowed values: {', '.join(_TRUE)} or {', '.join(_FALSE)}"
    )


def parse_version(text: str, spec: Spec, source: Source) -> str | None:
    from ktest.assets.selectors import parse_selector

    try:
        selector = parse_selector(text)
    except AssetsError as error:
        raise ConfigError(f"{source.label}: {error}") from None
    return None if selector.is_latest else selector.text


def parse_text(text: str, spec: Spec, source: Source) -> str | None:
    return text.strip() or None


# Docker's reference grammar: an optional registry host (it has a dot or a port, or is localhost),
# lower-case path components, an optional tag, an optional digest.
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"(?:(?:{_HOST}(?:\.{_HOST})+|localhost)(?::[0-9]+)?|{_HOST}:[0-9]+)"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[^@]*))?"
)
_SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def parse_image_reference(text: str, spec: Spec, source: Source) -> str | None:
    """A Docker image reference with a tag, a digest or both: ``kindest/node:v1.35.4``,
    ``kindest/node:v1.35.4@sha256:<64 hex>`` (pinned, as kind's release notes list them)."""
    value = text.strip()
    if not value:
        return None
    how = (
        "write name:tag (kindest/node:v1.35.4, ktest/kind-node:v1.35.4) or pin the image by its digest: "
        "name:tag@sha256:<64 hex digits>"
    )
    match = _IMAGE_REFERENCE.fullmatch(value)
    if match is None:
        lowered = _IMAGE_REFERENCE.fullmatch(value.lower())
        why = (
            "image names are lower-case (only the registry's host name and the tag may use capitals)"
            if lowered is not None
            else "it is not an image reference"
        )
        raise ConfigError(f"{source.label}: {text!r} is not a valid {spec.name}: {why}; {how}")
    digest = match.group("digest")
    if digest is not None and not _SHA256_DIGEST.fullmatch(digest):
        raise ConfigError(
            f"{source.label}: {text!r} is not a valid {spec.name}: the digest {digest!r} must be sha256: "
            f"followed by 64 lower-case hex digits; {how}"
        )
    if match.group("tag") is None and digest is None:
        raise ConfigError(
            f"{source.label}: {text!r} is not a valid {spec.name}: it names no tag or digest (Docker would "
            f"take :latest, which node images do not have); {how}"
        )
    if len(match.group("name")) > 255:
        raise ConfigError(f"{source.label}: {spec.name} {text!r}: the name is longer than 255 characters")
    return value


def _expand(text: str, spec: Spec, source: Source) -> Path:
    """``~`` and ``~user`` expanded, a relative path taken from ``source.base``; an unknown user is a
    ConfigError naming the setting."""
    try:
        return source.base / Path(text).expanduser()
    except RuntimeError:
        user = text[1:].split("/", 1)[0]
        raise ConfigError(
            f"{source.label}: {text!r} starts with ~{user}, but there is no user {user!r} on this machine "
            f"(or no home directory to expand it to), so the {spec.name} path cannot be found; "
            "write it as an absolute path, relative to the current directory, or with ~/ for your own home"
        ) from None


def parse_path(text: str, spec: Spec, source: Source) -> Path | None:
    if not text.strip():
        return None
    return _expand(text.strip(), spec, source)


def parse_paths(text: str, spec: Spec, source: Source) -> tuple[Path, ...]:
    separators = os.pathsep if source.kind == "env" else "\n"
    pieces = [piece.strip() for piece in text.replace(",", separators).split(separators)]
    result = []
    for piece in pieces:
        if not piece:
            continue
        path = _expand(piece, spec, source)
        if not path.exists():
            raise ConfigError(
                f"{source.label}: CRD path {piece!r} does not exist (looked for {path}); "
                "give files or directories holding CustomResourceDefinitions"
                + (", relative to the directory of the ini file" if source.kind == "ini" else "")
            )
        result.append(path)
    return tuple(result)


def parse_controllers(text: str, spec: Spec, source: Source) -> tuple[str, ...]:
    names = [name.strip() for name in text.replace("\n", ",").split(",") if name.strip()]
    if not names or [name.lower() for name in names] == ["none"]:
        return ()
    if any(name.lower() == "none" for name in names):
        raise ConfigError(
            f"{source.label}: {text!r} mixes 'none' with controller names; "
            "give either none or a comma-separated list such as garbagecollector,namespace"
        )
    bad = [name for name in names if not all(c.isalnum() or c in "-_" for c in name)]
    if bad:
        raise ConfigError(
            f"{source.label}: {', '.join(map(repr, bad))} is not a controller name; give a "
            "comma-separated list such as garbagecollector,namespace, or none"
        )
    unknown = [name for name in names if known_controller(name) is None]
    if unknown:
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
            for name in unknown
            for close in [difflib.get_close_matches(name, _CONTROLLER_SPELLINGS, n=1)]
        ]
        raise ConfigError(
            f"{source.label}: unknown kube-controller-manager controller {', '.join(hints)}. "
            f"Known controllers (full name, or its short form such as garbagecollector): "
            f"{', '.join(KNOWN_CONTROLLERS)}; or none to run no kube-controller-manager"
        )
    return tuple(dict.fromkeys(names))


_CONTROLLER_SPELLINGS = [*KNOWN_CONTROLLERS, *(short_name(name) for name in KNOWN_CONTROLLERS)]

_FLAG_SYNTAX = re.compile(r"--[a-z0-9][a-z0-9-]*(=.*)?")
_GATE_SYNTAX = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(.*)")


def parse_apiserver_flags(text: str, spec: Spec, source: Source) -> tuple[str, ...]:
    """``--name=value`` arguments: one per line (ini), per option, or shell-quoted words (env)."""
    import shlex

    if source.kind == "ini":
        words = [line.strip() for line in text.splitlines() if line.strip()]
    else:
        try:
            words = shlex.split(text) if source.kind == "env" else [w for w in text.split("\n") if w]
        except ValueError as error:
            raise ConfigError(f"{source.label}: {text!r} cannot be split into flags ({error})") from None
    from ktest.controlplane.apiserver import RESERVED_FLAGS

    result = []
    for word in words:
        if not _FLAG_SYNTAX.fullmatch(word):
            raise ConfigError(
                f"{source.label}: {word!r} is not a kube-apiserver flag; write each as --name=value "
                "(on the command line: --ktest-apiserver-flag=--name=value, with the '=')"
            )
        name = word[2:].split("=", 1)[0]
        if name in RESERVED_FLAGS:
            raise ConfigError(
                f"{source.label}: --{name} is chosen by ktest (address, port, certificates, etcd) so that "
                "parallel control planes never collide; remove it"
            )
        if name == "feature-gates":
            option, ini, env = setting_names("feature_gates")
            raise ConfigError(
                f"{source.label}: give feature gates with {option} (ini {ini}, {env}), "
                "not as --feature-gates here"
            )
        result.append(word)
    return tuple(result)


def parse_feature_gates(text: str, spec: Spec, source: Source) -> tuple[str, ...]:
    """``Name=true`` pairs, comma- or line-separated; later ones replace earlier ones."""
    gates: dict[str, str] = {}
    for piece in text.replace("\n", ",").replace(os.pathsep, ",").split(","):
        piece = piece.strip()
        if not piece:
            continue
        match = _GATE_SYNTAX.fullmatch(piece)
        value = match.group(2).strip().lower() if match else ""
        if match is None or value not in ("true", "false"):
            raise ConfigError(
                f"{source.label}: {piece!r} is not a feature gate setting; write Name=true or Name=false, "
                "comma-separated (for example MutatingAdmissionPolicy=true,AllAlpha=false)"
            )
        gates[match.group(1)] = value
    return tuple(f"{name}={value}" for name, value in gates.items())


# ------------------------------------------------- extra kube-apiserver flags


class ExtraFlags(Protocol):
    """What the flag check reads of :class:`ktest.config.Settings`."""

    @property
    def apiserver_flags(self) -> tuple[str, ...]: ...

    @property
    def feature_gates(self) -> tuple[str, ...]: ...

    def source_of(self, name: str) -> str: ...


_GATE_IN_HELP = re.compile(r"^\s+(?:[a-z]+:)?([A-Z][A-Za-z0-9]*)=true\|false", re.MULTILINE)
_known_gates: dict[tuple[str, int, int], frozenset[str]] = {}


def known_feature_gates(binary: Path) -> frozenset[str]:
    """The feature gates ``binary --help`` lists (``kube:Name=true|false`` lines)."""
    import subprocess

    stat = binary.stat()
    key = (str(binary), stat.st_size, stat.st_mtime_ns)
    if key not in _known_gates:
        try:
            completed = subprocess.run(
                [str(binary), "--help"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ConfigError(f"cannot list the feature gates of {binary}: {error}") from error
        text = (completed.stdout + completed.stderr).decode("utf-8", "replace")
        _known_gates[key] = frozenset(_GATE_IN_HELP.findall(text))
    return _known_gates[key]


def check_apiserver_flags(settings: ExtraFlags, binary: Path, version: str) -> None:
    """Every extra flag and feature gate is one ``binary`` (kube-apiserver ``version``) knows,
    else a ConfigError naming the setting, the unknown names and close matches."""
    if settings.apiserver_flags:
        from ktest.controlplane.flags import flag_name, probe

        known = probe(binary)
        unknown = [flag_name(flag) for flag in settings.apiserver_flags if not known.accepts(flag_name(flag))]
        if unknown:
            raise ConfigError(
                f"{settings.source_of('apiserver_flags')}: kube-apiserver {version} has no flag "
                f"{_with_hints(unknown, sorted(known.flags), '--')}; correct or remove it (`{binary} --help` "
                "lists the flags this version accepts; a flag may have been removed in this version)"
            )
    if settings.feature_gates:
        gates = known_feature_gates(binary)
        names = [gate.split("=", 1)[0] for gate in settings.feature_gates]
        unknown = [name for name in names if name not in gates]
        if unknown and gates:
            raise ConfigError(
                f"{settings.source_of('feature_gates')}: kube-apiserver {version} knows no feature gate "
                f"{_with_hints(unknown, sorted(gates), '')}; correct or remove it (the --feature-gates entry "
                f"of `{binary} --help` lists the gates of this version; graduated gates are removed after a "
                "few releases)"
            )


def _with_hints(names: Sequence[str], known: Sequence[str], prefix: str) -> str:
    hints = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{prefix}{name}" + (f" (did you mean {prefix}{close[0]}?)" if close else ""))
    return ", ".join(hints)


def apiserver_arguments(settings: ExtraFlags) -> list[str]:
    """The extra kube-apiserver arguments of ``settings`` (flags, then --feature-gates)."""
    arguments = list(settings.apiserver_flags)
    if settings.feature_gates:
        arguments.append(f"--feature-gates={','.join(settings.feature_gates)}")
    return arguments
