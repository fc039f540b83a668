"""``ktest versions``: supported/default minors without network, resolved patches, bad selectors."""

from __future__ import annotations

import json

import pytest

from ktest.cli.main import main
from ktest.backends.kind import recipe


def test_json_lists_supported_default_and_backends(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["versions", "--json", "--k8s-version", "1.36.3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["supported"] == sorted(recipe.MINORS, key=lambda m: int(m.split(".")[1]), reverse=True)
    assert report["default"] == recipe.DEFAULT_MINOR
    assert report["backends"] == ["bare", "kind"]
    assert report["kind_version"] == recipe.KIND_VERSION
    assert report["resolved"] == {"1.36.3": "1.36.3"}


def test_every_supported_minor_gets_a_resolved_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["versions", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["resolved"]) == report["supported"]
    for minor, patch in report["resolved"].items():
        assert patch is None or patch.startswith(minor + ".")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("1.20", "Kubernetes version '1.20' is not supported by ktest: supported minors are"),
        ("banana", "Kubernetes version selector 'banana' is not valid"),
    ],
)
def test_bad_selectors_exit_2_naming_what_is_supported(
    capsys: pytest.CaptureFixture[str], selector: str, message: str
) -> None:
    assert main(["versions", "--k8s-version", selector]) == 2
    assert message in capsys.readouterr().err
