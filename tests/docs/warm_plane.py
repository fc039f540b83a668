"""One warm control plane per docs session that the pages' child sessions attach to.

Every docs page with Python is a project run by a child pytest session; each child starting
its own etcd, kube-apiserver and kube-controller-manager was most of tests/docs' time. A
page whose examples work on any control plane instead attaches to this one the way a user's
project attaches to ``ktest up`` (``KTEST_REUSE=1``, the documented reuse path, see
docs/how-to/warm-reuse.md); its tests still get a namespace each.

The plane runs in the docs session's own process (not in a ``ktest up`` daemon of its own
session): its processes are bound to this process (parent-death signal, janitor), so an
interrupted or killed docs session leaves none behind. Its record lives in a private state
directory the children are pointed at (``XDG_STATE_HOME``), never in the user's.

A page stays cold (a control plane of its own, as before) when it uses what a shared plane
cannot give (:func:`own_plane_reasons`): settings that shape the control plane, the embedded
``control_plane`` fixture or an upgrade, or a CRD another page defines differently (CRDs stay
installed on a shared plane, and a re-applied schema takes effect some time after the
install returns).

A child whose tests passed may still be finishing (waiting for its namespaces' deletion) while
the next page runs: the plane waits for it and checks how it ended before it stops
(:func:`finish_children`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from docs_blocks import ROOT, pages
from docs_runner import PYTHON, PageRun, page_blocks

from ktest.backends.bare.backend import BareBackend
from ktest.backends.bare.reuse import DEFAULT_NAME, UpRecord, record_path, state_directory, write_record
from ktest.base.procfs import process_start_time
from ktest.config import DEFAULT_CONTROLLERS
from ktest.controlplane import ControlPlane
from ktest.sessions.shared import ClusterServer

PLANE_SETTINGS = (
    "apiserver_flags", "feature_gates", "controllers", "backend", "k8s_version", "reuse", "nodes"
)
"""Settings that shape or choose the control plane: a page setting one needs a plane of its own."""
EMBEDDED_PLANE = re.compile(r"\b(control_plane|control_plane_upgrade|ktest_upgrade)\b")
"""Fixtures and markers that need the control plane in the child's process, or one per test."""
ATTACHED = "warm control plane"
"""How a child session's header names the backend when it attached (see reuse.attach)."""


def _setting_forms(name: str) -> tuple[str, ...]:
    return (f"ktest_{name}", f"--ktest-{name.replace('_', '-')}", f"KTEST_{name.upper()}")


def own_plane_reasons(page: Path) -> list[str]:
    """Why ``page``'s examples need a control plane of their own ([] when they can share one)."""
    # What the child session runs and reads: the page's Python and its files (not its shell lines).
    project = [block for block in page_blocks(page, None) if block.language in PYTHON or block.file]
    text = "\n".join(block.text for block in project)
    reasons = [f"sets {form}" for name in PLANE_SETTINGS for form in _setting_forms(name)
               if re.search(rf"(?<![\w-]){re.escape(form)}\b", text)]
    reasons += [f"uses {word}" for word in sorted(set(EMBEDDED_PLANE.findall(text)))]
    first = _first_definitions()
    for name, definition in sorted(_crds(page).items()):
        first_page, first_definition = first.get(name, (page, definition))
        if first_page != page and first_definition != definition:
            reasons.append(f"defines CRD {name} unlike {first_page.relative_to(ROOT)}")
    return reasons


@cache
def _first_definitions() -> dict[str, tuple[Path, Any]]:
    """Each CRD name's definition on the first page (in run order) that defines it."""
    first: dict[str, tuple[Path, Any]] = {}
    for page in pages():
        for name, definition in _crds(page).items():
            first.setdefault(name, (page, definition))
    return first


def _crds(page: Path) -> dict[str, Any]:
    """The CustomResourceDefinitions the page's project holds (its YAML files and linked
    directories), by name: their specs, as the API server would get them."""
    texts: list[str] = []
    for block in page_blocks(page, None):
        if block.language in ("yaml", "yml") and block.file:
            texts.append(block.text)
        for _, path in (*block.links, *block.copies):
            target = ROOT / path
            files = [target] if target.is_file() else [*target.rglob("*.yaml"), *target.rglob("*.yml")]
            texts += [file.read_text() for file in sorted(files) if file.suffix in (".yaml", ".yml")]
    found: dict[str, Any] = {}
    for text in texts:
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            continue  # a template, not a manifest: the page's own run reports what is wrong
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                found[str(document.get("metadata", {}).get("name"))] = document.get("spec")
    return found


@dataclasses.dataclass(frozen=True)
class WarmPlane:
    """The environment that makes a child session attach to the warm plane, and the children
    whose tests passed that still finish (their namespaces' deletion), checked before it stops."""

    env: dict[str, str]
    description: str
    finishing: list[PageRun] = dataclasses.field(default_factory=list)


def finish_children(warm: WarmPlane) -> None:
    """Wait for the children still finishing; fail naming each whose session did not end well."""
    failures = []
    for run in warm.finishing:
        try:
            run.finish()
        except AssertionError as error:
            failures.append(str(error))
    warm.finishing.clear()
    assert not failures, "after their tests passed:\n" + "\n\n".join(failures)


def warm_plane(state_home: Path, k8s_version: str | None) -> Iterator[WarmPlane]:
    """Start a control plane, record it for reuse under ``state_home``; stop it when resumed.

    The record is what ``ktest up``'s daemon writes, with this process as its holder:
    children with ``KTEST_REUSE=1`` and ``XDG_STATE_HOME=state_home`` find it compatible
    (same Kubernetes version selector, the default controllers) and attach."""
    plane = ControlPlane(k8s_version, controllers=DEFAULT_CONTROLLERS)
    plane.start()
    try:
        # Children installing new CRDs ask through this socket to restart the controllers.
        server = ClusterServer(lambda: BareBackend(plane))
        try:
            share = server.open()
            env = {"XDG_STATE_HOME": str(state_home), "KTEST_REUSE": "1"}
            path = record_path(DEFAULT_NAME, state_directory(env))
            pid = os.getpid()
            write_record(UpRecord(
                name=DEFAULT_NAME,
                pid=pid,
                pid_start=process_start_time(pid) or "",
                requested_version=k8s_version,
                controllers=DEFAULT_CONTROLLERS,
                started_at=time.time(),
                share=dataclasses.replace(share, description=f"Kubernetes {plane.version} at {plane.server}"),
                path=path,
            ))
            warm = WarmPlane(env, f"Kubernetes {plane.version} at {plane.server}")
            try:
                yield warm
            finally:
                try:
                    finish_children(warm)
                finally:
                    path.unlink(missing_ok=True)
        finally:
            server.close()
    finally:
        plane.stop()
