"""A page's code blocks as a project, run by a child pytest session with ktest's plugin.

Shared by the bare run (tests/docs/test_docs_examples.py: every block without a backend)
and the kind layer (tests/kind_backend/test_docs_kind_examples.py: the blocks marked
``backend=kind``, on the kind layer's own cluster).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from docs_blocks import ROOT, Block, blocks

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


def run_page(
    page: Path,
    project: Path,
    pytestconfig: pytest.Config,
    *,
    backend: str | None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> str:
    """Run the page's tests for ``backend`` in a child session; fail with its output unless all pass.

    Returns the child's output ("" when the page has no tests for ``backend``)."""
    tests = write_project(page, project, backend)
    if not tests:
        return ""
    if not any((project / name).exists() for name in ("pytest.ini", "pyproject.toml", "setup.cfg")):
        (project / "pytest.ini").write_text("[pytest]\n")
    result = run_child_pytest(project, pytestconfig, args, env)
    files = ", ".join(f"{name} = {block.where}" for name, block in tests.items())
    shown = f"{files}\n{result.stdout[-6000:]}"
    where = str(page.relative_to(ROOT)) + (f" (backend {backend})" if backend else "")
    assert result.returncode == 0, f"the examples of {where} failed:\n{shown}\n{result.stderr[-2000:]}"
    assert not re.search(r"\d+ skipped", result.stdout), f"an example was skipped, not run:\n{shown}"
    assert re.search(r"\d+ passed", result.stdout), shown
    return result.stdout


def _python_file(block: Block) -> str:
    if block.file:
        return block.file
    if re.search(r"^(async )?def test_", block.text, re.MULTILINE):
        return f"test_docs_line_{block.line:04d}.py"
    return f"test_docs_line_{block.line:04d}_snippet.py"


def _as_test(block: Block) -> Block:
    """A block that is no test file by itself: as is if it defines tests, else the body of a test
    that gets the plugin's ``cluster`` and ``namespace``."""
    compile(block.text, block.where, "exec")  # a syntax error names the page and line
    if re.search(r"^(async )?def test_", block.text, re.MULTILINE):
        return block
    body = textwrap.indent(block.text, "    ")
    text = f"# {block.where}\ndef test_snippet(cluster, namespace):\n{body}"
    return Block(block.page, block.line, block.language, text)


def _write(project: Path, name: str, block: Block) -> None:
    target = project / name
    assert project.resolve() in target.resolve().parents, f"{block.where}: file={name} leaves the project"
    target.parent.mkdir(parents=True, exist_ok=True)
    if block.language in PYTHON:
        compile(block.text, block.where, "exec")
    target.write_text(block.text)


def run_child_pytest(
    project: Path,
    pytestconfig: pytest.Config,
    args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in CHILD_ENV_DROPPED}
    env.update(extra_env or {})
    if any(not path.parent.is_symlink() for path in project.glob("*/go.mod")):
        # A page's go.mod comes without go.sum: -mod=mod fills it in, as the page's `go mod tidy` does
        # (a linked module of the repository has its go.sum, and is never rewritten).
        env["GOFLAGS"] = f"{env.get('GOFLAGS', '')} -mod=mod".strip()
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args]
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    if version:
        command += ["--ktest-k8s-version", str(version)]
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
    )
