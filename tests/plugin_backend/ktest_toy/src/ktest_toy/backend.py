"""Opening the toy backend: ktest's bare control plane, with the banner in the session's notes."""

from __future__ import annotations

from collections.abc import Mapping

from ktest.backends.bare.backend import BareBackend
from ktest.extension import Backend, ConfigError, Settings


def open_toy(settings: Settings, notes: list[str]) -> Backend:
    notes.append(f"toy backend says: {settings.toy_banner or 'nothing'}")
    return BareBackend.start(settings)


def check(settings: Settings, env: Mapping[str, str]) -> Settings:
    """The toy's own rule: a banner fits on one line."""
    if settings.toy_banner and "\n" in settings.toy_banner:
        raise ConfigError(f"{settings.source_of('toy_banner')}: the toy banner must be one line")
    return settings
