"""Reading Go versions: a release candidate is not newer than its release."""

from __future__ import annotations

import pytest

from ktest.assets.gotool import version_numbers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.25.3", (1, 25, 3)),
        ("1.26", (1, 26)),
        ("1.25rc1", (1, 25)),
        ("1.25beta2", (1, 25)),
        ("1.25.0-rc.1", (1, 25, 0)),
        ("devel", ()),
    ],
)
def test_only_the_leading_numeric_parts_count(text: str, expected: tuple[int, ...]) -> None:
    assert version_numbers(text) == expected


def test_a_release_candidate_is_older_than_the_release_a_go_mod_asks_for() -> None:
    assert version_numbers("1.25rc1") < version_numbers("1.25.0")
