"""A backend from another package plugs in through one entry point: ``ktest-toy``
(tests/plugin_backend/ktest_toy) is installed with pip, for real, and then a pytest session runs
on it, its own setting resolves like ktest's and the ``ktest`` command offers its verb; no file
of ktest names it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

from ktest import backend_registry
from ktest.public_api import PUBLIC

TOY = Path(__file__).resolve().parent / "ktest_toy"

TOY_TEST = """
def test_on_the_toy_backend(cluster, namespace, ktest_settings):
    print("BACKEND", ktest_settings.backend, "BANNER", ktest_settings.toy_banner)
    made = cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                          namespace=namespace)
    assert made["metadata"]["namespace"] == namespace


def test_pytest_help_offers_its_option():
    # `pytest --help`, run by pytest.main in this interpreter: the toy is installed here as for the
    # session (no fresh one needed), and its options come from the same hooks as in a fresh one.
    import pytest
    assert pytest.main(["--help", "-p", "no:cacheprovider"]) == 0
"""


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory holding ktest-toy as an installer leaves it: the package, and a
    ``ktest_toy-<version>.dist-info`` with its METADATA and the ``entry_points.txt`` written from
    its pyproject.toml, so ``importlib.metadata`` finds the entry point on ``PYTHONPATH``. (pip
    would write the same, but building the wheel needs setuptools' ``wheel`` from the network.)"""
    project = tomllib.loads((TOY / "pyproject.toml").read_text())["project"]
    site = tmp_path_factory.mktemp("toy-site")
    shutil.copytree(TOY / "src" / "ktest_toy", site / "ktest_toy")
    dist_info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    groups = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
        for group, entries in project["entry-points"].items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(groups))
    return site


def _with_toy(toy_site: Path, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("KTEST_TOY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(toy_site), env.get("PYTHONPATH")]))
    return {**env, **extra}


@pytest.fixture
def toy_installed(toy_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """ktest-toy importable and its entry points found in this process, as in a user's run where it
    is installed: a new pytest config loads every plugin from its entry point, as a child would. The
    backends found are cached (``backend_registry.backends``): forgotten before and after."""
    monkeypatch.syspath_prepend(str(toy_site))
    backend_registry.backends.cache_clear()
    yield
    backend_registry.backends.cache_clear()


def test_a_pytest_session_runs_on_a_backend_installed_from_another_package(
    toy_installed: None, pytester: pytest.Pytester, inner_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_TOY_BANNER", "hello from the toy")
    pytester.makepyfile(TOY_TEST)
    result = pytester.runpytest_inprocess("-s", "--ktest-backend", "toy")
    result.assert_outcomes(passed=2)  # the session on the toy, and `pytest --help` beside it
    result.stdout.fnmatch_lines([
        "ktest: backend=toy *",
        "*toy_banner=hello from the toy (environment variable KTEST_TOY_BANNER)*",
        "*BACKEND toy BANNER hello from the toy",
        "*toy backend says: hello from the toy*",
    ])
    # pytest's own --help offers the backend's option (printed by the second inner test, with -s)
    assert "--ktest-toy-banner=TEXT" in result.stdout.str()


def test_its_own_setting_is_checked_like_any_other(
    toy_installed: None, pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    """The backend's ``check`` part runs with the settings: its error names the setting's source."""
    pytester.makepyfile(TOY_TEST)
    pytester.makeini("[pytest]\nktest_toy_banner =\n    two\n    lines\n")
    result = pytester.runpytest_inprocess("--ktest-backend", "toy")
    result.stdout.fnmatch_lines(["*ini key ktest_toy_banner: the toy banner must be one line*"])
    assert result.ret != 0


@pytest.mark.slow
def test_the_ktest_command_offers_its_verb_and_backend(toy_site: Path) -> None:
    def ktest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ktest", *args], env=_with_toy(toy_site, **env),
                              capture_output=True, text=True, timeout=120, check=False)

    usage = ktest("--help")
    assert usage.returncode == 0, usage.stderr
    assert "show the banner backend toy says" in usage.stdout
    said = ktest("toy", KTEST_TOY_BANNER="hi")
    assert (said.returncode, said.stdout) == (0, "toy banner: hi\n"), said.stderr
    up = ktest("up", "--help")
    assert "registered by the ktest-toy package" not in up.stdout  # it has no ``up`` part
    # (pytest's --help offering --ktest-toy-banner: in the session of the first test, beside it)


def non_public_imports(package: Path) -> list[str]:
    """Every import of ktest in ``package``'s modules that is not a public name (``ktest.public_api``)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(package)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ktest":
                found += [
                    f"{where}: from {node.module} import {alias.name}"
                    for alias in node.names if alias.name not in PUBLIC.get(node.module or "", ())
                ]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names if alias.name.split(".")[0] == "ktest"]
                found += [f"{where}: import {module}" for module in modules if module not in PUBLIC]
    return found


def test_the_toy_imports_only_public_names() -> None:
    """A backend from another package is promised only ktest's public names (``ktest.extension``,
    the door for backend authors, and the rest of ``ktest.public_api``): the toy, written as a
    user would write one, imports nothing else, so what it needs is in the door."""
    assert non_public_imports(TOY / "src") == []


def test_the_public_import_check_sees_every_form(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "import ktest\nimport ktest.config\nfrom ktest.extension import BackendSpec, Settings\n"
        "from ktest.config import Settings\ndef f():\n    from ktest.sessions.backend import Backend\n"
    )
    assert non_public_imports(tmp_path) == [
        "mine.py:2: import ktest.config",
        "mine.py:4: from ktest.config import Settings",
        "mine.py:6: from ktest.sessions.backend import Backend",
    ]


def test_a_broken_backend_entry_point_is_named_with_its_package(toy_site: Path, tmp_path: Path) -> None:
    """An entry point in the group that names something else than a BackendSpec is an error naming
    the entry point and the package to fix or uninstall, never silently skipped."""
    broken = tmp_path / "ktest_broken-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: ktest-broken\nVersion: 1.0\n")
    (broken / "entry_points.txt").write_text("[ktest.backends]\nbroken = ktest_toy.settings:ROWS\n")
    env = _with_toy(toy_site)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    run = subprocess.run([sys.executable, "-m", "ktest", "status"], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        "ktest: error: entry point broken = ktest_toy.settings:ROWS (group ktest.backends) of ktest-broken "
        "names a tuple, not a ktest.extension.BackendSpec; fix it, or uninstall ktest-broken\n"
    )
