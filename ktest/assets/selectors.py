"""Kubernetes version selectors: ``1.37.2`` (exact), ``1.37`` (newest patch), ``latest``.

A selector names which release the caller wants; resolving it to one concrete
version needs the list of versions a source knows (see ``versions.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ktest.errors import AssetsError

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
_STABLE_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Selector:
    """A parsed selector. ``minor``/``patch`` are None when the selector leaves them open."""

    text: str
    major: int | None = None
    minor: int | None = None
    patch: int | None = None

    @property
    def is_latest(self) -> bool:
        return self.major is None

    @property
    def is_exact(self) -> bool:
        return self.patch is not None

    @property
    def exact_version(self) -> str:
        """The concrete version of an exact selector, e.g. ``"1.37.2"``."""
        if self.patch is None:
            raise ValueError(f"selector {self.text!r} is not exact")
        return f"{self.major}.{self.minor}.{self.patch}"

    def matches(self, version: str) -> bool:
        """True when the stable release ``version`` satisfies this selector."""
        parsed = parse_stable_version(version)
        if parsed is None:
            return False
        if self.is_latest:
            return True
        if (parsed[0], parsed[1]) != (self.major, self.minor):
            return False
        return self.patch is None or parsed[2] == self.patch

    def newest_match(self, versions: Iterable[str]) -> str | None:
        """The newest version in ``versions`` this selector accepts, or None."""
        matching = [
            parsed
            for parsed in (parse_stable_version(v) for v in versions if self.matches(v))
            if parsed is not None
        ]
        return format_version(max(matching)) if matching else None

    def __str__(self) -> str:
        return self.text


LATEST = Selector("latest")

_RELEASE_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


@dataclass(frozen=True, order=True)
class KubeVersion:
    """A Kubernetes version as a value: parsed once (``v1.37.2``, ``1.37``, ``v1.37.2+k3s1``),
    then asked for its parts instead of stripping a ``v`` or splitting a minor by hand."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str) -> KubeVersion:
        """``AssetsError`` naming the forms accepted when ``text`` is not a version."""
        match = _RELEASE_RE.match(str(text).strip())
        if match is None:
            raise AssetsError(
                f"{text!r} is not a Kubernetes version; write it like 1.37.2 or 1.37 "
                "(a leading 'v' is allowed)"
            )
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), None if patch is None else int(patch))

    @property
    def minor_text(self) -> str:
        """``"1.37"``."""
        return f"{self.major}.{self.minor}"

    @property
    def text(self) -> str:
        """``"1.37.2"`` (``"1.37"`` without a patch): no leading ``v``."""
        return self.minor_text if self.patch is None else f"{self.minor_text}.{self.patch}"

    @property
    def tag(self) -> str:
        """``"v1.37.2"``: how images and kubeadm name it."""
        return f"v{self.text}"

    def __str__(self) -> str:
        return self.text


def parse_selector(text: str | None) -> Selector:
    """Parse ``"1.37.2"``, ``"v1.37"``, ``"latest"`` (None or "" mean latest).

    Raises AssetsError for anything else, saying which forms are accepted.
    """
    if text is None:
        return LATEST
    cleaned = text.strip()
    if cleaned in ("", "latest"):
        return LATEST
    match = _VERSION_RE.match(cleaned)
    if match is None:
        raise AssetsError(
            f"Kubernetes version selector {text!r} is not valid.\n"
            "Use an exact release like 1.37.2, a minor version like 1.37 (its newest patch "
            "release), or 'latest' (a leading 'v' is allowed; pre-releases are not supported)."
        )
    major, minor, patch = match.groups()
    if int(major) != 1:
        raise AssetsError(
            f"Kubernetes version selector {text!r} asks for major version {major}; "
            "Kubernetes releases are 1.x. Use e.g. 1.37 or 1.37.2."
        )
    version = KubeVersion(int(major), int(minor), None if patch is None else int(patch))
    return Selector(version.text, version.major, version.minor, version.patch)


def parse_stable_version(version: str) -> Version | None:
    """``"v1.37.2"``/``"1.37.2"`` -> ``(1, 37, 2)``; None for pre-releases and junk."""
    match = _STABLE_RE.match(version.strip())
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return (major, minor, patch)


def format_version(version: Version) -> str:
    return ".".join(str(part) for part in version)


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Stable releases only, newest first, without duplicates."""
    parsed = {p for p in (parse_stable_version(v) for v in versions) if p is not None}
    return [format_version(p) for p in sorted(parsed, reverse=True)]
