"""Every code block of README.md and docs/**/*.md runs, so the docs are tests.

Each page is a project (``docs_blocks`` says how a block becomes a file of it): its Python
runs in one child pytest session with ktest's plugin against a real control plane, as a user
would run it; its ini/toml/yaml/json blocks must parse; its shell blocks may only name
``ktest`` commands and options, pytest options, extras and make targets that exist.

Own extraction rather than sybil or pytest-examples: a page's blocks work together (an
operator module, its test file and the ini beside them, run by pytest with the plugin as a
user's project is), which those run block by block in the test process; finding fenced
blocks and the comment before each is a few lines (``docs_blocks``).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from docs_blocks import ROOT, Block, blocks, pages

sys.path.insert(0, str(ROOT / "docs"))
import hooks

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

PYTHON = ("python", "py", "python3")
SHELL = ("sh", "bash", "shell", "console")
CHILD_TIMEOUT = 1500
CHILD_ENV_DROPPED = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                     "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# A page's child session may build a Go manager from empty caches: many minutes on 2 busy cores.
@pytest.mark.timeout(CHILD_TIMEOUT + 120)
@pytest.mark.parametrize("page", pages(), ids=_page_id)
def test_page_examples_run(page: Path, tmp_path: Path, pytestconfig: pytest.Config) -> None:
    project = tmp_path / "project"
    project.mkdir()
    tests: dict[str, Block] = {}
    for block in blocks(page):
        if block.skip is not None:
            continue
        if block.language in PYTHON:
            name = _python_file(block)
            _write(project, name, block if name == block.file else _as_test(block))
            if Path(name).name.startswith("test_"):
                tests[Path(name).stem] = block
        elif block.language in ("ini", "cfg"):
            _check_parses(block, lambda text: configparser.ConfigParser().read_string(text))
        elif block.language == "toml" and tomllib is not None:
            _check_parses(block, tomllib.loads)
        elif block.language in ("yaml", "yml"):
            _check_parses(block, lambda text: list(yaml.safe_load_all(text)))
        elif block.language == "json":
            _check_parses(block, json.loads)
        elif block.language in SHELL:
            problems = list(_shell_problems(block.text))
            assert not problems, f"{block.where}: " + "; ".join(problems)
        if block.file and block.language not in PYTHON:
            _write(project, block.file, block)
    if not tests:
        return
    if not any((project / name).exists() for name in ("pytest.ini", "pyproject.toml", "setup.cfg")):
        (project / "pytest.ini").write_text("[pytest]\n")
    result = _run_child_pytest(project, pytestconfig)
    files = ", ".join(f"{name} = {block.where}" for name, block in tests.items())
    shown = f"{files}\n{result.stdout[-6000:]}"
    assert result.returncode == 0, (
        f"the examples of {_page_id(page)} failed:\n{shown}\n{result.stderr[-2000:]}"
    )
    assert not re.search(r"\d+ skipped", result.stdout), f"an example was skipped, not run:\n{shown}"
    assert re.search(r"\d+ passed", result.stdout), shown


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
    assert project in target.resolve().parents, f"{block.where}: file={name} leaves the project"
    target.parent.mkdir(parents=True, exist_ok=True)
    if block.language in PYTHON:
        compile(block.text, block.where, "exec")
    target.write_text(block.text)


def _check_parses(block: Block, parse: object) -> None:
    try:
        parse(block.text)  # type: ignore[operator]
    except Exception as error:
        pytest.fail(f"{block.where}: the {block.language} block does not parse: {error}", pytrace=False)


def _run_child_pytest(project: Path, pytestconfig: pytest.Config) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in CHILD_ENV_DROPPED}
    if (project / "manager" / "go.mod").exists() or any(project.glob("*/go.mod")):
        # A page's go.mod comes without go.sum: -mod=mod fills it in, as the page's `go mod tidy` does.
        env["GOFLAGS"] = f"{env.get('GOFLAGS', '')} -mod=mod".strip()
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs"]
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    if version:
        command += ["--ktest-k8s-version", str(version)]
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
    )


# ------------------------------------------------------------------------------- shell blocks


def _commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell block (continuations joined, comments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        command: list[str] = []
        for word in words:
            if word in ("&&", "||", ";", "|"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)
        if command:
            yield command


def _shell_problems(text: str) -> Iterator[str]:
    for command in _commands(text):
        while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):  # VAR=value cmd
            command = command[1:]
        if not command:
            continue
        program = Path(command[0]).name
        if program == "ktest":
            yield from _ktest_problems(command)
        elif program == "pytest" or command[:3] == ["python", "-m", "pytest"]:
            yield from _pytest_problems(command)
        elif program == "pip" and "install" in command:
            yield from _pip_problems(command)
        elif program == "make":
            yield from _make_problems(command)


def _ktest_problems(command: list[str]) -> Iterator[str]:
    parsers = dict(hooks.commands())
    name = "ktest"
    for word in command[1:]:
        if f"{name} {word}" in parsers:
            name = f"{name} {word}"
        elif not word.startswith("-"):
            break
    if len(command) > 1 and name == "ktest" and not command[1].startswith("-"):
        yield f"`ktest {command[1]}` is no ktest command"
        return
    known = {option for action in parsers[name]._actions for option in action.option_strings}
    for word in command[1:]:
        for option in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", word):
            if option not in known:
                yield f"`{name}` has no option {option}"


def _pytest_options() -> set[str]:
    from ktest.config import SETTINGS

    known = {spec.option for spec in SETTINGS}
    known |= {f"--ktest-no-{spec.option.removeprefix('--ktest-')}" for spec in SETTINGS if spec.flag}
    return known


def _pytest_problems(command: list[str]) -> Iterator[str]:
    known = _pytest_options()
    for word in command:
        for option in re.findall(r"(?<![\w-])(--ktest-[a-z0-9-]+)", word):
            if option not in known:
                yield f"pytest has no option {option} (ktest's are: {', '.join(sorted(known))})"


def _pip_problems(command: list[str]) -> Iterator[str]:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]) \
        if tomllib else set()
    for word in command:
        match = re.match(r"^(?:ktest|\.|dist/ktest-[^\[]+\.whl)\[([a-z0-9,-]+)\]$", word)
        if match and extras:
            for extra in match[1].split(","):
                if extra not in extras:
                    yield f"ktest has no extra {extra!r} (it has: {', '.join(sorted(extras))})"


def _make_problems(command: list[str]) -> Iterator[str]:
    makefile = (ROOT / "Makefile").read_text()
    for word in command[1:]:
        if word.startswith("-") or "=" in word:
            continue
        if not re.search(rf"^{re.escape(word)}:", makefile, re.MULTILINE):
            yield f"the Makefile has no target {word!r}"


# ---------------------------------------------------------------------------- the directives


def test_skipped_blocks_say_why_and_stay_rare() -> None:
    every = [block for page in pages() for block in blocks(page)]
    skipped = [block for block in every if block.skip is not None]
    assert not [block.where for block in skipped if block.skip == "(no reason)"], "skip needs a reason"
    python = [block for block in every if block.language in PYTHON]
    skipped_python = [block for block in skipped if block.language in PYTHON]
    assert len(skipped_python) <= max(3, len(python) // 5), (
        "too many Python blocks do not run:\n" + "\n".join(f"{b.where}: {b.skip}" for b in skipped_python)
    )


def test_the_shell_check_finds_wrong_commands() -> None:
    """The shell check is no rubber stamp: each kind of mistake it exists for is reported."""
    wrong = textwrap.dedent("""\
        ktest binaries install --k8s-versoin 1.37
        ktest frobnicate
        pytest --ktest-bakend kind
        pip install "ktest[kopff]"
        make tets
        """)
    problems = list(_shell_problems(wrong))
    assert len(problems) == 5, problems
    right = 'ktest binaries install --k8s-version 1.37\npytest --ktest-backend kind\nmake test\n'
    assert not list(_shell_problems(right))
