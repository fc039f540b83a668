"""What an in-place upgrade of the control plane did (``ControlPlane.upgrade``'s answer).

The upgrade itself is the add-on :mod:`ktest.plane_upgrade`; these records are the core's side of
its door, so that ``ControlPlane.upgrade`` is typed without importing the add-on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ServedApi:
    """One resource of one group version the API server serves (``group`` is "" for core)."""

    group: str
    version: str
    resource: str

    @property
    def group_version(self) -> str:
        """``networking.k8s.io/v1beta1``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.resource} ({self.group_version})"


@dataclass(frozen=True)
class UpgradeReport:
    """What :func:`upgrade_plane` did: from and to which version, how long the step took
    (stop, start, ready with controllers), and which APIs the old minor served that the new
    one does not (``removed_apis``) or the other way round (``added_apis``).

    ``started`` and ``finished`` are ``time.monotonic()`` readings: the traffic record's
    calls (``op.traffic``) can be placed before, during or after the upgrade with them."""

    from_version: str
    to_version: str
    duration: float
    removed_apis: tuple[ServedApi, ...]
    added_apis: tuple[ServedApi, ...]
    started: float
    finished: float
    served_apis: frozenset[ServedApi] = frozenset()
    """What the new minor serves."""

    def replacements(self, api: ServedApi) -> list[str]:
        """The group versions the new minor serves ``api``'s resource in (``networking.k8s.io/v1``)."""
        return sorted(
            served.group_version
            for served in self.served_apis
            if served.group == api.group and served.resource == api.resource
        )

    def describe(self) -> str:
        """``1.36.3 -> 1.37.2 in 2.10 s; no longer served: servicecidrs (networking.k8s.io/v1beta1)``."""
        text = f"{self.from_version} -> {self.to_version} in {self.duration:.2f} s"
        if self.removed_apis:
            text += "; no longer served: " + ", ".join(map(str, self.removed_apis))
        return text
