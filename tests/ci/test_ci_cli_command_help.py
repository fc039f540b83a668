"""A ``ktest`` command given without its subcommand prints that command's own help (not the top
level's) on stderr and exits 2."""

from __future__ import annotations

import pytest

from ktest.cli.main import main


@pytest.mark.parametrize("command", ["binaries", "init", "kind", "rbac"])
def test_a_command_without_its_subcommand_prints_its_own_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"usage: ktest {command} [-h]"), captured.err
    assert "SUBCOMMAND" in captured.err or "TARGET" in captured.err
    assert captured.out == ""


def test_ktest_without_a_command_prints_the_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: ktest [-h]")
