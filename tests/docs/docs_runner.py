"""A page's code blocks as a project, run by a child pytest session with ktest's plugin.

Shared by the bare run (tests/docs/test_docs_examples.py: every block without a backend)
and the kind layer (tests/on_kind/test_docs_kind_examples.py: the blocks marked
``backend=kind``, on the kind layer's own cluster).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import symtable
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from docs_blocks import ROOT, Block, blocks
from docs_child_progress import PROGRESS_ENV

PYTHON = ("python", "py", "python3")
CHILD_TIMEOUT = 1500
CHILD_ENV_DROPPED = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                     "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


def page_blocks(page: Path, backend: str | None) -> list[Block]:
    """The blocks of ``page`` a run on ``backend`` executes (None: those that need no backend)."""
    return [block for block in blocks(page) if block.skip is None and block.backend == backend]


def write_project(page: Path, project: Path, backend: str | None) -> dict[str, Block]:
    """Write the page's files for ``backend`` into ``project``; return its test modules by name."""
    project.mkdir(parents=True, exist_ok=True)
    tests: dict[str, Block] = {}
    for block in page_blocks(page, backend):
        for name, path in block.copies:
            source = ROOT / path
            if source.is_dir():
                ignore = shutil.ignore_patterns("__pycache__", ".ktest-artifacts")
                shutil.copytree(source, project / name, dirs_exist_ok=True, ignore=ignore)
            else:
                (project / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, project / name)
        for name, path in block.links:
            link = project / name
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(ROOT / path)
        if block.language in PYTHON:
            name = _python_file(block)
            _write(project, name, block if name == block.file else _as_test(block))
            if Path(name).name.startswith("test_"):
                tests[Path(name).stem] = block
        elif block.file:
            _write(project, block.file, block)
    return tests


def run_page(page: Path, project: Path, pytestconfig: pytest.Config, **options: Any) -> str:
    """Run the page's tests in a child session (``options`` as :func:`start_page` takes them);
    fail with its output unless all pass. Returns the output ("" when the page has no tests)."""
    run = start_page(page, project, pytestconfig, **options)
    return run.finish() if run is not None else ""


def start_page(
    page: Path,
    project: Path,
    pytestconfig: pytest.Config,
    *,
    backend: str | None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> PageRun | None:
    """Start the page's tests for ``backend`` in a child session (None: the page has none)."""
    tests = write_project(page, project, backend)
    if not tests:
        return None
    if not any((project / name).exists() for name in ("pytest.ini", "pyproject.toml", "setup.cfg")):
        (project / "pytest.ini").write_text("[pytest]\n")
    files = ", ".join(f"{name} = {block.where}" for name, block in tests.items())
    where = str(page.relative_to(ROOT)) + (f" (backend {backend})" if backend else "")
    output = project.parent / "child-output"
    output.mkdir(exist_ok=True)
    progress = output / "progress.json"
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    extra = {**(env or {}), PROGRESS_ENV: str(progress), "PYTHONPATH": path}
    stdout, stderr = (open(output / name, "w") for name in ("stdout", "stderr"))  # noqa: SIM115
    with stdout, stderr:
        process = start_child_pytest(project, pytestconfig, ["-p", "docs_child_progress", *args], extra,
                                     stdout=stdout, stderr=stderr)
    return PageRun(where, files, process, output, progress)


def excerpt(stdout: str, part: int = 4000) -> str:
    """What a failure shows of a child's output: the start of its FAILURES section (where the
    assertion's message is; the report sections after it are long) and the end (the summary)."""
    failures = stdout.find("= FAILURES =")
    if failures < 0 or len(stdout) - failures <= 2 * part:
        return stdout[-2 * part:]
    head = stdout[stdout.rfind("\n", 0, failures) + 1:][:part]
    return f"{head}\n[...]\n{stdout[-part:]}"


@dataclasses.dataclass
class PageRun:
    """A page's child session, started; :meth:`finish` waits for it and checks its outcome.

    :meth:`tests_passed` may tell earlier: once the child's tests have all passed and it only
    waits for its test namespaces' deletion (about 5 s, see docs_child_progress), the docs
    session can go on with its next page and :meth:`finish` this one later."""

    where: str
    files: str
    process: subprocess.Popen[str]
    output: Path
    progress_file: Path
    started: float = dataclasses.field(default_factory=time.monotonic)

    def tests_passed(self) -> dict[str, Any] | None:
        """Wait until the child has exited or says how its tests went; what it said if every
        collected test passed (None otherwise: :meth:`finish` shows what went wrong)."""
        deadline = self.started + CHILD_TIMEOUT
        while not self.progress_file.exists() and self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # a child session's file, not readiness of anything this test waits on
        if not self.progress_file.exists():
            return None
        progress: dict[str, Any] = json.loads(self.progress_file.read_text())
        passed = progress["outcomes"] == {"passed": progress["collected"]} and progress["collected"] > 0
        return progress if passed else None

    def finish(self) -> str:
        """Wait for the child to exit; fail with its output unless its tests all passed."""
        try:
            self.process.wait(timeout=max(1.0, self.started + CHILD_TIMEOUT - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        stdout = (self.output / "stdout").read_text()
        stderr = (self.output / "stderr").read_text()
        shown = f"{self.files}\n{excerpt(stdout)}"
        failed = f"the examples of {self.where} failed:\n{shown}\n{stderr[-2000:]}"
        assert self.process.returncode == 0, failed
        assert not re.search(r"\d+ skipped", stdout), f"an example was skipped, not run:\n{shown}"
        assert re.search(r"\d+ passed", stdout), shown
        return stdout


def _python_file(block: Block) -> str:
    if block.file:
        return block.file
    if re.search(r"^(async )?def test_", block.text, re.MULTILINE):
        return f"test_docs_line_{block.line:04d}.py"
    return f"test_docs_line_{block.line:04d}_snippet.py"


SNIPPET_FIXTURES = ("cluster", "namespace")
"""The plugin's fixtures a snippet may use without defining them."""


def _as_test(block: Block) -> Block:
    """A block that is no test file by itself: as is if it defines tests, else the body of a test
    that gets those of the plugin's ``cluster`` and ``namespace`` it uses (a snippet that starts
    its own ControlPlane asks for neither, so its child session starts no plane for them)."""
    compile(block.text, block.where, "exec")  # a syntax error names the page and line
    if re.search(r"^(async )?def test_", block.text, re.MULTILINE):
        return block
    body = textwrap.indent(block.text, "    ")
    used = _free_names(f"def test_snippet():\n{body}", block.where)
    fixtures = ", ".join(name for name in SNIPPET_FIXTURES if name in used)
    text = f"# {block.where}\ndef test_snippet({fixtures}):\n{body}"
    return Block(block.page, block.line, block.language, text)


def _free_names(source: str, where: str) -> set[str]:
    """The names the code of ``source`` reads without assigning them (globals), nested scopes too."""
    names: set[str] = set()
    tables = symtable.symtable(source, where, "exec").get_children()
    while tables:
        table = tables.pop()
        names |= {symbol.get_name() for symbol in table.get_symbols() if symbol.is_global()}
        tables += table.get_children()
    return names


def _write(project: Path, name: str, block: Block) -> None:
    target = project / name
    assert project.resolve() in target.resolve().parents, f"{block.where}: file={name} leaves the project"
    target.parent.mkdir(parents=True, exist_ok=True)
    if block.language in PYTHON:
        compile(block.text, block.where, "exec")
    target.write_text(block.text)


def start_child_pytest(
    project: Path,
    pytestconfig: pytest.Config,
    args: Sequence[str],
    extra_env: Mapping[str, str],
    **popen: Any,
) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key not in CHILD_ENV_DROPPED}
    # The pages' eventually() keep the default timeout a reader gets (10 s) on a reader's machine;
    # beside make test's other workers an operator's start alone can take longer.
    env.setdefault("KTEST_TIMEOUT", "30")
    env.update(extra_env or {})
    if any(not path.parent.is_symlink() for path in project.glob("*/go.mod")):
        # A page's go.mod comes without go.sum: -mod=mod fills it in, as the page's `go mod tidy` does
        # (a linked module of the repository has its go.sum, and is never rewritten).
        env["GOFLAGS"] = f"{env.get('GOFLAGS', '')} -mod=mod".strip()
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", *args]
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    if version:
        command += ["--ktest-k8s-version", str(version)]
    return subprocess.Popen(command, cwd=project, env=env, text=True, stdin=subprocess.DEVNULL, **popen)
