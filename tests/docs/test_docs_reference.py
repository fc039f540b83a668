"""The documentation site builds strictly, and its reference has an entry for every public name,
fixture, setting, marker and command, written from the code (docs/hooks.py).

The site is built once per module (as ``mkdocs build --strict``, what ``make docs`` runs); the
checks read the built HTML, so an entry counts only if it reached the page.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from docs_blocks import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import hooks

# One site build per run: with `pytest -n N --dist loadgroup` (make test) the module's tests stay on
# one worker, where the module-scoped site is built once, instead of once on every worker.
pytestmark = pytest.mark.xdist_group("docs-site")


# The site build, as `mkdocs build --strict` (make docs) runs it; then it prints the fixtures its hooks
# read from real pytest sessions (bare, kind) for the fixtures page: ``hooks.fixtures()`` is cached, so
# listing them again starts no second child session.
BUILD = """
import json, sys
from mkdocs.__main__ import cli
cli.main(["build", "--strict", "--site-dir", sys.argv[1]], standalone_mode=False)
print("KTEST-FIXTURES " + json.dumps(sys.modules["docs/hooks.py"].fixtures()))
"""


@dataclass(frozen=True)
class Built:
    site: Path
    fixtures: dict[str, dict[str, str]]
    """``hooks.fixtures()``: every fixture ktest's plugin defines, as the fixtures page lists them."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # The docs extra (part of dev) brings MkDocs; a packager testing the sdist may not install it.
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install 'ktest[docs]')")
    target = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-c", BUILD, str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-8000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("KTEST-FIXTURES ")]
    assert lines, f"the build printed no fixtures:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return Built(target, json.loads(lines[-1].split(" ", 1)[1]))


@pytest.fixture(scope="module")
def site(built: Built) -> Path:
    return built.site


# In an interpreter of its own: what earlier tests of this process imported (lazy public packages,
# add-ons) must not change the pages written from the code. The fixtures page is written
# from the fixtures the site build listed: a child process of its own listed them, so what the
# listing interpreter had imported does not matter.
REFERENCE_CHECK = """
import json, sys
sys.path.insert(0, "scripts")
import reference_pages
fixtures = json.loads(sys.stdin.read())
reference_pages.hooks.fixtures = lambda: fixtures
stale = [str(path) for path in reference_pages.stale_pages(other_python=False)]
print("KTEST-REFERENCE " + json.dumps(stale))
"""


@dataclass(frozen=True)
class ReferenceCheck:
    stale: list[Path]
    """The reference pages whose committed Markdown is out of date with the code."""
    fixtures: dict[str, dict[str, str]]
    """``hooks.fixtures()``: every fixture ktest's plugin defines, as the fixtures page lists them."""


@pytest.fixture(scope="module")
def reference_check(built: Built) -> ReferenceCheck:
    result = subprocess.run(
        [sys.executable, "-c", REFERENCE_CHECK], cwd=ROOT, capture_output=True, text=True, check=True,
        input=json.dumps(built.fixtures),
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("KTEST-REFERENCE ")]
    assert lines, f"the check printed no result:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    stale = json.loads(lines[-1].split(" ", 1)[1])
    return ReferenceCheck([Path(path) for path in stale], built.fixtures)


def _ids(page: Path) -> set[str]:
    return {html.unescape(found) for found in re.findall(r'id="([^"]+)"', page.read_text())}


def _missing(site: Path, page: str, wanted: list[str]) -> list[str]:
    ids = _ids(site / page / "index.html")
    return [name for name in wanted if name not in ids]


def test_every_public_name_has_an_api_entry(site: Path) -> None:
    wanted = [hooks.anchor(f"{module}.{name}") for module, name in hooks.public_names()]
    assert len(wanted) > 150
    assert not _missing(site, "reference/api", wanted)
    # mkdocstrings rendered the docstrings and signatures (not just the headings)
    text = (site / "reference/api/index.html").read_text()
    assert "Run kopf handlers" in text  # run_kopf's docstring
    assert text.count('class="doc-signature') > 100


def _fixtures_pytest_lists(pytester: pytest.Pytester) -> set[str]:
    """ktest's public fixtures as ``pytest --fixtures -v`` lists them (a second source, by location),
    from a session in this process: its plugins load from their entry points as in a fresh one."""
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess(
        "--fixtures", "-v", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    stdout = result.stdout.str()
    found = re.findall(r"^([a-z]\w*)(?: \[\w+ scope\])? -- \S*ktest/\S+$", stdout, re.MULTILINE)
    return set(found)


def test_every_fixture_has_an_entry(
    site: Path, reference_check: ReferenceCheck, pytester: pytest.Pytester
) -> None:
    fixtures = reference_check.fixtures
    assert {"cluster", "namespace", "control_plane", "webhooks", "kind", "ktest_settings"} <= set(fixtures)
    listed = _fixtures_pytest_lists(pytester)
    assert len(listed) >= 9 and listed <= set(fixtures), listed - set(fixtures)
    assert not _missing(site, "reference/fixtures", [hooks.anchor("fixture-" + name) for name in fixtures])


def test_every_setting_has_an_entry_with_its_option_ini_key_and_variable(site: Path) -> None:
    from ktest.config import SETTINGS

    page = site / "reference/settings/index.html"
    # ktest's own rows and the backends' (kind's, the nodes add-on's): both must reach the page
    assert {"k8s_version", "timeline", "kind_image", "nodes"} <= {spec.name for spec in SETTINGS}
    wanted = [hooks.anchor("setting-" + spec.name) for spec in SETTINGS]
    assert not _missing(site, "reference/settings", wanted)
    text = html.unescape(page.read_text())
    for spec in SETTINGS:
        assert spec.option in text and spec.ini in text and spec.env in text, spec.name


def test_every_marker_has_an_entry(site: Path) -> None:
    names = [signature.split("(", 1)[0] for signature, _ in hooks.markers()]
    assert {"ktest_nodes", "ktest_min_k8s"} <= set(names)
    assert not _missing(site, "reference/markers", [hooks.anchor("marker-" + name) for name in names])


def test_every_command_has_an_entry(site: Path) -> None:
    commands = [command for command, _ in hooks.commands()]
    some = {"ktest binaries install", "ktest up", "ktest init github-actions", "ktest kind build-image"}
    assert some <= set(commands)
    assert not _missing(site, "reference/cli", [hooks.anchor("cli-" + command) for command in commands])


def test_every_assertion_is_in_the_assertions_table(site: Path) -> None:
    from ktest import public_api

    text = (site / "reference/assertions/index.html").read_text()
    assert {"assert_survives_concurrent_writes", "assert_quiescent"} <= set(public_api.ASSERTIONS)
    for name in public_api.ASSERTIONS:
        assert f"#{hooks.anchor('ktest.assertions.' + name)}" in text, name


def test_every_supported_minor_is_in_the_versions_table(site: Path) -> None:
    from ktest.assets import minors

    text = (site / "reference/versions/index.html").read_text()
    assert {minors.DEFAULT_MINOR, minors.OLDER_MINOR} <= set(minors.MINORS)
    for minor, facts in minors.MINORS.items():
        row = f"<td>{minor}</td>"
        assert row in text, minor
        cells = text.split(row, 1)[1].split("</tr>", 1)[0]
        assert f"<td>{facts.etcd}</td>" in cells and f"<td>{facts.checked_patch}</td>" in cells, minor


def test_the_reference_pages_read_on_github_as_the_code_says(
    site: Path, reference_check: ReferenceCheck
) -> None:
    """Each page carries its reference as plain Markdown (for GitHub, where nothing is built),
    as ``make reference`` writes it from the code now; the site shows it once, written anew."""
    stale = reference_check.stale  # checked in an interpreter of its own (REFERENCE_CHECK)
    assert not stale, (
        f"{', '.join(str(path.relative_to(ROOT)) for path in stale)} out of date with the code: "
        "run `make reference` (python scripts/reference_pages.py) and commit the pages"
    )
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        text = page.read_text()
        for name in re.findall(r"<!-- ktest-reference: ([a-z-]+) -->", text):
            committed = text.split(f"<!-- ktest-reference: {name} -->", 1)[1]
            assert f"<!-- ktest-reference-end: {name} -->" in committed, f"{page.name}: {name} has no text"
            assert committed.split(f"<!-- ktest-reference-end: {name} -->", 1)[0].count("\n") > 5
    settings = (site / "reference/settings/index.html").read_text()
    assert settings.count('id="setting-timeline"') == 1, "the site shows the committed copy too"
    fixtures = (ROOT / "docs/reference/fixtures.md").read_text()
    assert "## `cluster`" in fixtures and "{ #" not in fixtures  # no MkDocs attribute list on GitHub
    api = (ROOT / "docs/reference/api.md").read_text()
    assert "### `ktest.operators.operator_identity`" in api and "def operator_identity(" in api


def test_an_unknown_placeholder_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"unknown reference placeholder .*known: api, settings"):
        hooks.render("<!-- ktest-reference: nonsense -->")


def test_the_readme_links_only_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the front door stays at most 200"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local
    assert not [link for link in local if not (ROOT / link).exists()], "README links to missing files"


def test_the_readme_first_screen_shows_the_contributor_commands_and_a_first_test() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen
    first_60 = "\n".join(lines[:60])
    assert "def test_" in first_60, "a first copyable test within the first 60 lines"
