"""A cold ``build_go_binary`` inside ``pytest -q`` shows its progress on the terminal while pytest
captures the test's output (an inner session building a tiny Go module into a fresh cache)."""

from __future__ import annotations

import shutil

import pytest

HELLO_GO = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n'

INNER = """
from pathlib import Path

from ktest.operators import build_go_binary


def test_builds_quietly_captured(tmp_path):
    binary = build_go_binary(Path("hello"), cache_dir=tmp_path / "operators")
    assert binary.is_file()
"""


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")
def test_a_cold_go_build_shows_progress_on_the_terminal_under_capture(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.mkdir("hello")
    (pytester.path / "hello" / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (pytester.path / "hello" / "main.go").write_text(HELLO_GO)
    pytester.makepyfile(test_inner=INNER)

    result = pytester.runpytest_subprocess("-q", "-p", "no:randomly", timeout=300)

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"ktest: building Go operator hello from {pytester.path / 'hello'} (once; cached afterwards)*",
            "ktest: building Go operator hello ... done in *",
        ]
    )
    assert "Captured stderr" not in result.stdout.str()
