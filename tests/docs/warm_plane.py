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
install returns). Two settings in a page's ``pytest.ini`` a warm plane can match (:func:`plane_asked`),
as ``ktest up`` would: ``ktest_nodes = N`` (a second warm plane with N simulated nodes, started on
the first page asking for it) and ``ktest_controllers`` naming the default controllers, by their
short or long names (reuse matches either).

A child whose tests passed may still be finishing (waiting for its namespaces' deletion) while
the next page runs: the plane waits for it and checks how it ended before it stops
(:func:`finish_children`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from docs_blocks import ROOT, Block, pages
from docs_runner import PYTHON, PageRun, page_blocks
from warm_planes import WarmPlane, shared_for_reuse

from ktest.config import DEFAULT_CONTROLLERS
from ktest.controller_names import short_name
from ktest.controlplane import ControlPlane

PLANE_SETTINGS = (
    "apiserver_flags", "feature_gates", "controllers", "backend", "k8s_version", "reuse", "nodes"
)
"""Settings that shape or choose the control plane: a page setting one needs a plane of its own."""
EMBEDDED_PLANE = re.compile(r"\b(control_plane|control_plane_upgrade|ktest_upgrade)\b")
"""Fixtures and markers that need the control plane in the child's process, or one per test."""


def _setting_forms(name: str) -> tuple[str, ...]:
    return (f"ktest_{name}", f"--ktest-{name.replace('_', '-')}", f"KTEST_{name.upper()}")


INI_SETTING = re.compile(
    r"^[ \t]*(?P<key>ktest_nodes|ktest_controllers)[ \t]*=[ \t]*(?P<value>[\w, -]*?)[ \t]*$", re.MULTILINE
)
"""A ``pytest.ini`` line a warm plane can match (one line: a continued value is left to the page)."""


@dataclasses.dataclass(frozen=True)
class PlaneAsked:
    """What a page's ``pytest.ini`` asks of the plane that a warm one can give."""

    nodes: int = 0


def _ini_blocks(page: Path) -> list[Block]:
    return [block for block in page_blocks(page, None)
            if block.language in ("ini", "cfg") and Path(block.file or "").name == "pytest.ini"]


def _matchable(key: str, value: str) -> bool:
    if key == "ktest_nodes":
        return value.isdigit()
    names = [name.strip() for name in value.split(",") if name.strip()]
    return len(set(names)) == len(names) and sorted(map(short_name, names)) == sorted(DEFAULT_CONTROLLERS)


def _unless_matchable(found: re.Match[str]) -> str:
    return "" if _matchable(found["key"], found["value"]) else found[0]


def plane_asked(page: Path) -> PlaneAsked:
    """The simulated nodes the page's ``pytest.ini`` asks for, where a warm plane can give them
    (what it asks otherwise, :func:`own_plane_reasons` says; the default controllers, however
    spelt, any warm plane gives)."""
    asked = PlaneAsked()
    for block in _ini_blocks(page):
        for found in INI_SETTING.finditer(block.text):
            if found["key"] == "ktest_nodes" and _matchable(found["key"], found["value"]):
                asked = PlaneAsked(nodes=int(found["value"]))
    return asked


def own_plane_reasons(page: Path) -> list[str]:
    """Why ``page``'s examples need a control plane of their own ([] when they can share one)."""
    # What the child session runs and reads: the page's Python and its files (not its shell lines),
    # without the ini lines a warm plane matches (plane_asked).
    project = [block for block in page_blocks(page, None) if block.language in PYTHON or block.file]
    ini = _ini_blocks(page)
    text = "\n".join(INI_SETTING.sub(_unless_matchable, block.text) if block in ini else block.text
                     for block in project)
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
class DocsWarmPlane:
    """The warm plane (tests/warm_planes.py) and the children whose tests passed that still finish
    (their namespaces' deletion), checked before it stops."""

    plane: WarmPlane
    finishing: list[PageRun] = dataclasses.field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return self.plane.env

    @property
    def description(self) -> str:
        return self.plane.description


def finish_children(warm: DocsWarmPlane) -> None:
    """Wait for the children still finishing; fail naming each whose session did not end well."""
    failures = []
    for run in warm.finishing:
        try:
            run.finish()
        except AssertionError as error:
            failures.append(str(error))
    warm.finishing.clear()
    assert not failures, "after their tests passed:\n" + "\n\n".join(failures)


@contextmanager
def _finishing(plane: WarmPlane) -> Iterator[DocsWarmPlane]:
    """``plane`` for the pages; on exit, the children still finishing are checked."""
    warm = DocsWarmPlane(plane)
    try:
        yield warm
    finally:
        finish_children(warm)


class DocsWarmPlanes:
    """The docs session's warm planes, each started on the first page asking for it: one for each
    number of simulated nodes. Each record lives in a state directory of its own (``state_home()``),
    so a child sees only the one it is pointed at; each plane's children still finishing are checked
    before it stops."""

    def __init__(self, state_home: Callable[[], Path], k8s_version: str | None) -> None:
        self._state_home = state_home
        self._k8s_version = k8s_version
        self._stack = ExitStack()
        self._shared: dict[PlaneAsked, DocsWarmPlane] = {}

    def get(self, asked: PlaneAsked = PlaneAsked()) -> DocsWarmPlane:
        """The warm plane recorded as ``asked``: started now if no page asked before."""
        if asked not in self._shared:
            plane = self._stack.enter_context(ControlPlane(
                self._k8s_version, controllers=DEFAULT_CONTROLLERS, nodes=asked.nodes))
            record = shared_for_reuse(plane, self._state_home(), self._k8s_version, nodes=asked.nodes)
            shared = self._stack.enter_context(record)
            self._shared[asked] = self._stack.enter_context(_finishing(shared))
        return self._shared[asked]

    def close(self) -> None:
        """Check the children still finishing, then remove the records and stop the planes."""
        self._stack.close()
