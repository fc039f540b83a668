"""ktest's public API has its real types for type checkers, as a user's code sees it.

``mypy --strict`` and pyright check a user's test module written from the quick start
(``typed_usage/user_suite.py``, its kopf operator ``typed_usage/operator.py``): it must be
clean. They also check planted misuse (``typed_usage/misuse.py``): each marked line must be
reported with the marked error code, and ``reveal_type`` must show real types. Before the
public names had type-checking imports they were ``Any`` to both checkers, and the misuse
passed unseen.

ktest is found through the checkers' search path (the repository root), as an installed
package would be; errors inside ktest's own modules are ``mypy ktest``'s business, not this
test's (mypy does not report them for installed packages either).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SAMPLES = Path(__file__).with_name("typed_usage")
REPO = Path(__file__).resolve().parents[1]
CLEAN = ("user_suite.py", "operator.py")
MISUSE = "misuse.py"
EXPECT = re.compile(r"# expect: (?P<mypy>[\w-]+) \| (?P<pyright>\w+)$")
REVEALS = re.compile(r"reveal_type\(.*# reveals: (?P<pattern>.+)$")
# Each checker's run is a module fixture that every test of it reads: on one pytest-xdist worker
# (``--dist loadgroup``, as make test runs) mypy and pyright run once, not once per worker.
pytestmark = pytest.mark.xdist_group("type-checkers")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    severity: str  # "error", "note"/"information"
    code: str
    message: str


def _marked(pattern: re.Pattern[str], group: str) -> dict[int, str]:
    lines = (SAMPLES / MISUSE).read_text().splitlines()
    return {n: m[group] for n, text in enumerate(lines, 1) if (m := pattern.search(text))}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample files in a directory of their own, away from the repository's configuration."""
    directory = tmp_path_factory.mktemp("typed_usage")
    for sample in (*CLEAN, MISUSE):
        shutil.copy(SAMPLES / sample, directory / sample)
    return directory


@pytest.fixture(scope="module")
def mypy_findings(workdir: Path) -> list[Finding]:
    (workdir / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\nmypy_path = {REPO}\ncache_dir = {workdir / '.mypy_cache'}\n"
        "show_error_codes = True\nhide_error_context = True\n\n[mypy-ktest.*]\nignore_errors = True\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-pretty", *CLEAN, MISUSE],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )
    line = re.compile(
        r"^(?P<file>[\w.]+):(?P<line>\d+): (?P<severity>\w+): (?P<message>.*?)(  \[(?P<code>[\w-]+)\])?$"
    )
    findings = [
        Finding(m["file"], int(m["line"]), m["severity"], m["code"] or "", m["message"])
        for m in map(line.match, result.stdout.splitlines()) if m
    ]
    assert findings, f"mypy said nothing we could read:\n{result.stdout}\n{result.stderr}"
    return findings


@pytest.fixture(scope="module")
def pyright_findings(workdir: Path) -> list[Finding]:
    (workdir / "pyrightconfig.json").write_text(json.dumps({
        "typeCheckingMode": "standard", "extraPaths": [str(REPO)], "include": [*CLEAN, MISUSE],
    }))
    pyright = Path(sys.executable).with_name("pyright")
    result = subprocess.run(
        [str(pyright), "--outputjson", "--pythonpath", sys.executable],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )
    report = json.loads(result.stdout)
    return [
        Finding(Path(d["file"]).name, d["range"]["start"]["line"] + 1, d["severity"], d.get("rule", ""),
                d["message"])
        for d in report["generalDiagnostics"]
    ]


def _errors(findings: list[Finding], file: str) -> list[Finding]:
    return [f for f in findings if f.file == file and f.severity == "error"]


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_the_quick_start_user_code_type_checks_clean(checker: str, request: pytest.FixtureRequest) -> None:
    findings: list[Finding] = request.getfixturevalue(f"{checker}_findings")
    errors = [f for sample in CLEAN for f in _errors(findings, sample)]
    assert not errors, "\n".join(f"{f.file}:{f.line}: {f.message} [{f.code}]" for f in errors)


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_planted_misuse_is_reported_with_its_error_code(checker: str, request: pytest.FixtureRequest) -> None:
    findings: list[Finding] = request.getfixturevalue(f"{checker}_findings")
    expected = _marked(EXPECT, checker)
    reported = {f.line: f.code for f in _errors(findings, MISUSE)}
    missed = {line: code for line, code in expected.items() if reported.get(line) != code}
    unexpected = {line: code for line, code in reported.items() if line not in expected}
    lines = (SAMPLES / MISUSE).read_text().splitlines()
    assert not missed, "not reported as marked (the name is Any to the checker?):\n" + "\n".join(
        f"{MISUSE}:{line}: {lines[line - 1].strip()} (got {reported.get(line)!r})" for line in missed
    )
    assert not unexpected, f"reported but not marked: {unexpected}"


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_public_names_reveal_their_real_types(checker: str, request: pytest.FixtureRequest) -> None:
    findings: list[Finding] = request.getfixturevalue(f"{checker}_findings")
    revealed = {
        f.line: m[1]
        for f in findings
        if f.file == MISUSE and (m := re.search(r'(?:Revealed type is|Type of ".*" is) "(.*)"$', f.message))
    }
    wrong = {
        line: revealed.get(line)
        for line, pattern in _marked(REVEALS, "pattern").items()
        if not re.fullmatch(pattern, revealed.get(line, ""))
    }
    assert not wrong, f"revealed types (line: type) not matching the marked ones: {wrong}"


def test_ktest_defines_no_descriptors_type_checkers_cannot_follow() -> None:
    """An attribute built from a string naming another (``verb = Delegated("request")``) is an
    attribute checkers cannot follow: a misspelt name fails only when read, and its type is
    whatever the descriptor's annotation claims. ktest writes properties instead: no class of its
    own defines ``__get__``."""
    descriptors = [
        f"{path.relative_to(REPO)}:{node.lineno} {node.name}"
        for path in sorted((REPO / "ktest").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(item, ast.FunctionDef) and item.name == "__get__" for item in node.body)
    ]
    assert not descriptors, f"descriptor classes (write a @property instead): {descriptors}"
