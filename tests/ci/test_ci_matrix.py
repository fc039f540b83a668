"""scripts/ci/matrix.py: versions x backends x shards, and bad input caught in the first seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matrix
import pytest
from ci_helpers import read_outputs, run_ci_script, run_script
from gha import CIError

REPORT = {"default": "1.37", "supported": ["1.37", "1.36", "1.35"]}


def test_one_entry_per_version_backend_and_shard() -> None:
    include = matrix.build_matrix(["1.37", "1.36"], ["bare", "kind"], 2, REPORT)
    assert [(e["k8s-version"], e["backend"], e["shard"]) for e in include] == [
        ("1.37", "bare", 1),
        ("1.37", "bare", 2),
        ("1.37", "kind", 1),
        ("1.37", "kind", 2),
        ("1.36", "bare", 1),
        ("1.36", "bare", 2),
        ("1.36", "kind", 1),
        ("1.36", "kind", 2),
    ]
    assert include[1]["name"] == "1.37 bare 2/2"
    assert include[1]["artifact"] == "1.37-bare-2of2"
    assert len({e["artifact"] for e in include}) == len(include)  # artifact names must not collide


def test_unsharded_names_have_no_shard_suffix() -> None:
    assert [e["name"] for e in matrix.build_matrix(["1.36"], ["kind"], 1, REPORT)] == ["1.36 kind"]


def test_supported_default_latest_and_exact_releases() -> None:
    versions = [e["k8s-version"] for e in matrix.build_matrix(["supported"], ["bare"], 1, REPORT)]
    assert versions == ["1.37", "1.36", "1.35"]
    versions = [
        e["k8s-version"] for e in matrix.build_matrix(["default", "latest", "v1.35.4"], ["bare"], 1, REPORT)
    ]
    assert versions == ["1.37", "1.35.4"]  # default and latest are both 1.37 here: one cell


@pytest.mark.parametrize(
    ("versions", "backends", "shards", "message"),
    [
        (
            ["1.30"],
            ["bare"],
            1,
            r"'1.30' is not supported by ktest; supported: 1.37, 1.36, 1.35 \(default 1.37\)",
        ),
        (["1.37.x"], ["bare"], 1, r"'1.37.x' is not supported"),
        (["1.37"], ["docker"], 1, r"backend 'docker' is not one of: bare, kind"),
        (["1.37"], ["bare"], 0, r"shards must be between 1 and 32, got 0"),
        (["1.37"], ["bare"], 33, r"shards must be between 1 and 32, got 33"),
    ],
)
def test_bad_input_is_named(versions: list[str], backends: list[str], shards: int, message: str) -> None:
    with pytest.raises(CIError, match=message):
        matrix.build_matrix(versions, backends, shards, REPORT)


def test_lists_are_json_or_comma_separated_and_deduplicated() -> None:
    assert matrix.parse_list('["1.37", "1.36", "1.37"]', "k8s-versions") == ["1.37", "1.36"]
    assert matrix.parse_list(" 1.37 , 1.36,", "k8s-versions") == ["1.37", "1.36"]
    with pytest.raises(CIError, match=r"k8s-versions: '\[1.37' is not a valid JSON list"):
        matrix.parse_list("[1.37", "k8s-versions")
    with pytest.raises(CIError, match="backends is empty"):
        matrix.parse_list("[]", "backends")


def test_the_script_builds_the_matrix_from_real_ktest_versions_output(tmp_path: Path) -> None:
    versions = run_script([str(Path(sys.executable).parent / "ktest"), "versions", "--json"], cwd=tmp_path)
    assert versions.returncode == 0, versions.stderr
    (tmp_path / "versions.json").write_text(versions.stdout)
    output = tmp_path / "out"
    done = run_ci_script(
        "matrix.py", "--versions-json", "versions.json", "--k8s-versions", "supported",
        "--backends", '["bare","kind"]', "--shards", "2",
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(output)},
    )
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output)
    include = json.loads(outputs["matrix"])["include"]
    supported = json.loads(versions.stdout)["supported"]
    assert {e["k8s-version"] for e in include} == set(supported)
    assert outputs["cells"] == str(len(supported) * 2 * 2) == str(len(include))


def test_the_script_fails_on_an_unknown_version_with_the_list(tmp_path: Path) -> None:
    (tmp_path / "versions.json").write_text(json.dumps(REPORT))
    done = run_ci_script(
        "matrix.py", "--versions-json", "versions.json", "--k8s-versions", "1.99",
        cwd=tmp_path,
        env={"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_ACTIONS": "true"},
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "::error::Kubernetes version '1.99' is not supported by ktest; supported: 1.37"
    )
