"""Private planes that tests of several start-up modules share, each started once a session and
stopped before the first of its tests runs: the tests read what was seen while it ran.

Loaded as a plugin (``pytest_plugins = ("startup_planes",)``) by the modules that use it, so that
each fixture here is one for all of them (a fixture imported into two modules starts twice); they
import this module for type checking only (imported first, it could not be assertion-rewritten
as a plugin). A module lists what to see on a plane in ``SEEN_ON_USER_FLAGS_PLANE`` or
``SEEN_ON_SELF_BOOTSTRAPPED_PLANE`` (functions of the running plane); at start, the plane calls
those of every module with a test in the session (they must not interfere), and a test gets its
function's result from :meth:`Seen.result`, which raises what the function raised. Their tests
share an xdist group, so that one worker starts each plane:

- ``user_flags_plane`` ("startup-user-flags-plane"): API server flags of the user's
  (test_bad_input.py, test_admission_config.py, test_etcd_template.py).
- ``self_bootstrapped_plane`` ("etcd-template-planes", with test_etcd_template's own): binaries
  without kube-controller-manager and a cache it cannot write (test_bad_input.py,
  test_etcd_template.py).
"""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from observations import Observations

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane
from ktest.controlplane.admission import ADMISSION_CONFIG_FLAG

ADMISSION_CONFIG = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n"
SMALL_SERVICE_RANGE = "10.0.0.0/28"  # the `kubernetes` Service and 13 more

Observer = Callable[[ControlPlane], Any]
USER_FLAGS = "SEEN_ON_USER_FLAGS_PLANE"
SELF_BOOTSTRAPPED = "SEEN_ON_SELF_BOOTSTRAPPED_PLANE"


@dataclasses.dataclass(kw_only=True)
class Seen(Observations):
    """A shared plane, stopped, and what was seen while it ran."""

    plane: ControlPlane
    flags: dict[str, str]  # the API server flags of the user's it was started with
    warned: list[warnings.WarningMessage]  # what its start warned (when not turned into errors)


def _observe(
    plane: ControlPlane,
    session: pytest.Session,
    which: str,
    flags: dict[str, str],
    warned: list[warnings.WarningMessage],
) -> Seen:
    """Calls the functions listed under ``which`` by the modules of the session's tests."""
    seen = Seen(listing=which, plane=plane, flags=flags, warned=warned)
    seen.observe(session, plane)
    return seen


@pytest.fixture(scope="session")
def user_flags_plane(
    k8s_assets: Assets, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Seen]:
    """One plane for unrelated settings of the user's: API server flags that replace ktest's
    (enabling the ServiceAccount admission plugin), an admission configuration of its own, a small
    Service range (and, for all these flags, no etcd template); no controllers and a directory kept
    after stop. Started and stopped with warnings as errors."""
    own = tmp_path_factory.mktemp("user-admission") / "admission.yaml"
    own.write_text(ADMISSION_CONFIG)
    flags = {
        "disable-admission-plugins": "",
        "feature-gates": "AllAlpha=false",
        ADMISSION_CONFIG_FLAG: str(own),
        "service-cluster-ip-range": SMALL_SERVICE_RANGE,
    }
    plane = ControlPlane(assets=k8s_assets, controllers="none", keep_directory=True, apiserver_flags=flags)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plane.start()
    try:
        seen = _observe(plane, request.session, USER_FLAGS, flags, [])
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plane.stop()
    try:
        yield seen
    finally:
        shutil.rmtree(plane.directory)


@pytest.fixture(scope="session")
def self_bootstrapped_plane(
    k8s_assets: Assets, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Seen]:
    """A plane on binaries without kube-controller-manager (symlinks to the others), with the
    default controllers asked for, and a cache it cannot write (XDG_CACHE_HOME under a file): it
    warns and runs without controllers, and has no template, so it bootstraps itself."""
    binaries = tmp_path_factory.mktemp("without-controller-manager")
    for name in ("etcd", "kube-apiserver"):
        (binaries / name).symlink_to(k8s_assets.binary(name))
    cache = tmp_path_factory.mktemp("unwritable-cache")
    (cache / "file").write_text("not a directory")
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        patch.setenv("XDG_CACHE_HOME", str(cache / "file" / "cache"))
        plane = ControlPlane(assets=binaries).start()
    try:
        seen = _observe(plane, request.session, SELF_BOOTSTRAPPED, {}, list(warned))
    finally:
        plane.stop()
    yield seen
