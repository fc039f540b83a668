"""The door for extension authors: everything a backend (or a binary source) needs from ktest.

A backend is a package of your own plus one registration, a :class:`BackendSpec` named by an
entry point in the group ``ktest.backends``; ktest's built-in backends register themselves
through the same door (``ktest/backends/<name>/registration.py``). A binary source is a
:class:`BinarySource` named by an entry point in the group ``ktest.binary_sources``. The
parts a spec names, and when each is called, are in docs/architecture.md ("Backends are
plug-ins").

Compatibility: the names below are public (``ktest.public_api``); they stay importable from
here, and one that moves keeps working from here with a ``DeprecationWarning`` for at least a
minor release, as CHANGELOG.md says. Modules not listed in ``ktest.public_api`` may change in
any release: a backend that imports only from here (and the other public modules) keeps
working. Names are imported on first use, so registering a backend imports nothing heavy.

* registering: :class:`BackendSpec` and what its parts return or hold: :class:`LogExport`
  (``diagnostics``), :class:`ForeignOption` (``foreign_options``), :class:`CiContext` and
  :class:`CiSteps` (``ci_steps``), :class:`BackendVersions` (``versions``);
* settings: the row builders :func:`setting` and :func:`flag` (a ``settings`` part is a tuple of
  :class:`Spec`), the value parsers they take, :class:`Settings` (what ``open``, ``check`` and
  ``preflight`` receive), :func:`settings_from_env` and :func:`add_setting_option` (a backend's
  ``ktest`` verbs and options read the same settings);
* the cluster: :class:`Backend` (what ``open`` returns), :class:`ClusterShare` (what xdist
  workers attach with), :class:`AttachedBackend` (the default ``attach``);
* clean-up: :class:`JanitorHandle` (``on_death``: the command line that cleans up after a
  killed run), :func:`held_directory` and :class:`Holder` (a directory, a record, held by this
  process and swept once it is dead);
* errors: :class:`ConfigError` (a bad setting: say what, why and how to fix it);
* binary sources: :class:`BinarySource` and the :class:`Progress` its install reports to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.assets.progress import Progress as Progress
    from ktest.assets.sources import BinarySource as BinarySource
    from ktest.backend_registry import BackendSpec as BackendSpec
    from ktest.backend_registry import BackendVersions as BackendVersions
    from ktest.backend_registry import CiContext as CiContext
    from ktest.backend_registry import CiSteps as CiSteps
    from ktest.backend_registry import ForeignOption as ForeignOption
    from ktest.backend_registry import LogExport as LogExport
    from ktest.base.holders import Holder as Holder
    from ktest.base.holders import held_directory as held_directory
    from ktest.base.janitor_client import JanitorHandle as JanitorHandle
    from ktest.config import Settings as Settings
    from ktest.config import add_setting_option as add_setting_option
    from ktest.config import settings_from_env as settings_from_env
    from ktest.config_values import Source as Source
    from ktest.config_values import Spec as Spec
    from ktest.config_values import flag as flag
    from ktest.config_values import parse_bool as parse_bool
    from ktest.config_values import parse_choice as parse_choice
    from ktest.config_values import parse_image_reference as parse_image_reference
    from ktest.config_values import parse_path as parse_path
    from ktest.config_values import parse_paths as parse_paths
    from ktest.config_values import parse_seconds as parse_seconds
    from ktest.config_values import parse_text as parse_text
    from ktest.config_values import setting as setting
    from ktest.errors import ConfigError as ConfigError
    from ktest.sessions.attached import AttachedBackend as AttachedBackend
    from ktest.sessions.backend import Backend as Backend
    from ktest.sessions.backend import ClusterShare as ClusterShare

_NAMES_BY_MODULE = {
    "ktest.backend_registry": (
        "BackendSpec", "BackendVersions", "CiContext", "CiSteps", "ForeignOption", "LogExport",
    ),
    "ktest.config_values": (
        "Source", "Spec", "flag", "parse_bool", "parse_choice", "parse_image_reference", "parse_path",
        "parse_paths", "parse_seconds", "parse_text", "setting",
    ),
    "ktest.config": ("Settings", "add_setting_option", "settings_from_env"),
    "ktest.sessions.backend": ("Backend", "ClusterShare"),
    "ktest.sessions.attached": ("AttachedBackend",),
    "ktest.base.janitor_client": ("JanitorHandle",),
    "ktest.base.holders": ("Holder", "held_directory"),
    "ktest.errors": ("ConfigError",),
    "ktest.assets.sources": ("BinarySource",),
    "ktest.assets.progress": ("Progress",),
}
_EXPORTS = {name: module for module, names in _NAMES_BY_MODULE.items() for name in names}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
