"""scripts/ci/durations.py: merging the shards' pytest-split durations, and the even-split fallback."""

from __future__ import annotations

import json
from pathlib import Path

import durations
import pytest
from ci_helpers import read_outputs, run_ci_script
from gha import CIError


def test_all_shards_reported_gives_their_union_and_drops_removed_tests() -> None:
    base = {"t::a": 1.0, "t::b": 2.0, "t::gone": 9.0}
    merged = durations.merge([{"t::a": 1.5}, {"t::b": 2.5, "t::new": 0.5}], expected=2, base=base)
    assert merged.complete
    assert merged.durations == {"t::a": 1.5, "t::b": 2.5, "t::new": 0.5}
    assert merged.dropped == 1


def test_a_missing_shard_keeps_the_old_durations_of_its_tests() -> None:
    base = {"t::a": 1.0, "t::b": 2.0}
    merged = durations.merge([{"t::a": 1.5}], expected=2, base=base)
    assert not merged.complete
    assert merged.durations == {"t::a": 1.5, "t::b": 2.0}


def test_a_test_run_in_two_cells_keeps_the_longer_duration() -> None:
    merged = durations.merge([{"t::a": 1.0}, {"t::a": 3.0}], expected=2)
    assert merged.durations == {"t::a": 3.0}
    assert merged.duplicates == ["t::a"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"is not JSON"),
        ('["t::a"]', r"a list that is not \[test, seconds\] pairs"),
        ('{"t::a": "slow"}', r"'t::a' has 'slow', not a duration in seconds"),
        ('{"t::a": -1}', r"'t::a' has -1"),
        ("3", r"expected an object of test id -> seconds"),
    ],
)
def test_a_bad_durations_file_is_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(content)
    with pytest.raises(CIError, match=f"durations file {path}.*{message}"):
        durations.read_durations(path)


def test_the_old_list_of_pairs_format_is_read(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('[["t::a", 1.5]]')
    assert durations.read_durations(path) == {"t::a": 1.5}


def test_check_falls_back_to_an_even_split_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json"
    assert durations.check(missing) is False
    assert "no recorded test durations" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert durations.check(broken) is False
    assert "removed, so pytest-split splits the tests evenly" in capsys.readouterr().err
    assert not broken.exists()
    good = tmp_path / "good.json"
    good.write_text('{"t::a": 1}')
    assert durations.check(good) is True


SUITE = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_number(n):
    assert sum(range(n * 1000)) >= 0
"""


def _inner_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A real pytest session with pytest-split, in this process (no fresh interpreter needed)."""
    return pytester.runpytest_inprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function",
        *args,
    )


def test_pytest_split_shards_then_merge_then_balanced_next_run(pytester: pytest.Pytester) -> None:
    """The real cycle: two shards with pytest-split write their durations; the merge covers every
    test; the next run reads the merged file (no 'No test durations found' fallback)."""
    pytester.makepyfile(test_suite=SUITE)
    tmp_path = pytester.path
    shard_files = []
    for group in (1, 2):
        shard = tmp_path / f"durations-{group}.json"
        done = _inner_pytest(
            pytester,
            "--splits",
            "2",
            "--group",
            str(group),
            "--durations-path",
            str(shard),
            "--store-durations",
            "--clean-durations",
            "test_suite.py",
        )
        output = done.stdout.str() + done.stderr.str()
        assert done.ret == 0, output
        assert "No test durations found" in output  # first run: even split
        shard_files.append(shard)
    first, second = (set(json.loads(path.read_text())) for path in shard_files)
    assert first and second and not first & second  # each shard recorded only its own tests
    output_file = tmp_path / "out"
    merged_path = tmp_path / "merged.json"
    merge = run_ci_script(
        "durations.py", "merge", "--output", str(merged_path), "--expected", "2", *map(str, shard_files),
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(output_file)},
    )
    assert merge.returncode == 0, merge.stderr
    merged = json.loads(merged_path.read_text())
    assert set(merged) == {f"test_suite.py::test_number[{n}]" for n in range(6)}
    assert read_outputs(output_file) == {"tests": "6", "complete": "true"}
    again = _inner_pytest(
        pytester, "--splits", "2", "--group", "1", "--durations-path", str(merged_path), "test_suite.py"
    )
    output = again.stdout.str() + again.stderr.str()
    assert again.ret == 0, output
    assert "No test durations found" not in output


def test_merge_notes_missing_shards(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text('{"t::a": 1, "t::b": 2}')
    shard = tmp_path / "s1.json"
    shard.write_text('{"t::a": 4}')
    done = run_ci_script(
        "durations.py", "merge", "--output", str(base), "--base", str(base), "--expected", "3", str(shard),
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(tmp_path / "out")},
    )
    assert done.returncode == 0, done.stderr
    assert "1 of 3 shards recorded durations" in done.stderr
    assert json.loads(base.read_text()) == {"t::a": 4, "t::b": 2}
