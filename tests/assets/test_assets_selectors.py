"""Version selectors: what parses, what each form selects, what is rejected."""

from __future__ import annotations

import pytest

from ktest.assets import parse_selector
from ktest.assets.selectors import parse_stable_version, sort_versions
from ktest.errors import AssetsError

KNOWN = ["1.35.4", "1.37.2", "1.36.1", "1.37.0", "1.36.3", "1.38.0-beta.0"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.37.2", "1.37.2"),
        ("v1.37.2", "1.37.2"),
        (" 1.37.2 ", "1.37.2"),
        ("1.37", "1.37.2"),
        ("v1.36", "1.36.3"),
        ("1.35", "1.35.4"),
        ("latest", "1.37.2"),
        ("", "1.37.2"),
        (None, "1.37.2"),
    ],
)
def test_selector_picks_newest_matching_stable_release(text: str | None, expected: str) -> None:
    assert parse_selector(text).newest_match(KNOWN) == expected


def test_exact_selector_reports_its_version_and_ignores_the_list() -> None:
    selector = parse_selector("1.37.1")
    assert selector.is_exact
    assert selector.exact_version == "1.37.1"
    assert selector.newest_match(KNOWN) is None  # 1.37.1 is not known: no silent substitute


def test_minor_selector_without_any_release_matches_nothing() -> None:
    assert parse_selector("1.99").newest_match(KNOWN) is None


def test_latest_never_picks_a_pre_release() -> None:
    assert parse_selector("latest").newest_match(["1.38.0-beta.0", "1.37.2"]) == "1.37.2"
    assert not parse_selector("latest").matches("1.38.0-beta.0")


@pytest.mark.parametrize(
    "text", ["1", "1.x", "1.37.2.1", "one", "1.37-rc", "1.38.0-beta.0", "=1.37", "~1.37", "v"]
)
def test_malformed_selector_is_rejected_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(AssetsError) as caught:
        parse_selector(text)
    message = str(caught.value)
    assert repr(text) in message
    assert "1.37.2" in message and "latest" in message


def test_major_version_other_than_one_is_rejected() -> None:
    with pytest.raises(AssetsError, match="major version 2"):
        parse_selector("2.0")


def test_version_ordering_is_numeric_not_lexical() -> None:
    assert sort_versions(["1.9.0", "1.10.0", "v1.10.0", "1.2.11", "junk"]) == [
        "1.10.0",
        "1.9.0",
        "1.2.11",
    ]
    assert parse_stable_version("v1.37.2") == (1, 37, 2)
    assert parse_stable_version("1.37.2-rc.1") is None


@pytest.mark.parametrize(
    ("text", "minor_text", "full", "tag"),
    [
        ("1.37.2", "1.37", "1.37.2", "v1.37.2"),
        ("v1.37.2", "1.37", "1.37.2", "v1.37.2"),
        ("v1.36", "1.36", "1.36", "v1.36"),
        ("v1.35.4+k3s1", "1.35", "1.35.4", "v1.35.4"),
        (" 1.35.4-gke.100 ", "1.35", "1.35.4", "v1.35.4"),
    ],
)
def test_a_version_is_a_value_asked_for_its_parts(text: str, minor_text: str, full: str, tag: str) -> None:
    from ktest.assets.selectors import KubeVersion

    version = KubeVersion.parse(text)
    assert (version.minor_text, version.text, version.tag, str(version)) == (minor_text, full, tag, full)
    assert KubeVersion.parse("1.9") < KubeVersion.parse("1.10")


@pytest.mark.parametrize("text", ["", "latest", "1", "one.two", "1.x.3"])
def test_what_is_not_a_version_is_named(text: str) -> None:
    from ktest.assets.selectors import KubeVersion

    with pytest.raises(AssetsError, match=r"is not a Kubernetes version; write it like 1.37.2"):
        KubeVersion.parse(text)


def test_settings_carry_the_version_as_a_selector() -> None:
    from ktest.config import resolve_settings

    assert resolve_settings(env={"KTEST_K8S_VERSION": "v1.36"}).k8s_selector.minor == 36
    assert resolve_settings(env={}).k8s_selector.is_latest
