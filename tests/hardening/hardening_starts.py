"""One private control plane that two hardening modules' start-up checks share, started once a
session and stopped before the first of its tests runs: the tests read what was seen around it.

Loaded as a plugin (``pytest_plugins = ("hardening_starts",)``) by the modules that use it, so that
its fixture is one for all of them (a fixture imported into two modules starts twice); they import
this module for type checking only (imported first, it could not be assertion-rewritten as a
plugin). A module makes the start's conditions with the functions in its ``PREPARE_HARDENING_START``
(called before the start with the run directory and a MonkeyPatch undone right after the start;
what they return is :meth:`SharedStart.prepared`) and lists what to see on the running plane in
``SEEN_ON_HARDENING_START`` (functions of the plane and of the :class:`SharedStart` so far;
:meth:`SharedStart.result` gives what one returned, or raises what it raised). Only the modules
with a test in the session take part. Their tests share the xdist group ``GROUP``, so that one
worker starts the plane.

``hardening_start`` (controllers: ``garbagecollector``, so that every component is there) serves:

- test_child_environment.py: etcd and kube variables in the environment at start (among them
  ``ETCD_LISTEN_METRICS_URLS``); it reads each component's inherited environment and etcd's
  listeners.
- test_shared_machine.py (as root): an explicit run directory that holds another user's runs, live
  and dead; it reads where the plane's directory was, and what the directory holds after the stop.

Why the two conditions do not interfere: the run directory is given explicitly
(``root_directory``), so no variable is consulted for it, and the polluted variables (``ETCD*``,
``KUBE*``, ``KUBECONFIG``, a marker) are none that ktest reads for its run directory or sweep
(``TMPDIR``, ``KTEST_RUN_DIR``, ``XDG_*`` are untouched). The other user's runs are directories
beside the plane's, never read by its components: they cannot change an environment or a listener.
Not root, the other user's runs cannot be made (chown): the plane starts in a run directory
without them, the child-environment checks still run, and the run-directory test is skipped as
before. The controller manager adds files inside the plane's own directory only, which the stop
removes.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from observations import Observations, function_key, listed

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane

GROUP = "hardening-shared-start"
PREPARE = "PREPARE_HARDENING_START"
SEEN = "SEEN_ON_HARDENING_START"

Preparer = Callable[[Path, pytest.MonkeyPatch], Any]
Observer = Callable[[ControlPlane, "SharedStart"], Any]


@dataclasses.dataclass(kw_only=True)
class SharedStart(Observations):
    """The shared plane's run directory, what was prepared for its start and seen while it ran."""

    base: Path  # the explicit run directory (``root_directory``); removed after the session
    prepared_results: dict[str, Any] = dataclasses.field(default_factory=dict)

    def prepared(self, preparer: Preparer) -> Any:
        """What ``preparer`` returned before the start."""
        key = function_key(preparer)
        if key not in self.prepared_results:
            raise LookupError(f"{key} is not in its module's {PREPARE} tuple: it was not called")
        return self.prepared_results[key]


@pytest.fixture(scope="session")
def hardening_start(
    k8s_assets: Assets, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[SharedStart]:
    """One plane started in an explicit run directory, under every taking part module's conditions."""
    base = tmp_path_factory.mktemp("hardening-start")
    seen = SharedStart(listing=SEEN, base=base)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            for preparer in listed(request.session, PREPARE):
                seen.prepared_results[function_key(preparer)] = preparer(base, monkeypatch)
            plane = ControlPlane(assets=k8s_assets, controllers="garbagecollector", root_directory=base)
            plane.start()
        try:
            seen.observe(request.session, plane, seen)
        finally:
            plane.stop()
        yield seen
    finally:
        shutil.rmtree(base, ignore_errors=True)
